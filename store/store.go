// Package store keeps everything capture knows in one SQLite file: projects,
// keys, inboxes, endpoints and the captures themselves. It is the only
// package that speaks SQL.
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

//go:embed migrations/*.sql
var migrations embed.FS

// ErrClosed is returned by writes after Close. It is an ErrUnavailable:
// the write was not made, and the next process may take it.
var ErrClosed = fmt.Errorf("%w: store is closed", ErrUnavailable)

// Store is the database. Writes go through one goroutine that commits them
// in batches; reads use a separate pool of read-only connections.
type Store struct {
	path   string
	wdb    *sql.DB
	cdb    *sql.DB // checkpoints
	cpDone chan struct{}

	indexDone chan struct{}

	readStmts sync.Map // query text → *sql.Stmt on rdb
	rdb       *sql.DB
	notify    *notifier

	observer   atomic.Pointer[observer]
	ops        chan *writeOp
	quit       chan struct{}
	writerDone chan struct{}
	// commits counts the writer's transactions, so the checkpointer can
	// tell an idle writer from a busy one.
	commits   atomic.Uint64
	settings  *settingsWatch
	closeOnce sync.Once
	closeErr  error
}

// The page size stays SQLite's 4 KiB: a commit writes every page it
// touches as a whole WAL frame, and with one or two messages per commit
// 8 and 16 KiB pages measured 20-30% fewer inserts per second. The
// shorthand keys run after any _pragma entries, which the driver sorts.
const pragmas = "_pragma=busy_timeout(5000)&_journal_mode=WAL&_synchronous=NORMAL&_foreign_keys=1"

// Open opens (creating when missing) the database at path and brings its
// schema up to date. The database, its WAL and shared-memory files are
// readable by their owner only: they hold revealable SMTP passwords.
func Open(ctx context.Context, path string) (*Store, error) {
	ownerOnly(path)
	return open(ctx, path, indexInterval)
}

