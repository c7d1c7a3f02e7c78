package store

import (
	"context"
	"time"
)

// backend is what differs between SQLite and PostgreSQL (see the package
// doc). Methods named for the writer run on the writer goroutine only.
type backend interface {
	// rebind turns a query written with SQLite's ? and ?N placeholders
	// into the database's own; args makes arguments fit its types.
	rebind(query string) string
	args(args []any) []any

	// begin starts the writer's transactions; unavailable says whether an
	// error means the database could not take the write now (locked by
	// another process, connection lost), as opposed to a bad write, and
	// why when the error does not say it plainly.
	begin() string
	unavailable(err error) (why string, ok bool)

	// writerBegun is called right after BEGIN: it says whether settings
	// may have been changed by another connection since the writer last
	// looked, so that the batch must read the settings version.
	// writerCommitted follows a commit that read it.
	writerBegun(t *wtx) (readSettings bool, err error)
	writerCommitted()
	// announce tells other processes, inside the transaction, which
	// collections it adds captures to.
	announce(t *wtx, collections []string) error
	// settingsVersion reads the settings version now.
	settingsVersion(ctx context.Context) (int64, error)

	// lockTx holds name until the transaction ends, against other
	// processes' transactions that take it.
	lockTx(t *wtx, name string) error
	// exclusively runs fn while no other process runs anything under
	// name: after the other finishes when wait is set, else not at all
	// (then ran is false). SQLite has one serving process: it just runs.
	exclusively(ctx context.Context, name string, wait bool, fn func() error) (ran bool, err error)

	// partQuery selects a slice of ?1 bytes from byte ?2 (1-based) of
	// column in the row of table whose key column is ?3.
	partQuery(table, column, key string) string

	// allow and waitSlot are the read API's per-key rate and per-project
	// concurrent waits (see Limits).
	allow(ctx context.Context, keyID string, perSecond, burst int) (retry time.Duration, ok bool, err error)
	waitSlot(ctx context.Context, projectID string, slots int, hold time.Duration) (release func(), ok bool, err error)

	// Full-text search (q=, SPEC §16) joins here when it lands: the
	// filter it adds to a keyset query differs by database (an FTS5 table
	// on SQLite; a pg_trgm or tsvector index on PostgreSQL, made by a
	// migration in migrations/postgres), so it becomes one more method
	// that returns the condition and its arguments for a message or
	// request filter, while paging, waits and scanning stay shared.

	// sizes are the database's size on disk and its write-ahead log's.
	sizes(ctx context.Context) (db, wal int64, err error)
	close() error
}
