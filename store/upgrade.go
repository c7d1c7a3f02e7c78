package store

import (
	"context"
	"database/sql"
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
