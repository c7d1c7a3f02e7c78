package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"

	"github.com/capturedev/capture/store/datadir"
)

// NeedsUpgrade says whether the SQLite database at path lacks migrations
// this build brings. It only reads: a database it cannot read says false,
// and opening it reports why.
//
// A command run beside a `capture serve` of an older build must not
// upgrade the database under it: migrations fold what is already stored
// once, and what the old serve stores afterwards would keep the old
// shape, unseen by the new filters.
func NeedsUpgrade(ctx context.Context, path string) bool {
	all, err := migrationFiles("migrations")
	if err != nil || len(all) == 0 {
		return false
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return false
	}
	defer db.Close()
	var version int
	if err := db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&version); err != nil {
		return false
	}
	return version < all[len(all)-1].version
}

// HeldOpenError says that a database needing an upgrade is open in another
// process: a `capture serve` of a build that predates the data dir's lock
// (which takes none, yet its connections hold SQLite's own lock on the
// database), or another program. Upgrading under it would fail what that
// serve stores next.
type HeldOpenError struct {
	Dir string
	Pid int // 0 when not known
}

func (e *HeldOpenError) Error() string {
	who := "another process"
	if e.Pid > 0 {
		who = fmt.Sprintf("another process (pid %d)", e.Pid)
	}
	return fmt.Sprintf("the database in %s needs an upgrade, and %s has %s open: a `capture serve` of an older version "+
		"(or another program)", e.Dir, who, DBFile)
}

// CheckNotHeldOpen returns a *HeldOpenError when another process has the
// database of dir open, to be asked before upgrading it (NeedsUpgrade);
// the caller must not have it open itself (datadir.HeldOpen).
func CheckNotHeldOpen(dir string) error {
	pid, held, err := datadir.HeldOpen(filepath.Join(dir, DBFile))
	if err != nil || !held {
		return err
	}
	return &HeldOpenError{Dir: dir, Pid: pid}
}
