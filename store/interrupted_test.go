package store

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cancelAtUpgrade is a log handler that ends a context when the upgrade
// says it begins: the next statement, the first step's, finds it ended.
type cancelAtUpgrade struct {
	slog.Handler
	cancel context.CancelFunc
}

func (cancelAtUpgrade) Enabled(context.Context, slog.Level) bool { return true }

func (h cancelAtUpgrade) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "upgrading the database schema") {
		h.cancel()
	}
	return nil
}

// TestUpgradeStoppedInAStepSaysItResumes: Ctrl-C during a schema upgrade
// rolls the step back; the error says so, and that the next start resumes,
// rather than a bare "context canceled" that reads like damage. The next
// open then finishes the upgrade.
func TestUpgradeStoppedInAStepSaysItResumes(t *testing.T) {
	sqliteOnly(t, "the upgrade path from older schemas is SQLite's")
	old, err := os.ReadFile(filepath.Join("testdata", "legacy", "v8-before-search.db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), DBFile)
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err = openSQLite(ctx, path, indexInterval, slog.New(cancelAtUpgrade{Handler: slog.DiscardHandler, cancel: cancel}))

	var stopped *UpgradeInterruptedError
	if !errors.As(err, &stopped) || !errors.Is(err, context.Canceled) {
		t.Fatalf("open stopped mid-upgrade: %v, want an UpgradeInterruptedError", err)
	}
	want := "stopped while upgrading the database schema (at " + stopped.Step + "): nothing of that step was kept; the upgrade resumes at the next start"
	if !strings.HasSuffix(stopped.Step, ".sql") || stopped.Error() != want {
		t.Errorf("said %q", stopped.Error())
	}

	s, err := OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatalf("the next open: %v", err)
	}
	defer s.Close()
	all, err := migrationFiles("migrations")
	if err != nil {
		t.Fatal(err)
	}
	latest := all[len(all)-1].version
	var version int
	if err := s.rdb.QueryRow(`SELECT version FROM schema_version`).Scan(&version); err != nil || version != latest {
		t.Errorf("schema version %d (%v) after the next open, want %d", version, err, latest)
	}
}
