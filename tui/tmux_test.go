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
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no tmux found: the layout's measure is checked against a real tmux (install the tmux package)")
		}
		t.Skip("SKIP: no tmux found; this test checks the layout's measure against a real tmux (install tmux)")
	}
	dir := t.TempDir()
	socket := filepath.Join(dir, "tmux.sock")
	tmux := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("tmux", append([]string{"-S", socket, "-f", "/dev/null"}, args...)...)
		cmd.Env = append(os.Environ(), "LANG=C.UTF-8", "LC_ALL=C.UTF-8")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-x", "120", "-y", "5", "cat")
	t.Cleanup(func() { exec.Command("tmux", "-S", socket, "kill-server").Run() })
	for i, s := range tricky {
		shown := clean(s)
		file := filepath.Join(dir, strconv.Itoa(i))
		// The text, then a mark to wait for, alone on the first line.
		if err := os.WriteFile(file, []byte("\x1b[H\x1b[2J"+shown+"|"), 0o600); err != nil {
			t.Fatal(err)
		}
		tmux("respawn-pane", "-k", "cat "+file+"; exec cat")
		deadline := time.Now().Add(5 * time.Second)
		for !strings.HasSuffix(strings.TrimRight(tmux("capture-pane", "-p", "-S", "0", "-E", "0"), " \n"), "|") {
			if time.Now().After(deadline) {
				t.Fatalf("tmux never showed %q", shown)
			}
			time.Sleep(20 * time.Millisecond)
		}
		x, err := strconv.Atoi(strings.TrimSpace(tmux("display-message", "-p", "#{cursor_x}")))
		if err != nil {
			t.Fatal(err)
		}
		if want := ansi.StringWidth(shown) + 1; x != want {
			t.Errorf("tmux draws %q (shown as %q) %d cells wide; the layout counts %d", s, shown, x-1, want-1)
		}
	}
}
