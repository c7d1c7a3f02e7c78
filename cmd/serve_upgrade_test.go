package cmd

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/pgtest"
)

// cancelAtUpgrade is a log handler that ends a context when the store says
// the schema upgrade begins: as Ctrl-C in the middle of it would.
type cancelAtUpgrade struct {
	slog.Handler
	cancel context.CancelFunc
}

func (cancelAtUpgrade) Enabled(context.Context, slog.Level) bool { return true }

func (h cancelAtUpgrade) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "upgrading the database schema" {
		h.cancel()
	}
	return nil
}

// TestServeStoppedDuringTheUpgrade: serve stopped while it upgrades an
// older data dir's schema says the step was rolled back and the upgrade
// resumes at the next start, exit status 130, rather than "open database
// …: migrate …: context canceled", which reads like damage; the next
// start finishes the upgrade and serves.
func TestServeStoppedDuringTheUpgrade(t *testing.T) {
	if pgtest.Requested() {
		t.Skip("the upgrade path from older schemas is SQLite's")
	}
	old, err := os.ReadFile(filepath.Join("..", "store", "testdata", "legacy", "v8-before-search.db"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, store.DBFile), old, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	prev := slog.Default()
	slog.SetDefault(slog.New(cancelAtUpgrade{Handler: slog.DiscardHandler, cancel: cancel}))
	var stdout, stderr syncBuffer
	code := run(ctx, []string{"serve", "--data-dir", dir, "--http", "127.0.0.1:0", "--capture", "127.0.0.1:0",
		"--smtp-starttls", "127.0.0.1:0", "--smtp-tls", "127.0.0.1:0", "--email-api", "127.0.0.1:0"}, nil, &stdout, &stderr)
	slog.SetDefault(prev)
	want := "capture: stopped while upgrading the database schema (at 0008_search.sql): nothing of that step was kept; the upgrade resumes at the next start\n"
	if code != exitInterrupted || !strings.HasSuffix(stderr.String(), want) {
		t.Errorf("exit %d, said:\n%s\nwant exit %d and %q", code, stderr.String(), exitInterrupted, want)
	}

	if banner := startServe(t, dir); !strings.Contains(banner, "Capture URL") {
		t.Errorf("the next start: %s", banner)
	}
}
