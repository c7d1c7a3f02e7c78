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

	// insertSeq runs an INSERT of one row into a table keyed by seq and
	// returns the row's seq.
	insertSeq(t *wtx, insert string, args ...any) (int64, error)

	// nextSeqs draws n seqs for new rows of table, in ascending order, for
	// rows that other rows (their search index rows) must name before the
	// insert returns.
	nextSeqs(t *wtx, table string, n int) ([]int64, error)

	// Full-text search (search.go). indexTable is the table a capture's
	// tokens are written to in the capture's own transaction, for the
	// search index named index (messages_search, requests_search): on
	// SQLite a staging table indexLoop empties into FTS5, on PostgreSQL
	// the index itself. vocabulary says whether the database keeps
	// search_terms, through which planSearch expands query words.
	// searchSource makes k's rows come through the index, as plan says;
	// it returns whether it appended the rows' tokens to k's columns, for
	// the scan to settle each row with stagedMatch.
	indexTable(index string) string
	vocabulary() bool
	searchSource(k *keyset, plan searchPlan, index string) (tokens bool)
	// jsonGroupArray aggregates expr, ordered by order, into a JSON array
	// ("[]" for no rows).
	jsonGroupArray(expr, order string) string

	// sizes are the database's size on disk and its write-ahead log's.
	sizes(ctx context.Context) (db, wal int64, err error)
	close() error
}
