//go:build linux

package tui

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestTmuxSignalsQuitCleanly ends the viewer, in a real tmux pane, by
// SIGTERM (kill, timeout) many times over, and by SIGHUP (the terminal
// closed): each time it must exit with status 0 and give the pane back as
// it was, out of the alternate screen with the cursor shown.
func TestTmuxSignalsQuitCleanly(t *testing.T) {
	t.Parallel()
	e, tm := seededTmux(t)
	for i := range 21 {
		sig, name := syscall.SIGTERM, "SIGTERM"
		if i == 20 {
			sig, name = syscall.SIGHUP, "SIGHUP"
		}
		what := name + " (run " + strconv.Itoa(i+1) + ")"
		tm.startLive(e, e.boot.Secret)
		out := tm.record()
		if err := syscall.Kill(tm.pid(), sig); err != nil {
			t.Fatal(err)
		}
		if st := tm.waitExit(); st != 0 {
			t.Errorf("%s: exit status %d, want 0", what, st)
		}
		tm.checkRestored(what, out())
		if t.Failed() {
			return
		}
	}
}

// TestTmuxCopyCode presses c in a real tmux 3.3, whose default
// allow-passthrough off drops a wrapped OSC 52: the code must end up in
// tmux's paste buffer, and the status line say so.
func TestTmuxCopyCode(t *testing.T) {
	t.Parallel()
	e, tm := seededTmux(t)
	tm.startLive(e, e.boot.Secret)
	tm.run("send-keys", "c")
	tm.waitText("copied the code 482915 to tmux's paste buffer")
	if got := tm.run("show-buffer"); got != "482915" {
		t.Errorf("tmux's buffer holds %q, want the code 482915", got)
	}
	tm.run("send-keys", "q")
	if st := tm.waitExit(); st != 0 {
		t.Errorf("exit status %d after q", st)
	}
}

// TestTmuxKeyRevoked revokes the viewer's key while it runs: the viewer
// must end as it would have at the start, with exit status 2, one line
// on standard error, and the terminal given back.
func TestTmuxKeyRevoked(t *testing.T) {
	t.Parallel()
	e, tm := seededTmux(t)
	key, secret, err := e.st.CreateKey(t.Context(), e.boot.Project.ID)
	if err != nil {
		t.Fatal(err)
	}
	stderr := tm.startLive(e, secret)
	out := tm.record()
	if _, err := e.st.RevokeKey(t.Context(), key.ID); err != nil {
		t.Fatal(err)
	}
	if st := tm.waitExit(); st != 2 {
		t.Errorf("exit status %d after the key was revoked, want 2", st)
	}
	tm.checkRestored("revoked key", out())
	b, err := os.ReadFile(stderr)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); strings.Count(got, "\n") != 1 || !strings.Contains(got, "refused the key") {
		t.Errorf("standard error %q, want one line saying the key was refused", got)
	}
}

// TestTmuxFilterTakesKeyNames types into the filter, all at once as a
// fast typist or an unmarked paste does, words that are names of keys.
func TestTmuxFilterTakesKeyNames(t *testing.T) {
	t.Parallel()
	e, tm := seededTmux(t)
	tm.startLive(e, e.boot.Secret)
	tm.run("send-keys", "/")
	tm.waitText("esc cancels")
	for _, words := range []string{"delete", " up down left right", " home end backspace"} {
		tm.run("send-keys", "-l", words)
	}
	tm.waitText("/delete up down left right home end backspace")
	tm.run("send-keys", "Escape")
	tm.waitText("? help · / filter")
	tm.run("send-keys", "q")
	if st := tm.waitExit(); st != 0 {
		t.Errorf("exit status %d after q", st)
	}
}

// seededTmux is the environment with the seeded captures, and a tmux
// server with a 100×30 pane to run the viewer in.
func seededTmux(t *testing.T) (*env, *tmuxServer) {
	t.Helper()
	e := newEnv(t)
	seed(e)
	return e, newTmux(t, 100, 30)
}

// startLive starts the viewer with key and waits until it shows the
// seeded list, live; it returns the file of the viewer's standard error.
func (s *tmuxServer) startLive(e *env, key string) string {
	s.t.Helper()
	stderr := s.startViewer(e, key)
	s.waitText("Confirm your account", "● live")
	return stderr
}
