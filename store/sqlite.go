package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The page size stays SQLite's 4 KiB: a commit writes every page it
// touches as a whole WAL frame, and with one or two messages per commit
// 8 and 16 KiB pages measured 20-30% fewer inserts per second. The
// shorthand keys run after any _pragma entries, which the driver sorts.
// The writer's connection leaves out the journal mode: it turns WAL on
// itself (walMode), as opening a new database beside another process
// needs.
const (
	connPragmas = "_pragma=busy_timeout(5000)&_synchronous=NORMAL&_foreign_keys=1"
	pragmas     = connPragmas + "&_journal_mode=WAL"
	// existingOnly is for connections other than the writer's, which
	// created the file: one opened after the file was removed while
	// serving fails (unavailable) rather than create an empty database
	// there.
	existingOnly = "&mode=rw"
)

// capture_sha256 lets migrations compute what hashKey computes, so that
// rows written before a digest column existed can be filled in SQL.
func init() {
	sqlite.MustRegisterDeterministicScalarFunction("capture_sha256", 1,
		func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			switch v := args[0].(type) {
			case string:
				return hashKey(v), nil
			case []byte:
				return hashKey(string(v)), nil
			case nil:
				return nil, nil
			}
			return nil, fmt.Errorf("capture_sha256: want text, got %T", args[0])
		})
}

// sqliteDB is the SQLite backend: one file, one serving process, whose
// writer connection is the only one that writes captures.
type sqliteDB struct {
	s      *Store
	path   string
	cdb    *sql.DB // checkpoints
	cpDone chan struct{}
	watch  *dataVersionWatch
	limits localLimits

	// The writer's own view of data_version (writer goroutine only).
	writerKnown bool
	writerData  int64
	pendingData int64

	// file is the database file as opened; goneLogged says the writer
	// has logged that path no longer leads to it (writer goroutine only).
	file       os.FileInfo
	goneLogged bool

	// reserve is the room kept for deletions on a full disk (reserve.go).
	reserve *diskReserve
}

// Open opens the database at path: a SQLite file, or a PostgreSQL URL
// (postgres://…, see OpenPostgres).
func Open(ctx context.Context, path string) (*Store, error) {
	if IsPostgresURL(path) {
		return OpenPostgres(ctx, path)
	}
	return OpenSQLite(ctx, path)
}

// OpenSQLite opens (creating when missing) the SQLite database at path and
// brings its schema up to date. The database, its WAL and shared-memory
// files are readable by their owner only: they hold revealable SMTP
// passwords.
func OpenSQLite(ctx context.Context, path string) (*Store, error) {
	return openSQLite(ctx, path, indexInterval, slog.Default())
}

