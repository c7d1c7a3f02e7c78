package cmd

import (
	"strings"
	"testing"
)

// TestTUINeedsATerminal runs `capture tui` with its output into a pipe:
// it ends with exit status 2 and one line that names the command once.
func TestTUINeedsATerminal(t *testing.T) {
	clearCaptureEnv(t)
	t.Setenv("CAPTURE_API_KEY", "cap_abc123")
	// Nothing listens there: the viewer would wait for the API, but the
	// missing terminal stops it first.
	r := capture(t, "tui", "--api", "http://127.0.0.1:1/api/v1", "--data-dir", t.TempDir())
	if r.code != 2 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "needs a terminal") ||
		strings.Count(r.stderr, "capture") != 1 {
		t.Errorf("capture tui | cat: %+v", r)
	}
}
