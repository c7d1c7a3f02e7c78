// Package store keeps everything capture knows: projects, keys, inboxes,
// endpoints and the captures themselves. It is the only package that speaks
// SQL.
//
// One Store runs on either of two databases. SQLite (the default, one file
// in the data dir) serves one process; PostgreSQL (--database postgres://…)
// serves any number of replicas sharing it. Everything a caller sees is the
// same on both, and so is nearly all of the code: the queries are written
// once, in the SQL both speak (with SQLite's ? and ?N placeholders, which
// the PostgreSQL side renumbers as $N), and the Go logic around them (the
// group-commit writer, the commit notifier, validation, quotas, paging) is
// shared. What truly differs sits behind the small backend interface, one
// file per database: opening connections and migrating, how a transaction
// starts and what "busy" means, how the writer learns of settings changed
// by others (SQLite's data_version, a version read in the same transaction
// on PostgreSQL), how a commit reaches waiters in other processes
// (pg_notify sent inside the committing transaction, heard on a LISTEN
// connection), locks (none are needed on SQLite, whose writer is alone;
// advisory locks on PostgreSQL), reading large values slice by slice, the
// API's rate and wait limits (in process, or in shared rows). That is
// river's driver split, without writing each query twice: the one
// interface is the store the servers already use, and the store and
// server test suites, run on each database, are its conformance suite.
//
// Shared says which kind a store is, for the little that callers keep
// beside the database on SQLite and in it on PostgreSQL (the local CA:
// TLSFile).
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
)

//go:embed migrations/*.sql migrations/postgres/*.sql
var migrations embed.FS

// ErrClosed is returned by writes after Close. It is an ErrUnavailable:
// the write was not made, and the next process may take it.
var ErrClosed = fmt.Errorf("%w: store is closed", ErrUnavailable)

// readIdleConns is how many read connections stay open between reads.
const readIdleConns = 8

// Store is the database. Writes go through one goroutine that commits them
// in batches; reads use a separate pool of connections.
type Store struct {
	b   backend
	wdb *sql.DB

	// indexDone is closed when the SQLite search indexer (indexLoop)
	// stops; nil on PostgreSQL, whose index needs no mover.
	indexDone chan struct{}
	// afterSearchPlan, when set (by tests), runs between a search's
	// reading of the vocabulary and its reading of the index.
	afterSearchPlan func()
	// beforeCommit, when set (by tests), runs on the writer after a
	// transaction's statements and before its COMMIT: blocking in it
	// stands in for a disk that stalls the commit. Atomic: a test sets it
	// while the writer runs.
	beforeCommit atomic.Pointer[func()]

	// log hears what goes wrong with the database while serving.
	log *slog.Logger

	// readBound is how long one read may take (a time.Duration), 0 for
	// readTimeout.
	readBound atomic.Int64

	readStmts sync.Map // query text → *sql.Stmt on rdb
	rdb       *sql.DB
	notify    *notifier

	observer   atomic.Pointer[observer]
	ops        chan *writeOp
	quit       chan struct{}
	writerDone chan struct{}
	// commits counts the writer's transactions, so the checkpointer can
	// tell an idle writer from a busy one.
	commits atomic.Uint64
	// captured counts the captures this process has committed, so the
	// pruner can run as often as captures come in (Captured).
	captured  atomic.Uint64
	settings  settingsSeen
	closeOnce sync.Once
	closeErr  error
}

// start runs the writer over conn, the one connection it commits on.
func (s *Store) start(ctx context.Context, conn *sql.Conn) error {
	w := &writer{conn: conn, stmts: make(map[string]*sql.Stmt), vocab: newVocabulary()}
	if err := w.prepareControl(ctx, s.b); err != nil {
		w.closeStmts()
		return err
	}
	s.ops = make(chan *writeOp, 4096)
	s.quit = make(chan struct{})
	s.writerDone = make(chan struct{})
	go s.runWriter(w)
	return nil
}

// Close finishes the writes already queued, then closes the database.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.quit)
		if s.indexDone != nil {
			<-s.indexDone
		}
		<-s.writerDone
		s.readStmts.Range(func(_, st any) bool {
			st.(*sql.Stmt).Close()
			return true
		})
		s.closeErr = errors.Join(s.b.close(), s.rdb.Close(), s.wdb.Close())
	})
	return s.closeErr
}

