//go:build linux

package tui

import (
	"strconv"
	"syscall"
	"testing"
)

// TestTmuxSignalsQuitCleanly ends the viewer, in a real tmux pane, by
// SIGTERM (kill, timeout) many times over, and by SIGHUP (the terminal
// closed): each time it must exit with status 0 and give the pane back as
// it was, out of the alternate screen with the cursor shown.
func TestTmuxSignalsQuitCleanly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	tm := newTmux(t, 100, 30)
	for i := range 21 {
		sig, name := syscall.SIGTERM, "SIGTERM"
		if i == 20 {
			sig, name = syscall.SIGHUP, "SIGHUP"
		}
		what := name + " (run " + strconv.Itoa(i+1) + ")"
		tm.startViewer(e, e.boot.Secret)
		tm.waitText("Confirm your account", "● live")
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
