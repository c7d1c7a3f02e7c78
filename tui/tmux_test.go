package tui

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
)

// TestTmuxDrawsTextAsMeasured prints each tricky text, as the viewer
// shows it, in a real tmux pane and checks that tmux puts the cursor
// where the layout's measure says the text ends.
func TestTmuxDrawsTextAsMeasured(t *testing.T) {
	t.Parallel()
	tm := newTmux(t, 120, 5)
	for i, s := range tricky {
		shown := clean(s)
		file := filepath.Join(tm.dir, strconv.Itoa(i))
		// The text, then a mark to wait for, alone on the first line.
		if err := os.WriteFile(file, []byte("\x1b[H\x1b[2J"+shown+"|"), 0o600); err != nil {
			t.Fatal(err)
		}
		tm.run("respawn-pane", "-k", "cat "+file+"; exec cat")
		deadline := time.Now().Add(5 * time.Second)
		for !strings.HasSuffix(strings.TrimRight(tm.run("capture-pane", "-p", "-S", "0", "-E", "0"), " \n"), "|") {
			if time.Now().After(deadline) {
				t.Fatalf("tmux never showed %q", shown)
			}
			time.Sleep(20 * time.Millisecond)
		}
		x, err := strconv.Atoi(strings.TrimSpace(tm.run("display-message", "-p", "#{cursor_x}")))
		if err != nil {
			t.Fatal(err)
		}
		if want := ansi.StringWidth(shown) + 1; x != want {
			t.Errorf("tmux draws %q (shown as %q) %d cells wide; the layout counts %d", s, shown, x-1, want-1)
		}
	}
}

// tmuxServer is a tmux server of the test's own, on a socket in a
// temporary directory, with one pane that keeps its last screen once its
// process has ended.
type tmuxServer struct {
	t      *testing.T
	dir    string
	socket string
	n      int // files written
	// The viewer started last: its standard error, exit status and pid.
	stderr, status, pidFile string
}

func newTmux(t *testing.T, w, h int) *tmuxServer {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no tmux found: the viewer is checked in a real tmux (install the tmux package)")
		}
		t.Skip("SKIP: no tmux found; this test checks the viewer in a real tmux (install tmux)")
	}
	dir := t.TempDir()
	s := &tmuxServer{t: t, dir: dir, socket: filepath.Join(dir, "tmux.sock")}
	s.run("new-session", "-d", "-x", strconv.Itoa(w), "-y", strconv.Itoa(h), "cat")
	t.Cleanup(func() { exec.Command("tmux", "-S", s.socket, "kill-server").Run() })
	s.run("set-option", "-g", "remain-on-exit", "on")
	s.run("set-option", "-g", "set-clipboard", "on")
	return s
}

func (s *tmuxServer) run(args ...string) string {
	s.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-S", s.socket, "-f", "/dev/null"}, args...)...)
	cmd.Env = append(os.Environ(), "LANG=C.UTF-8", "LC_ALL=C.UTF-8")
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}