// Watch returns a channel closed at the next commit that adds captures to
// the collection (an inbox or endpoint id), by this process or, on
// PostgreSQL, any other. Take it before querying.
func (s *Store) Watch(collectionID string) <-chan struct{} {
	return s.notify.watch(collectionID)
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

// IsUnavailable reports whether err says the database could not take a
// call now (ErrUnavailable, a lost or refused PostgreSQL connection, SQLite
// busy or locked) rather than that the call itself was wrong: a caller
// answers it as unavailable, to be tried again, not as an internal error.
// Reads return the driver's errors as they are, so the servers ask this.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrUnavailable) {
		return true
	}
	_, ok := driverUnavailable(err)
	return ok
}

// readStmt returns the read pool's prepared statement for query, preparing
// it on first use: preparing costs more than running most of the reads.
func (s *Store) readStmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := s.readStmts.Load(query); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := s.rdb.PrepareContext(ctx, s.b.rebind(query))
	if err != nil {
		return nil, err
	}
	if prev, loaded := s.readStmts.LoadOrStore(query, st); loaded {
		st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

// readTimeout is how long one read the store makes may take, waiting for
// a connection included, before it fails as ErrUnavailable: a database
// that stopped answering (a PostgreSQL server that hangs or sits behind a
// network partition, a disk that stalls under SQLite) would otherwise hold
// the caller until its server's write timeout, which then drops the
// connection with no answer at all. The slowest legitimate read is far
// below it (a rare search filter at a million messages takes about 0.6 s,
// README), and it is far below the servers' write timeouts (30 s), so the
// refusal reaches the client as a 503 it can retry. Each statement has its
// own bound, so that a long-poll wait, which reads again at every wake-up,
// and a large body read slice by slice are bounded per read, not as a
// whole.
const readTimeout = 10 * time.Second

// errReadTimeout is the cause of a read's context cut off at its bound.
var errReadTimeout = errors.New("read timed out")

// WithReadTimeout bounds each read at d instead of readTimeout (tests).
func WithReadTimeout(d time.Duration) Option { return func(o *options) { o.readTimeout = d } }

// reading returns ctx bounded for one read.
func (s *Store) reading(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, s.readLimit(), errReadTimeout)
}

// readLimit is how long a read may take: readTimeout unless a test set
// another (WithReadTimeout).
func (s *Store) readLimit() time.Duration {
	if d := time.Duration(s.readBound.Load()); d > 0 {
		return d
	}
	return readTimeout
}

// readErr is err from a read under ctx (from reading): ErrUnavailable when
// the read's bound cut it off, whatever the driver made of that.
func (s *Store) readErr(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, sql.ErrNoRows) || errors.Is(err, ErrUnavailable) ||
		!errors.Is(context.Cause(ctx), errReadTimeout) {
		return err
	}
	return unavailableBecause("the database did not answer within "+s.readLimit().String(), err)
}

// readRows are a read's rows, whose bound ends when they are closed.
type readRows struct {
	*sql.Rows
	s      *Store
	ctx    context.Context
	cancel context.CancelFunc
}

func (r *readRows) Scan(dest ...any) error { return r.fail(r.Rows.Scan(dest...)) }
func (r *readRows) Err() error             { return r.fail(r.Rows.Err()) }

func (r *readRows) Close() error {
	err := r.Rows.Close()
	r.cancel()
	return r.fail(err)
}

// fail is err, met while reading the rows, as readErr says it.
func (r *readRows) fail(err error) error { return r.s.readErr(r.ctx, err) }

// readRow is a read's one row, whose bound ends when it is scanned.
type readRow struct {
	row    *sql.Row
	s      *Store
	ctx    context.Context
	cancel context.CancelFunc
}

func (r *readRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	r.cancel()
	return r.s.readErr(r.ctx, err)
}

// query runs a read, bounded by readTimeout from here until the rows are
// closed.
func (s *Store) query(ctx context.Context, query string, args ...any) (*readRows, error) {
	ctx, cancel := s.reading(ctx)
	st, err := s.readStmt(ctx, query)
	if err != nil {
		cancel()
		return nil, s.readErr(ctx, err)
	}
	if tx, ok := ctx.Value(snapshotKey{}).(*sql.Tx); ok {
		st = tx.StmtContext(ctx, st)
	}
	rows, err := st.QueryContext(ctx, s.b.args(args)...)
	if err != nil {
		cancel()
		return nil, s.readErr(ctx, err)
	}
	return &readRows{Rows: rows, s: s, ctx: ctx, cancel: cancel}, nil
}

// snapshotKey carries, in a context, the read transaction that the store's
// reads through that context share.
type snapshotKey struct{}

