package tui

import (
	"os"
	"testing"
)

// The in-process tests check what the viewer writes to its terminal, OSC
// 52 among it: run from inside tmux, copying would go to tmux's paste
// buffer instead. The viewer's own process (TestViewerProcess, in a pane
// of a tmux server a test started) keeps its pane's TMUX.
func TestMain(m *testing.M) {
	if os.Getenv(envProcAPI) == "" {
		os.Unsetenv("TMUX")
	}
	os.Exit(m.Run())
}