// openSQLite is OpenSQLite with the interval at which staged index rows
// move into FTS5 (search.go) and the store's logger, which the upgrade
// of its schema logs to as well.
func openSQLite(ctx context.Context, path string, indexEvery time.Duration, log *slog.Logger) (*Store, error) {
	ownerOnly(path)
	// The writer never checkpoints itself: a checkpoint's page copying and
	// fsync would stall every commit queued behind it. A separate
	// connection checkpoints in the background instead (checkpointLoop).
	// journal_size_limit: the WAL grows to what one checkpoint interval of
	// a burst wrote; once the writer starts it over, it shrinks back.
	wdb, err := sql.Open("sqlite", "file:"+path+"?"+connPragmas+
		"&_pragma=wal_autocheckpoint(0)&_pragma=journal_size_limit(67108864)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	// One writer connection: SQLite has one writer at a time anyway, and a
	// single connection never meets "database is locked" from itself.
	wdb.SetMaxOpenConns(1)
	wdb.SetConnMaxLifetime(0)
	wdb.SetConnMaxIdleTime(0)
	if err := migrateSQLite(ctx, wdb, log); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	rdb, err := sql.Open("sqlite", "file:"+path+"?"+pragmas+"&_pragma=query_only(1)"+existingOnly)
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(8)
	rdb.SetMaxIdleConns(readIdleConns)
	rdb.SetConnMaxIdleTime(0)

	// A checkpoint that must wait for readers holds the write lock while
	// it waits, so it gives up after a short while and tries again later.
	cdb, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(250)"+existingOnly)
	if err != nil {
		wdb.Close()
		rdb.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	cdb.SetMaxOpenConns(1)
	cdb.SetConnMaxIdleTime(0)
	s := &Store{wdb: wdb, rdb: rdb, notify: newNotifier(), log: log}
	b := &sqliteDB{s: s, path: path, cdb: cdb, cpDone: make(chan struct{})}
	// Taken once the writer's connection has the file open: the file
	// its commits go to from now on, whatever happens to the path.
	b.file, err = os.Stat(path)
	s.b = b
	var conn *sql.Conn
	if err == nil {
		conn, err = wdb.Conn(ctx)
	}
	if err == nil {
		b.watch, err = newDataVersionWatch(ctx, path, &s.settings)
		if err != nil {
			conn.Close()
		}
	}
	if err != nil {
		wdb.Close()
		rdb.Close()
		cdb.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	// SQLite creates the WAL and shared-memory files with the database
	// file's mode; ones left by an older version are tightened here.
	tighten(path + "-wal")
	tighten(path + "-shm")
	if err := s.start(ctx, conn); err != nil {
		conn.Close()
		b.watch.close()
		wdb.Close()
		rdb.Close()
		cdb.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	b.reserve = &diskReserve{path: path + reserveSuffix, log: func() *slog.Logger { return s.log }, spare: b.freePages}
	b.reserve.open()
	s.indexDone = make(chan struct{})
	go b.checkpointLoop()
	go s.indexLoop(indexEvery)
	return s, nil
}

// Path is the SQLite database file, or "" on PostgreSQL.
func (s *Store) Path() string {
	if b, ok := s.b.(*sqliteDB); ok {
		return b.path
	}
	return ""
}

func (b *sqliteDB) close() error {
	<-b.cpDone
	return errors.Join(b.watch.close(), b.cdb.Close())
}

func (b *sqliteDB) rebind(query string) string { return query }
func (b *sqliteDB) args(args []any) []any      { return args }
func (b *sqliteDB) begin() string              { return "BEGIN IMMEDIATE" }

// diskFailed says that SQLite met an I/O error (SQLITE_IOERR) and no
// commit has gone through since (diskWorks). It is the process's, as the
// disk is: reads ask unavailable on no particular store.
var diskFailed atomic.Bool

// diskWorks is the writer's word that a commit went through: the disk
// works again.
func diskWorks() {
	if diskFailed.Load() {
		diskFailed.Store(false)
	}
}

// diskIOFailed is the reason given for an I/O error.
const diskIOFailed = "the disk could not be read or written"

// unavailable says whether err is SQLite unable to take a call now rather
// than the call being wrong: giving up on a lock another connection
// holds, a full disk, one that fails its reads or writes.
//
// SQLITE_CORRUPT counts as the failing disk's too while diskFailed holds:
// once the disk has failed (an ext4 file system shut down under serve),
// SQLite reads what a failed read left, which looks damaged (BEGIN said
// "database disk image is malformed" though integrity_check passed once the
// disk was back), and every capture got 500. Its sender is better told to
// try again; a database damaged for good is still an internal error once a
// commit has shown the disk works.
func (b *sqliteDB) unavailable(err error) (string, bool) {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return "", false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return "", true
	case sqlite3.SQLITE_FULL:
		return ErrDiskFull.Error(), true
	case sqlite3.SQLITE_IOERR:
		diskFailed.Store(true)
		return diskIOFailed, true
	case sqlite3.SQLITE_CORRUPT:
		if diskFailed.Load() {
			return diskIOFailed, true
		}
		return "", false
	case sqlite3.SQLITE_READONLY:
		return "the database cannot be written (a read-only file system, or its permissions)", true
	case sqlite3.SQLITE_CANTOPEN:
		return "the database file cannot be opened (removed while serving?)", true
	}
	return "", false
}

// The writer asks PRAGMA data_version, which on its own connection changes
// only when another connection (an admin command) has committed since.
func (b *sqliteDB) writerBegun(t *wtx) (bool, error) {
	if err := b.stillAtPath(); err != nil {
		return false, err
	}
	if err := t.queryRow(`PRAGMA data_version`).Scan(&b.pendingData); err != nil {
		return false, err
	}
	return !b.writerKnown || b.pendingData != b.writerData, nil
}

// stillAtPath refuses the transaction when the database file is no longer
// at its path (deleted, or replaced by another file): SQLite would go on
// committing into the open file, acknowledging captures that the next
// start, which opens the path, never finds. Checked after each BEGIN, on
// the writer, so nothing is committed once the file has gone; it costs
// one stat per transaction.
func (b *sqliteDB) stillAtPath() error {
	fi, err := os.Stat(b.path)
	switch {
	case err == nil && os.SameFile(fi, b.file):
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		// Unknown (a directory we may not read, a disk error): the
		// commit itself will say whether the database still works.
		return nil
	}
	gone := unavailableBecause(filepath.Base(b.path)+" was removed or replaced while serving; restart serve", fs.ErrNotExist)
	if !b.goneLogged {
		b.goneLogged = true
		b.s.log.Error("the database file is gone: captures are refused until serve restarts", "path", b.path, "err", gone)
	}
	return gone
}

func (b *sqliteDB) writerCommitted() { b.writerKnown, b.writerData = true, b.pendingData }

// Other processes never wait on this database's captures: one serves it.
func (b *sqliteDB) announce(*wtx, []string) error { return nil }

func (b *sqliteDB) settingsVersion(ctx context.Context) (int64, error) { return b.watch.check(ctx) }

// The writer is the only connection that writes while serve runs, and an
// admin command's write takes the whole database: nothing to lock.
func (b *sqliteDB) lockTx(*wtx, string) error { return nil }

func (b *sqliteDB) exclusively(_ context.Context, _ string, _ bool, fn func() error) (bool, error) {
	return true, fn()
}

func (b *sqliteDB) partQuery(table, column, key string) string {
	// CAST to BLOB makes substr count bytes, not characters; it only
	// relabels a UTF-8 TEXT value.
	return `SELECT substr(CAST(` + column + ` AS BLOB), ?2, ?1) FROM ` + table + ` WHERE ` + key + ` = ?3`
}

// The seq is the rowid, which SQLite reports after the insert: RETURNING
// would have it collect the row in a temporary table first.
func (b *sqliteDB) insertSeq(t *wtx, insert string, args ...any) (int64, error) {
	res, err := t.exec(insert, args...)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// nextSeqs are one past the largest seq of table, as SQLite would choose:
// its writer is the only one.
func (b *sqliteDB) nextSeqs(t *wtx, table string, n int) ([]int64, error) {
	var last int64
	if err := t.queryRow(`SELECT coalesce(max(seq), 0) FROM ` + table).Scan(&last); err != nil {
		return nil, err
	}
	seqs := make([]int64, n)
	for i := range seqs {
		seqs[i] = last + 1 + int64(i)
	}
	return seqs, nil
}

// A capture's tokens are staged, and move into FTS5 in batches (search.go).
func (b *sqliteDB) indexTable(index string) string { return index + "_staged" }
func (b *sqliteDB) vocabulary() bool               { return true }

func (b *sqliteDB) searchSource(k *keyset, plan searchPlan, index string) bool {
	plan.ftsSource(k, index)
	return false
}

func (b *sqliteDB) jsonGroupArray(expr, order string) string {
	return `json_group_array(` + expr + ` ORDER BY ` + order + `)`
}

func (b *sqliteDB) allow(_ context.Context, keyID string, perSecond, burst int) (time.Duration, bool, error) {
	retry, ok := b.limits.allow(keyID, perSecond, burst)
	return retry, ok, nil
}

func (b *sqliteDB) waitSlot(_ context.Context, projectID string, slots int, _ time.Duration) (func(), bool, error) {
	release, ok := b.limits.waitSlot(projectID, slots)
	return release, ok, nil
}

// sizes are the sizes of the database file and of its write-ahead log (0
// when there is none).
func (b *sqliteDB) sizes(context.Context) (db, wal int64, err error) {
	fi, err := os.Stat(b.path)
	if err != nil {
		return 0, 0, err
	}
	db = fi.Size()
	if fi, err := os.Stat(b.path + "-wal"); err == nil {
		wal = fi.Size()
	} else if !os.IsNotExist(err) {
		return db, 0, err
	}
	return db, wal, nil
}

// checkpointInterval is how often the WAL is copied back into the
// database; between checkpoints the WAL grows by what was written.
const checkpointInterval = 200 * time.Millisecond

// restartFrames is the WAL length (in 4 KiB pages, 64 MiB) past which the
// checkpointer makes the writer start the WAL over. A passive checkpoint
// copies pages back but the WAL restarts only when a commit finds every
// page copied and no reader on it, which sustained ingest beside readers
// (lists, waits, a viewer) never allows: it grew to 1.5 GB over 200,000
// messages. A restart holds commits back while it finishes (tens of
// milliseconds), hence not more often. A variable so tests can make it
// small.
var restartFrames int64 = 16384

// checkpointLoop copies committed WAL pages into the database file without
// blocking the writer (PASSIVE never waits for it), and keeps the WAL
// short: past restartFrames it waits a moment for the readers still on the
// WAL (new ones read the database file once every page is copied back), so
// that the next commit starts the WAL from its beginning; when the writer
// is idle it truncates the file to nothing.
func (b *sqliteDB) checkpointLoop() {
	var lastCommits uint64
	truncated := false
	b.s.every(checkpointInterval, b.cpDone, func() {
		commits := b.s.commits.Load()
		idle := commits == lastCommits
		lastCommits = commits
		// On a full disk the WAL's blocks go back to the file system as
		// soon as they can, which makes room for the reserve again once
		// deletions have freed pages for new captures. Room is looked
		// for without waiting for a capture, so staged rows move again.
		full := !b.reserve.room()
		if idle && truncated && !full {
			return
		}
		mode := "PASSIVE"
		if idle || full {
			mode = "TRUNCATE"
		}
		busy, _, err := b.checkpoint(mode)
		truncated = idle && !full && err == nil && busy == 0
	})
}

// checkpoint copies what it can of the WAL back into the database (mode
// PASSIVE or TRUNCATE) and, when the WAL is still past restartFrames after
// a passive one, makes the next commit start it over (RESTART). A
// checkpoint that cannot finish (a reader still on old pages) copies what
// it can; busy says so. frames is the WAL's length, 0 once restarted.
// The checkpoint loop and the index mover (walRoom) both call it; the
// single connection of cdb takes them in turn.
func (b *sqliteDB) checkpoint(mode string) (busy, frames int64, err error) {
	var copied int64
	err = b.cdb.QueryRow(`PRAGMA wal_checkpoint(`+mode+`)`).Scan(&busy, &frames, &copied)
	if err == nil && mode == "PASSIVE" && frames >= restartFrames {
		err = b.cdb.QueryRow(`PRAGMA wal_checkpoint(RESTART)`).Scan(&busy, &frames, &copied)
		if err == nil && busy == 0 {
			frames = 0
		}
	}
	if err == nil && busy == 0 && mode == "TRUNCATE" {
		b.reserve.checkpointed()
	}
	if why, _ := b.unavailable(err); why == ErrDiskFull.Error() {
		// The database could not grow by the pages the WAL added: give
		// back the reserve, so the next checkpoint can.
		b.reserve.exhausted()
	}
	return busy, frames, err
}

// freePages is how many bytes the database file holds free: pages of
// deleted captures, which new ones reuse.
func (b *sqliteDB) freePages() int64 {
	var pages, size int64
	if err := b.cdb.QueryRow(`SELECT freelist_count, page_size FROM pragma_freelist_count, pragma_page_size`).Scan(&pages, &size); err != nil {
		return 0
	}
	return pages * size
}

// walRoom is asked by the index mover between two of its transactions:
// moves run back to back for as long as rows are staged, and each writes
// megabytes of WAL (a new term's row, its trigram entries, FTS5's merges),
// while the checkpoint loop, every 200 ms, cannot restart the WAL between
// them: 100 webhooks of 800 unique ids each took the WAL to 296 MB. So
// the mover checkpoints itself, with nothing of its own open, and stops
// for this round (its rows stay staged, where searches read them) when
// the WAL is still past restartFrames: a reader holds old pages.
func (b *sqliteDB) walRoom() bool {
	if !b.reserve.room() {
		return false // the disk is full: what room is left is for deletions
	}
	busy, frames, err := b.checkpoint("PASSIVE")
	return err == nil && (busy == 0 || frames < restartFrames)
}

// migrationMarks are what each migration leaves in the schema. Builds of
// capture between the codes and the search migrations numbered three of
// them differently (0006_inbox_lookup, 0007_settings_version,
// 0008_settings, before 0004_codes existed), so a database at version N
// may lack a migration numbered N or below: codes and settings at 7,
// search at 8. schema_version alone cannot tell; the marks can.
var migrationMarks = map[int]string{
	4: `SELECT count(*) FROM pragma_table_info('messages') WHERE name = 'codes'`,
	5: `SELECT count(*) FROM pragma_table_info('inboxes') WHERE name = 'smtp_password_hash'`,
	6: `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'settings_version'`,
	7: `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'settings'`,
	8: `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'messages_search_staged'`,
}

// skippedMigrations are the versions up to current whose mark is missing,
// in order.
func skippedMigrations(ctx context.Context, tx *sql.Tx, current int) ([]int, error) {
	var skipped []int
	for _, v := range slices.Sorted(maps.Keys(migrationMarks)) {
		if v > current {
			break
		}
		var n int
		if err := tx.QueryRowContext(ctx, migrationMarks[v]).Scan(&n); err != nil {
			return nil, err
		}
		if n == 0 {
			skipped = append(skipped, v)
		}
	}
	return skipped, nil
}

// migrateSQLite brings the schema up to date one migration at a time.
// Processes opening one database together (two serves started at once,
// an admin command beside a starting serve) run this side by side, so
// what is applied is decided inside each migration's own write
// transaction (the writer's DSN makes every one BEGIN IMMEDIATE): the
// version and the marks are read there, after any other process's
// migration has committed, and what that process applied is not applied
// again.
func migrateSQLite(ctx context.Context, db *sql.DB, log *slog.Logger) error {
	all, err := migrationFiles("migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := walMode(ctx, db); err != nil {
		return fmt.Errorf("migrate: journal mode: %w", err)
	}
	// A migration may rebuild a table, which SQLite does with foreign keys
	// off (they cannot change inside a transaction, and dropping the old
	// table would otherwise cascade to the rows that refer to it). db has
	// one connection, so this covers every migration; what they leave
	// behind is checked before foreign keys come back on.
	if _, err := db.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer db.ExecContext(ctx, `PRAGMA foreign_keys = ON`)
	var applied []int
	for {
		m, err := migrateNext(ctx, db, all, applied, log)
		if err != nil {
			return err
		}
		if m == nil {
			break
		}
		applied = append(applied, m.version)
	}
	if len(applied) == 0 {
		return nil
	}
	// A migration that rewrote a table left a WAL as large as the table;
	// the writer never checkpoints, so fold it back and shrink it now.
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("migrate: checkpoint: %w", err)
	}
	return nil
}

// walMode turns WAL on, which a new database needs once. Connections
// opening a new database together each read it, then want to write its
// header; SQLite refuses all but one at once with SQLITE_BUSY rather than
// let them wait on each other holding their reads. A refused one waits for
// the lock through busy_timeout (BEGIN IMMEDIATE, holding nothing while
// it waits) and asks again; by then the database is in WAL mode and the
// ask writes nothing.
func walMode(ctx context.Context, db *sql.DB) error {
	for attempt := 1; ; attempt++ {
		_, err := db.ExecContext(ctx, `PRAGMA journal_mode = WAL`)
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || attempt == 3 {
			return err
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		tx.Rollback()
	}
}

// migrateNext applies, in one write transaction, the first migration the
// database still lacks, and returns it; nil when it lacks none. applied
// are those this process applied before: finding one of them lacking
// again (its mark gone) stops the loop with an error.
func migrateNext(ctx context.Context, db *sql.DB, all []migration, applied []int, log *slog.Logger) (_ *migration, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	current, err := schemaVersion(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	if err := notNewer(current, all); err != nil {
		return nil, err
	}
	skipped, err := skippedMigrations(ctx, tx, current)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	i := slices.IndexFunc(all, func(m migration) bool {
		return m.version > current || slices.Contains(skipped, m.version)
	})
	if i < 0 {
		// A new database's schema_version was made in this transaction.
		if err := tx.Commit(); err != nil {
			return nil, fmt.Errorf("migrate: %w", err)
		}
		return nil, nil
	}
	m := &all[i]
	defer func() {
		if err != nil {
			err = stepFailed(ctx, m.name, err)
		}
	}()
	if slices.Contains(applied, m.version) {
		return nil, fmt.Errorf("migrate %s: applied, yet its mark is missing", m.name)
	}
	if current > 0 && len(applied) == 0 {
		// A large database takes a while; say why nothing else happens.
		log.Info("upgrading the database schema", "from", current, "to", all[len(all)-1].version, "rerun", skipped)
	}
	attached, err := attachedObjects(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("migrate %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, m.body); err != nil {
		return nil, fmt.Errorf("migrate %s: %w", m.name, err)
	}
	if err := restoreObjects(ctx, tx, attached, m.body); err != nil {
		return nil, fmt.Errorf("migrate %s: %w", m.name, err)
	}
	if err := foreignKeysHold(ctx, tx); err != nil {
		return nil, fmt.Errorf("migrate %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = max(version, ?)`, m.version); err != nil {
		return nil, fmt.Errorf("migrate %s: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("migrate %s: %w", m.name, err)
	}
	return m, nil
}

// schemaObject is an index or trigger as sqlite_schema records it.
type schemaObject struct{ name, table, sql string }

// attachedObjects lists the indexes and triggers that hang on tables, in
// the order they were made (automatic indexes have no SQL and are left
// out).
func attachedObjects(ctx context.Context, tx *sql.Tx) ([]schemaObject, error) {
	rows, err := tx.QueryContext(ctx, `SELECT name, tbl_name, sql FROM sqlite_schema
		WHERE type IN ('index', 'trigger') AND sql IS NOT NULL ORDER BY rowid`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []schemaObject
	for rows.Next() {
		var o schemaObject
		if err := rows.Scan(&o.name, &o.table, &o.sql); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// restoreObjects puts back the indexes and triggers that a migration lost
// by rebuilding their table (SQLite drops them with the old table), so a
// rebuild need not know what other migrations hung on the table. One the
// migration names is its own business and is left as it is.
func restoreObjects(ctx context.Context, tx *sql.Tx, before []schemaObject, migration string) error {
	for _, o := range before {
		if strings.Contains(migration, o.name) {
			continue
		}
		var objects, tables int
		err := tx.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE name = ?1),
			count(*) FILTER (WHERE type = 'table' AND name = ?2) FROM sqlite_schema`, o.name, o.table).Scan(&objects, &tables)
		if err != nil {
			return err
		}
		if objects > 0 || tables == 0 {
			continue
		}
		if _, err := tx.ExecContext(ctx, o.sql); err != nil {
			return fmt.Errorf("restore %s on %s: %w", o.name, o.table, err)
		}
	}
	return nil
}

// foreignKeysHold checks, with foreign keys off, that every reference
// still points at a row.
func foreignKeysHold(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `PRAGMA foreign_key_check`)
	if err != nil {
		return err
	}
	defer rows.Close()
	if rows.Next() {
		var table, parent string
		var rowid sql.NullInt64
		var fk int
		if err := rows.Scan(&table, &rowid, &parent, &fk); err != nil {
			return err
		}
		return fmt.Errorf("row %d of %s refers to a missing row of %s", rowid.Int64, table, parent)
	}
	return rows.Err()
}
