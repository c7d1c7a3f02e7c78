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
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

//go:embed migrations/*.sql
var migrations embed.FS

// ErrClosed is returned by writes after Close.
var ErrClosed = errors.New("store is closed")

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

	ops        chan *writeOp
	quit       chan struct{}
	writerDone chan struct{}
	closeOnce  sync.Once
	closeErr   error
}

// The page size stays SQLite's 4 KiB: a commit writes every page it
// touches as a whole WAL frame, and with one or two messages per commit
// 8 and 16 KiB pages measured 20-30% fewer inserts per second. The
// shorthand keys run after any _pragma entries, which the driver sorts.
const pragmas = "_pragma=busy_timeout(5000)&_journal_mode=WAL&_synchronous=NORMAL&_foreign_keys=1"

// Open opens (creating when missing) the database at path and brings its
// schema up to date.
func Open(ctx context.Context, path string) (*Store, error) {
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

	cdb, err := sql.Open("sqlite", "file:"+path+"?"+pragmas)
	if err != nil {
		wdb.Close()
		rdb.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	cdb.SetMaxOpenConns(1)
	conn, err := wdb.Conn(ctx)
	if err != nil {
		wdb.Close()
		rdb.Close()
		cdb.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
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
		s.closeErr = errors.Join(s.rdb.Close(), s.cdb.Close(), s.wdb.Close())
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

// checkpointLoop copies committed WAL pages into the database file without
// blocking the writer (PASSIVE never waits for it), so the WAL stays small.
func (s *Store) checkpointLoop() {
	s.every(checkpointInterval, s.cpDone, func() {
		// A checkpoint that cannot finish (a reader still on old pages)
		// copies what it can; the next tick continues.
		s.cdb.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
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
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
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

// ResolveDir picks the data dir: the flag, else $CAPTURE_DATA_DIR, else
// the platform's per-user data dir.
func ResolveDir(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if env := os.Getenv("CAPTURE_DATA_DIR"); env != "" {
		return env, nil
	}
	if runtime.GOOS == "darwin" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find data dir: %w", err)
		}
		return filepath.Join(home, "Library", "Application Support", "capture"), nil
	}
	if xdg := os.Getenv("XDG_DATA_HOME"); xdg != "" {
		return filepath.Join(xdg, "capture"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find data dir: %w", err)
	}
	return filepath.Join(home, ".local", "share", "capture"), nil
}

// PrepareDir creates the data dir (0700) when missing and checks that it is
// a directory.
func PrepareDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data dir %s: %w", dir, unwrapPathError(err))
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data dir %s: %w", dir, unwrapPathError(err))
	}
	if !fi.IsDir() {
		return fmt.Errorf("data dir %s: not a directory", dir)
	}
	return nil
}

// OpenDir prepares the data dir and opens its database.
func OpenDir(ctx context.Context, dir string) (*Store, error) {
	if err := PrepareDir(dir); err != nil {
		return nil, err
	}
	return Open(ctx, filepath.Join(dir, DBFile))
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
