package server_test

import (
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/pgtest"
)

// A `capture serve` of a build that predates the data dir's lock takes
// none; a newer serve started beside it must not upgrade the database
// under it (every capture the older one stored next would fail on the new
// schema). The older serve's connections hold SQLite's lock on the
// database: the newer one sees it, says which process holds the database,
// and exits having written nothing.
func TestServeDoesNotUpgradeUnderAnotherProcess(t *testing.T) {
	if pgtest.Requested() {
		t.Skip("a PostgreSQL database has no data dir to upgrade")
	}
	t.Parallel()
	old, err := os.ReadFile(filepath.Join("..", "store", "testdata", "legacy", "v8-before-search.db"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, store.DBFile)
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	// This test's process stands in for the older serve: the database
	// open in WAL mode, no lock on the data dir.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	version := func() int {
		t.Helper()
		var v int
		if err := db.QueryRow(`SELECT version FROM schema_version`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal mode %q, %v", mode, err)
	}
	before := version()
	files := func() []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	listed := files()

	p := launchServe(t, dir)
	var exit *exec.ExitError
	if err := exitedUnserved(p); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("serve beside another process holding its database exited with %v, want status 1", err)
	}
	logs := p.logs()
	if want := "needs an upgrade, and another process (pid " + strconv.Itoa(os.Getpid()) + ") has capture.db open"; !strings.Contains(logs, want) {
		t.Errorf("serve said %q, want %q", logs, want)
	}
	if strings.Contains(logs, "upgrading the database schema") {
		t.Errorf("serve began upgrading:\n%s", logs)
	}
	if after := version(); after != before {
		t.Errorf("schema version %d, want it left at %d", after, before)
	}
	if after := files(); !slices.Equal(after, listed) {
		t.Errorf("the data dir holds %v, had %v", after, listed)
	}

	// Once the other process has let go, serve upgrades and serves.
	db.Close()
	startServe(t, dir).stop(os.Interrupt)
}

// exitedUnserved waits for serve to exit, and returns how it did; a serve
// that starts serving instead fails the test at once.
func exitedUnserved(p *serveProc) error {
	p.t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		p.mu.Lock()
		logs, logged := p.stderr.String(), p.logged
		p.mu.Unlock()
		if strings.Contains(logs, "msg=serving") {
			p.t.Fatalf("serve upgraded the database and served; stderr:\n%s", logs)
		}
		select {
		case err := <-p.done:
			p.done <- err
			return err
		case <-logged:
		case <-timeout:
			p.t.Fatalf("serve did not stop within a minute; stderr:\n%s", logs)
		}
	}
}
