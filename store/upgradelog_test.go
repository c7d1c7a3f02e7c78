package store

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a bytes.Buffer a logger may write from any goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The line that says the schema is being upgraded goes to the store's
// logger (serve's, in serve's format), not to slog's default.
func TestUpgradeLogsToTheStoresLogger(t *testing.T) {
	old, err := os.ReadFile(filepath.Join("testdata", "legacy", "v8-before-search.db"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, DBFile), old, 0o600); err != nil {
		t.Fatal(err)
	}
	var logged lockedBuffer
	s, err := OpenDir(t.Context(), dir, WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := logged.String(); !strings.Contains(got, `level=INFO msg="upgrading the database schema" from=8 to=`) {
		t.Errorf("the store's logger got %q", got)
	}
}