// snapshot returns a context whose reads all see the database as of one
// moment, and done to end it. A search needs that: it reads the vocabulary
// first and the index then, and a capture moved from the staged rows into
// the index between the two reads would be missed by both. (PostgreSQL
// reads the index alone, in one statement.)
func (s *Store) snapshot(ctx context.Context) (context.Context, func(), error) {
	if !s.b.vocabulary() {
		return ctx, func() {}, nil
	}
	// The snapshot's reads are bounded each, and it as a whole.
	ctx, cancel := s.reading(ctx)
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		cancel()
		return ctx, nil, s.readErr(ctx, err)
	}
	return context.WithValue(ctx, snapshotKey{}, tx), func() { tx.Rollback(); cancel() }, nil
}

// queryRow runs a read of one row, bounded by readTimeout from here until
// the row is scanned.
func (s *Store) queryRow(ctx context.Context, query string, args ...any) *readRow {
	ctx, cancel := s.reading(ctx)
	r := &readRow{s: s, ctx: ctx, cancel: cancel}
	st, err := s.readStmt(ctx, query)
	if err != nil {
		// database/sql reports the prepare error from Scan this way.
		r.row = s.rdb.QueryRowContext(ctx, s.b.rebind(query), s.b.args(args)...)
		return r
	}
	if tx, ok := ctx.Value(snapshotKey{}).(*sql.Tx); ok {
		st = tx.StmtContext(ctx, st)
	}
	r.row = st.QueryRowContext(ctx, s.b.args(args)...)
	return r
}

// migrationFiles lists the migrations in dir in order of their numbers.
func migrationFiles(dir string) ([]migration, error) {
	entries, err := fs.ReadDir(migrations, dir)
	if err != nil {
		return nil, err
	}
	var all []migration
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("bad migration name %q", e.Name())
		}
		body, err := migrations.ReadFile(dir + "/" + e.Name())
		if err != nil {
			return nil, err
		}
		all = append(all, migration{v, e.Name(), string(body)})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].version < all[j].version })
	return all, nil
}

type migration struct {
	version int
	name    string
	body    string
}

// ErrSchemaTooNew is a database written by a newer capture, whose schema
// this one does not know: it must not read or write it.
var ErrSchemaTooNew = errors.New("the database was written by a newer capture")

// notNewer refuses a database at a schema version past the last of all
// (sorted by version).
func notNewer(current int, all []migration) error {
	if known := all[len(all)-1].version; current > known {
		return fmt.Errorf("%w: its schema is version %d, this capture knows up to %d; upgrade capture (or point it at another database)",
			ErrSchemaTooNew, current, known)
	}
	return nil
}

// schemaVersion reads the version a database is at, creating the table
// that keeps it on a new database.
func schemaVersion(ctx context.Context, q interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (int, error) {
	if _, err := q.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return 0, err
	}
	var current int
	err := q.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&current)
	if errors.Is(err, sql.ErrNoRows) {
		_, err = q.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (0)`)
	}
	return current, err
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

type options struct {
	log         *slog.Logger
	readTimeout time.Duration
}

// WithLogger sends OpenDir's warnings to log instead of slog.Default().
func WithLogger(log *slog.Logger) Option { return func(o *options) { o.log = log } }

// OpenDatabase opens the PostgreSQL database named by database when it is
// set, else the SQLite database in the data dir.
func OpenDatabase(ctx context.Context, database, dir string, opts ...Option) (*Store, error) {
	if database == "" {
		return OpenDir(ctx, dir, opts...)
	}
	if !IsPostgresURL(database) {
		return nil, fmt.Errorf("--database %q: want a postgres:// URL", database)
	}
	return OpenPostgres(ctx, database, opts...)
}

// Shared says whether other processes may serve the same database (it is
// PostgreSQL): what a process would otherwise keep beside it, it keeps in
// the database.
func (s *Store) Shared() bool {
	_, ok := s.b.(*postgresDB)
	return ok
}

// Where names the database for messages: the SQLite file, or the
// PostgreSQL URL without its password.
func (s *Store) Where() string {
	if b, ok := s.b.(*postgresDB); ok {
		return b.where
	}
	return s.Path()
}

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
	s, err := openSQLite(ctx, filepath.Join(dir, DBFile), indexInterval, o.log)
	if err != nil {
		return nil, err
	}
	// Before any write is queued, so the writer reads it after.
	s.readBound.Store(int64(o.readTimeout))
	return s, nil
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
