package smtp

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// A listener failing to accept (out of file descriptors) locks every
// sender out, so it is a warning, not debug noise; but go-smtp retries
// every few milliseconds, so a burst of failures is one line.
func TestAcceptErrorsAreWarnedOnceInABurst(t *testing.T) {
	var logs bytes.Buffer
	e := &errorLog{log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	for range 5 {
		e.Printf("accept error: %s; retrying in %s", "accept tcp 127.0.0.1:2587: accept4: too many open files", "5ms")
	}
	e.Printf("error handling %v: %s", "127.0.0.1:1", "EOF") // debug: not shown
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "too many open files") {
		t.Errorf("logged %q, want one warning naming the accept error", logs.String())
	}
}