// open is Open with the interval at which staged index rows move into
// FTS5 (search.go).
func open(ctx context.Context, path string, indexEvery time.Duration) (*Store, error) {
	// The writer never checkpoints itself: a checkpoint's page copying and
	// fsync would stall every commit queued behind it. A separate
	// connection checkpoints in the background instead (checkpointLoop).
	// journal_size_limit: the WAL grows to what one checkpoint interval of
	// a burst wrote; once the writer starts it over, it shrinks back.
	wdb, err := sql.Open("sqlite", "file:"+path+"?"+pragmas+
		"&_pragma=wal_autocheckpoint(0)&_pragma=journal_size_limit(67108864)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	// One writer connection: SQLite has one writer at a time anyway, and a
	// single connection never meets "database is locked" from itself.
	wdb.SetMaxOpenConns(1)
	wdb.SetConnMaxLifetime(0)
	wdb.SetConnMaxIdleTime(0)
	if err := migrate(ctx, wdb); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	rdb, err := sql.Open("sqlite", "file:"+path+"?"+pragmas+"&_pragma=query_only(1)")
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(8)
	rdb.SetMaxIdleConns(8)
	rdb.SetConnMaxIdleTime(0)

	// A checkpoint that must wait for readers holds the write lock while
	// it waits, so it gives up after a short while and tries again later.
	cdb, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(250)")
	if err != nil {
		wdb.Close()
		rdb.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	cdb.SetMaxOpenConns(1)
	cdb.SetConnMaxIdleTime(0)
	conn, err := wdb.Conn(ctx)
	if err != nil {
		wdb.Close()
		rdb.Close()
		cdb.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	settings, err := newSettingsWatch(ctx, path)
	if err != nil {
		conn.Close()
		wdb.Close()
		rdb.Close()
		cdb.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	// SQLite creates the WAL and shared-memory files with the database
	// file's mode; ones left by an older version are tightened here.
	tighten(path + "-wal")
	tighten(path + "-shm")
	s := &Store{
		path:       path,
		wdb:        wdb,
		cdb:        cdb,
		cpDone:     make(chan struct{}),
		indexDone:  make(chan struct{}),
		rdb:        rdb,
		notify:     newNotifier(),
		ops:        make(chan *writeOp, 4096),
		quit:       make(chan struct{}),
		writerDone: make(chan struct{}),
		settings:   settings,
	}
	w := &writer{conn: conn, stmts: make(map[string]*sql.Stmt), vocab: newVocabulary()}
	go s.runWriter(w)
	go s.checkpointLoop()
	go s.indexLoop(indexEvery)
	return s, nil
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Close finishes the writes already queued, then closes the database.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.quit)
		<-s.indexDone
		<-s.writerDone
		<-s.cpDone
		s.readStmts.Range(func(_, st any) bool {
			st.(*sql.Stmt).Close()
			return true
		})
		s.closeErr = errors.Join(s.settings.close(), s.rdb.Close(), s.cdb.Close(), s.wdb.Close())
	})
	return s.closeErr
}

// Watch returns a channel closed at the next commit that adds captures to
// the collection (an inbox or endpoint id). Take it before querying.
func (s *Store) Watch(collectionID string) <-chan struct{} {
	return s.notify.watch(collectionID)
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
// milliseconds), hence not more often.
const restartFrames = 16384

// checkpointLoop copies committed WAL pages into the database file without
// blocking the writer (PASSIVE never waits for it), and keeps the WAL
// short: past restartFrames it waits a moment for the readers still on the
// WAL (new ones read the database file once every page is copied back), so
// that the next commit starts the WAL from its beginning; when the writer
// is idle it truncates the file to nothing.
func (s *Store) checkpointLoop() {
	var lastCommits uint64
	truncated := false
	s.every(checkpointInterval, s.cpDone, func() {
		commits := s.commits.Load()
		idle := commits == lastCommits
		lastCommits = commits
		if idle && truncated {
			return
		}
		mode := "PASSIVE"
		if idle {
			mode = "TRUNCATE"
		}
		// A checkpoint that cannot finish (a reader still on old pages)
		// copies what it can; the next tick continues.
		var busy, frames, copied int64
		err := s.cdb.QueryRow(`PRAGMA wal_checkpoint(`+mode+`)`).Scan(&busy, &frames, &copied)
		if err == nil && !idle && frames >= restartFrames {
			err = s.cdb.QueryRow(`PRAGMA wal_checkpoint(RESTART)`).Scan(&busy, &frames, &copied)
		}
		truncated = idle && err == nil && busy == 0
	})
}

// every runs fn at each interval until Close, then closes done.
func (s *Store) every(interval time.Duration, done chan struct{}, fn func()) {
	defer close(done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			fn()
		}
	}
}

// readStmt returns the read pool's prepared statement for query, preparing
// it on first use: preparing costs more than running most of the reads.
func (s *Store) readStmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := s.readStmts.Load(query); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := s.rdb.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := s.readStmts.LoadOrStore(query, st); loaded {
		st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

func (s *Store) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := s.readStmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func (s *Store) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := s.readStmt(ctx, query)
	if err != nil {
		// database/sql reports the prepare error from Scan this way.
		return s.rdb.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

func migrate(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var current int
	err := db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&current)
	if errors.Is(err, sql.ErrNoRows) {
		if _, err := db.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}

	entries, err := fs.ReadDir(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	type migration struct {
		version int
		name    string
	}
	var all []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return fmt.Errorf("migrate: bad migration name %q", e.Name())
		}
		all = append(all, migration{v, e.Name()})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].version < all[j].version })
	if len(all) == 0 || all[len(all)-1].version <= current {
		return nil
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
	for _, m := range all {
		if m.version <= current {
			continue
		}
		body, err := migrations.ReadFile("migrations/" + m.name)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migrate %s: %w", m.name, err)
		}
		attached, err := attachedObjects(ctx, tx)
		if err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate %s: %w", m.name, err)
		}
		if err := restoreObjects(ctx, tx, attached, string(body)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate %s: %w", m.name, err)
		}
		if err := foreignKeysHold(ctx, tx); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = ?`, m.version); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate %s: %w", m.name, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migrate %s: %w", m.name, err)
		}
	}
	// A migration that rewrote a table left a WAL as large as the table;
	// the writer never checkpoints, so fold it back and shrink it now.
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("migrate: checkpoint: %w", err)
	}
	return nil
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

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullStringPtr(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func strPtr(ns sql.NullString) *string {
	if !ns.Valid {
		return nil
	}
	v := ns.String
	return &v
}

// DBFile is the database's name inside the data dir.
const DBFile = "capture.db"

// PrepareDir creates the data dir (0700) when missing and checks that it is
// a directory. A data dir others may enter (an older version made it 0755,
// or the user did) is tightened to 0700: it holds the database and the
// local CA's key. The returned warning says so, or is "".
func PrepareDir(dir string) (warning string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("data dir %s: %w", dir, unwrapPathError(err))
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("data dir %s: %w", dir, unwrapPathError(err))
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("data dir %s: not a directory", dir)
	}
	if mode := fi.Mode().Perm(); mode&0o077 != 0 {
		// Not ours to change (another user's dir): leave it be, unwarned.
		if err := os.Chmod(dir, 0o700); err == nil {
			return fmt.Sprintf("data dir %s was open to other users (mode %04o); tightened to 0700", dir, mode), nil
		}
	}
	return "", nil
}

// Option adjusts OpenDir.
type Option func(*options)

type options struct{ log *slog.Logger }

// WithLogger sends OpenDir's warnings to log instead of slog.Default().
func WithLogger(log *slog.Logger) Option { return func(o *options) { o.log = log } }

// OpenDir prepares the data dir and opens its database.
func OpenDir(ctx context.Context, dir string, opts ...Option) (*Store, error) {
	o := options{log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	warning, err := PrepareDir(dir)
	if err != nil {
		return nil, err
	}
	if warning != "" {
		o.log.Warn(warning)
	}
	return Open(ctx, filepath.Join(dir, DBFile))
}

// ownerOnly creates the file at path with mode 0600 when it is missing, and
// takes group and world access away when it exists. Failures are left for
// SQLite to report when it opens the file, in its own words.
func ownerOnly(path string) {
	if f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
		return
	}
	tighten(path)
}

// tighten takes group and world access away from an existing file.
func tighten(path string) {
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		os.Chmod(path, fi.Mode().Perm()&0o700)
	}
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
