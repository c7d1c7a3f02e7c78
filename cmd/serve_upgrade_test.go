package cmd

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/pgtest"
)

// cancelAtUpgrade is serve's stderr, which ends a context when the store
// logs that the schema upgrade begins: as Ctrl-C in the middle of it would.
type cancelAtUpgrade struct {
	syncBuffer
	cancel context.CancelFunc
}

func (w *cancelAtUpgrade) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`msg="upgrading the database schema" `)) {
		w.cancel()
	}
	return w.syncBuffer.Write(p)
}

// cancelAtUpgradeHandler does the same for a line logged through slog's
// default logger, where the store's upgrade line went once: a build that
// logs it there fails the test rather than upgrading to the end.
type cancelAtUpgradeHandler struct {
	slog.Handler
	cancel context.CancelFunc
}

func (cancelAtUpgradeHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h cancelAtUpgradeHandler) Handle(_ context.Context, r slog.Record) error {
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
	slog.SetDefault(slog.New(cancelAtUpgradeHandler{Handler: slog.DiscardHandler, cancel: cancel}))
	var stdout syncBuffer
	stderr := &cancelAtUpgrade{cancel: cancel}
	code := run(ctx, []string{"serve", "--data-dir", dir, "--http", "127.0.0.1:0", "--capture", "127.0.0.1:0",
		"--smtp-starttls", "127.0.0.1:0", "--smtp-tls", "127.0.0.1:0", "--email-api", "127.0.0.1:0"}, nil, &stdout, stderr)
	slog.SetDefault(prev)
	want := "capture: stopped while upgrading the database schema (at 0008_search.sql): nothing of that step was kept; the upgrade resumes at the next start\n"
	if code != exitInterrupted || !strings.HasSuffix(stderr.String(), want) {
		t.Errorf("exit %d, said:\n%s\nwant exit %d and %q", code, stderr.String(), exitInterrupted, want)
	}
	// The store's line is serve's, in serve's format, like every other.
	if !strings.Contains(stderr.String(), ` level=INFO msg="upgrading the database schema" from=8 to=`) {
		t.Errorf("serve's log holds no upgrade line of its own:\n%s", stderr.String())
	}

	if banner := startServe(t, dir); !strings.Contains(banner, "Capture URL") {
		t.Errorf("the next start: %s", banner)
	}
}
