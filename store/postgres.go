package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// IsPostgresURL says whether database names a PostgreSQL database.
func IsPostgresURL(database string) bool {
	return strings.HasPrefix(database, "postgres://") || strings.HasPrefix(database, "postgresql://")
}

// ValidPostgresURL reports whether database is a well-formed postgres://
// URL. Only its form: it may still name a server that cannot be reached,
// or certificate files that cannot be read, which opening it reports.
func ValidPostgresURL(database string) bool {
	if !IsPostgresURL(database) {
		return false
	}
	_, err := url.Parse(database)
	return err == nil
}

// postgresDB is the PostgreSQL backend: any number of processes share the
// database, each with its own writer committing its captures.
type postgresDB struct {
	s   *Store
	url string
	// where names the database for messages: the URL without its password.
	where string
	// replica tells this process's commit announcements from others'.
	replica    string
	listen     *pgx.ConnConfig
	stopListen context.CancelFunc
	listening  chan struct{}
}

// lockTimeout bounds how long a statement waits for a lock another
// replica holds before the write is refused as unavailable, as SQLite's
// busy timeout does.
const lockTimeout = 5 * time.Second

// parsePostgresURL reads a postgres:// URL into the driver's
// configuration, which also reads the certificate files it names. Its
// error says why without the URL, which may hold a password.
func parsePostgresURL(database string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(database)
	if err == nil {
		return cfg, nil
	}
	why := ""
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		// "cannot parse `<the URL, its password masked>`: <why>"
		_, why, _ = strings.Cut(err.Error(), "`: ")
	}
	if u, perr := url.Parse(database); why == "" || perr == nil && leaks(why, u) {
		return nil, errors.New("the database URL is not a valid postgres:// URL")
	}
	return nil, fmt.Errorf("the database URL: %s", why)
}

// leaks reports whether msg holds the password of u, in its user info or
// its query.
func leaks(msg string, u *url.URL) bool {
	pw, _ := u.User.Password()
	if q := u.Query().Get("password"); q != "" {
		pw = q
	}
	return pw != "" && strings.Contains(msg, pw)
}

// OpenPostgres opens the PostgreSQL database at url (postgres://…) and
// brings its schema up to date; replicas starting together migrate once.
func OpenPostgres(ctx context.Context, url string, opts ...Option) (*Store, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := parsePostgresURL(url)
	if err != nil {
		return nil, err
	}
	where := fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
	fail := func(err error) (*Store, error) { return nil, fmt.Errorf("open database %s: %w", where, err) }
	cfg.RuntimeParams["application_name"] = "capture"
	// Acknowledged means committed to disk, whatever the server's default.
	cfg.RuntimeParams["synchronous_commit"] = "on"
	cfg.RuntimeParams["lock_timeout"] = strconv.Itoa(int(lockTimeout.Milliseconds()))
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	wdb := stdlib.OpenDB(*cfg)
	wdb.SetMaxOpenConns(1)
	wdb.SetConnMaxIdleTime(0)
	if err := migratePostgres(ctx, wdb); err != nil {
		wdb.Close()
		return fail(err)
	}
	rdb := stdlib.OpenDB(*cfg)
	rdb.SetMaxOpenConns(16)
	rdb.SetMaxIdleConns(readIdleConns)
	rdb.SetConnMaxIdleTime(time.Minute)

	// A logger always, as on SQLite: the writer logs what it cannot
	// take back.
	s := &Store{wdb: wdb, rdb: rdb, notify: newNotifier(), log: slog.Default()}
	s.readBound.Store(int64(o.readTimeout))
	if o.log != nil {
		s.log = o.log
	}
	b := &postgresDB{s: s, url: url, where: where, replica: randomBase62(12), listen: cfg.Copy(), listening: make(chan struct{})}
	s.b = b
	conn, err := wdb.Conn(ctx)
	if err != nil {
		wdb.Close()
		rdb.Close()
		return fail(err)
	}
	// LISTEN before the first capture is taken, so that from Open on no
	// other replica's commit goes unheard.
	first, err := b.connectListener(ctx)
	if err != nil {
		conn.Close()
		wdb.Close()
		rdb.Close()
		return fail(err)
	}
	if err := s.start(ctx, conn); err != nil {
		first.Close(context.Background())
		conn.Close()
		wdb.Close()
		rdb.Close()
		return fail(err)
	}
	lctx, cancel := context.WithCancel(context.Background())
	b.stopListen = cancel
	go b.listenLoop(lctx, first)
	return s, nil
}

// PostgresHasData says whether the database at url holds capture's schema
// (a serve has run on it), without changing anything.
func PostgresHasData(ctx context.Context, url string) (bool, error) {
	cfg, err := parsePostgresURL(url)
	if err != nil {
		return false, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, fmt.Errorf("open database postgres://%s@%s:%d/%s: %w", cfg.User, cfg.Host, cfg.Port, cfg.Database, err)
	}
	defer conn.Close(context.Background())
	var has bool
	err = conn.QueryRow(ctx, `SELECT to_regclass('schema_version') IS NOT NULL`).Scan(&has)
	return has, err
}

// lockKey is the advisory lock key for name.
func lockKey(name string) int64 {
	h := fnv.New64a()
	io.WriteString(h, "capture "+name)
	return int64(h.Sum64())
}

// postgresSteps are the parts of migrations that Go computes, run in the
// migration's transaction after its SQL: SQLite's migrations call Go
// through SQL functions, which PostgreSQL cannot.
var postgresSteps = map[int]func(context.Context, *sql.Tx) error{
	2: refoldPostgres,
}

// migratePostgres applies the migrations under an advisory lock: replicas
// starting at the same moment take turns, and the later ones find the
// schema up to date.
func migratePostgres(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	key := lockKey("migrate")
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, key)
	current, err := schemaVersion(ctx, conn)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	all, err := migrationFiles("migrations/postgres")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := notNewer(current, all); err != nil {
		return err
	}
	if current > 0 {
		// Builds before packs wrote version 1 without the packed content
		// columns, and no migration adds them: refuse such a database
		// clearly rather than fail every capture and read.
		var packed bool
		if err := conn.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = 'requests' AND column_name = 'content')`).Scan(&packed); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if !packed {
			return fmt.Errorf("migrate: the database was set up by an early development build of capture whose schema this one cannot upgrade (requests have no content column); point capture at a new database")
		}
	}
	for _, m := range all {
		if m.version <= current {
			continue
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return stepFailed(ctx, m.name, fmt.Errorf("migrate %s: %w", m.name, err))
		}
		if _, err := tx.ExecContext(ctx, m.body); err != nil {
			tx.Rollback()
			return stepFailed(ctx, m.name, fmt.Errorf("migrate %s: %w", m.name, err))
		}
		if step := postgresSteps[m.version]; step != nil {
			if err := step(ctx, tx); err != nil {
				tx.Rollback()
				return stepFailed(ctx, m.name, fmt.Errorf("migrate %s: %w", m.name, err))
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = $1`, m.version); err != nil {
			tx.Rollback()
			return stepFailed(ctx, m.name, fmt.Errorf("migrate %s: %w", m.name, err))
		}
		if err := tx.Commit(); err != nil {
			return stepFailed(ctx, m.name, fmt.Errorf("migrate %s: %w", m.name, err))
		}
	}
	return nil
}

func (b *postgresDB) close() error {
	b.stopListen()
	<-b.listening
	return nil
}

// rebind numbers SQLite's placeholders as PostgreSQL's: ?N is $N, and a
// bare ? is one past the highest number so far, as SQLite counts.
func (b *postgresDB) rebind(query string) string {
	var out strings.Builder
	out.Grow(len(query) + 16)
	highest, quoted := 0, false
	for i := 0; i < len(query); i++ {
		c := query[i]
		if c == '\'' {
			quoted = !quoted
		}
		if c != '?' || quoted {
			out.WriteByte(c)
			continue
		}
		j := i + 1
		for j < len(query) && query[j] >= '0' && query[j] <= '9' {
			j++
		}
		n := highest + 1
		if j > i+1 {
			n, _ = strconv.Atoi(query[i+1 : j])
		}
		highest = max(highest, n)
		out.WriteString("$" + strconv.Itoa(n))
		i = j - 1
	}
	return out.String()
}

// args makes strings fit PostgreSQL's text, which holds neither NUL nor
// invalid UTF-8 (SQLite keeps both): such characters become U+FFFD. What
// must stay byte-exact (raw messages, bodies, attachments) is bytea.
func (b *postgresDB) args(args []any) []any {
	for i, a := range args {
		if s, ok := a.(string); ok && (strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s)) {
			args[i] = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
		}
	}
	return args
}

func (b *postgresDB) begin() string { return "BEGIN" }

// unavailable: a lock held elsewhere past lockTimeout, a deadlock between
// replicas, the server going away or refusing connections.
func (b *postgresDB) unavailable(err error) (string, bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "55P03":
			return "locked by another transaction for " + lockTimeout.String(), true
		case pe.Code == "40P01", pe.Code == "40001":
			return "conflict with another replica's transaction", true
		case pe.Code == "57014", pe.Code == "53300", strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "57P"):
			return "", true
		}
		return "", false
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.Timeout(err) ||
		strings.Contains(err.Error(), "conn closed") {
		// The address (user, host, database) stays in the log: this
		// reason is repeated to webhook senders and SMTP clients.
		return "lost the connection to the database", true
	}
	return "", false
}

// Another replica may have changed settings at any moment, and nothing on
// this connection tells: every batch reads the version (one indexed row).
func (b *postgresDB) writerBegun(*wtx) (bool, error) { return true, nil }
func (b *postgresDB) writerCommitted()               {}

// announcement caps one notification's payload below PostgreSQL's 8000
// bytes.
const announcement = 7000

// announce sends the collections on capture_commits from inside the
// transaction: PostgreSQL delivers it to every listener at the commit,
// and never when the transaction rolls back.
func (b *postgresDB) announce(t *wtx, collections []string) error {
	for len(collections) > 0 {
		payload := b.replica
		n := 0
		for n < len(collections) && len(payload)+1+len(collections[n]) <= announcement {
			payload += " " + collections[n]
			n++
		}
		if n == 0 {
			return fmt.Errorf("collection id too long to announce: %.40q", collections[0])
		}
		if _, err := t.exec(`SELECT pg_notify('capture_commits', ?)`, payload); err != nil {
			return err
		}
		collections = collections[n:]
	}
	return nil
}

func (b *postgresDB) settingsVersion(ctx context.Context) (int64, error) {
	var v int64
	err := b.s.queryRow(ctx, settingsVersionQuery).Scan(&v)
	return v, err
}

func (b *postgresDB) lockTx(t *wtx, name string) error {
	_, err := t.exec(`SELECT pg_advisory_xact_lock(?)`, lockKey(name))
	return err
}

// exclusively holds a session advisory lock on a connection of its own
// while fn runs; a replica that dies holding it lets it go with its
// connection.
func (b *postgresDB) exclusively(ctx context.Context, name string, wait bool, fn func() error) (ran bool, err error) {
	conn, err := b.s.rdb.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	key := lockKey(name)
	if wait {
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
			return false, err
		}
	} else if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ran); err != nil || !ran {
		return false, err
	}
	defer func() {
		var unlocked bool
		err := conn.QueryRowContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, key).Scan(&unlocked)
		if err != nil || !unlocked {
			// Never hand a connection holding the lock back to the pool.
			conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	return true, fn()
}

// byteColumns are the bytea columns; the others are text.
var byteColumns = map[string]bool{"content": true, "data": true}

func (b *postgresDB) partQuery(table, column, key string) string {
	value := column
	if !byteColumns[column] {
		// Bytes of the UTF-8 text, not characters.
		value = `convert_to(` + column + `, 'UTF8')`
	}
	return `SELECT substring(` + value + ` FROM CAST(?2 AS integer) FOR CAST(?1 AS integer)) FROM ` + table +
		` WHERE ` + key + ` = ?3`
}

func (b *postgresDB) insertSeq(t *wtx, insert string, args ...any) (int64, error) {
	var seq int64
	err := t.queryRow(insert+` RETURNING seq`, args...).Scan(&seq)
	return seq, err
}

// nextSeqs draws from table's identity sequence, which every replica
// shares.
func (b *postgresDB) nextSeqs(t *wtx, table string, n int) ([]int64, error) {
	rows, err := t.query(`SELECT nextval(pg_get_serial_sequence(?1, 'seq')) FROM generate_series(1, CAST(?2 AS integer))`, table, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	seqs := make([]int64, 0, n)
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			return nil, err
		}
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	return seqs, rows.Err()
}

// The index is a table of each capture's tokens, written with the capture,
// under a pg_trgm index (migrations/postgres): GIN absorbs writes in its
// pending list, so nothing need be staged, and no vocabulary is kept.
func (b *postgresDB) indexTable(index string) string { return index }
func (b *postgresDB) vocabulary() bool               { return false }

func (b *postgresDB) searchSource(k *keyset, plan searchPlan, index string) bool {
	plan.trigramSource(k, index)
	return true
}

func (b *postgresDB) jsonGroupArray(expr, order string) string {
	return `coalesce(json_agg(` + expr + ` ORDER BY ` + order + `), '[]')`
}

// nowMS is the database's clock in milliseconds: the replicas' own clocks
// may disagree, the database's is one.
const nowMS = `(extract(epoch FROM clock_timestamp()) * 1000)`

// allow is a token bucket per key in a row every replica updates in one
// statement: the tokens refill at perSecond up to burst, and a request
// takes one when at least one is there.
func (b *postgresDB) allow(ctx context.Context, keyID string, perSecond, burst int) (time.Duration, bool, error) {
	const refill = `least(CAST(?3 AS double precision),
		b.tokens + (excluded.at_ms - b.at_ms) * CAST(?2 AS double precision) / 1000)`
	var left float64
	err := b.s.queryRow(ctx, `INSERT INTO rate_buckets AS b (key_id, tokens, at_ms)
		VALUES (?1, CAST(?3 AS double precision) - 1, `+nowMS+`)
		ON CONFLICT (key_id) DO UPDATE SET tokens = `+refill+` - 1, at_ms = excluded.at_ms
		WHERE `+refill+` >= 1
		RETURNING tokens`, keyID, perSecond, burst).Scan(&left)
	if err == nil {
		return 0, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, false, err
	}
	var wait float64
	err = b.s.queryRow(ctx, `SELECT (1 - least(CAST(?3 AS double precision),
			tokens + (`+nowMS+` - at_ms) * CAST(?2 AS double precision) / 1000)) / CAST(?2 AS double precision)
		FROM rate_buckets WHERE key_id = ?1`, keyID, perSecond, burst).Scan(&wait)
	if err != nil {
		return 0, false, err
	}
	return time.Duration(max(wait, 0.001) * float64(time.Second)), false, nil
}

// waitSlot takes the first of the project's slots that is free or whose
// holder's lease ran out (its replica died holding it).
func (b *postgresDB) waitSlot(ctx context.Context, projectID string, slots int, hold time.Duration) (func(), bool, error) {
	holder := b.replica + randomBase62(12)
	for slot := 1; slot <= slots; slot++ {
		var got int
		err := b.s.queryRow(ctx, `INSERT INTO wait_slots AS w (project_id, slot, holder, expires_ms)
			VALUES (?1, ?2, ?3, `+nowMS+` + ?4)
			ON CONFLICT (project_id, slot) DO UPDATE SET holder = excluded.holder, expires_ms = excluded.expires_ms
			WHERE w.expires_ms < `+nowMS+`
			RETURNING slot`, projectID, slot, holder, hold.Milliseconds()).Scan(&got)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		return func() {
			// Given back even when the caller's context has ended (its
			// client went away): that is when it matters most.
			ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
			defer cancel()
			b.s.rdb.ExecContext(ctx, `DELETE FROM wait_slots WHERE project_id = $1 AND slot = $2 AND holder = $3`,
				projectID, slot, holder)
		}, true, nil
	}
	return nil, false, nil
}

func (b *postgresDB) sizes(ctx context.Context) (db, wal int64, err error) {
	err = b.s.queryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&db)
	return db, 0, err
}

// The listener: a connection of its own that LISTENs for other replicas'
// commits and settings changes, reconnecting with backoff when it drops.

const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

func (b *postgresDB) connectListener(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, b.listen)
	if err != nil {
		return nil, err
	}
	for _, ch := range []string{"capture_commits", "capture_settings"} {
		if _, err := conn.Exec(ctx, "LISTEN "+ch); err != nil {
			conn.Close(context.Background())
			return nil, err
		}
	}
	return conn, nil
}

func (b *postgresDB) listenLoop(ctx context.Context, conn *pgx.Conn) {
	defer close(b.listening)
	backoff := minBackoff
	for {
		if conn != nil {
			backoff = minBackoff
			b.heard(ctx, conn)
			conn.Close(context.Background())
			conn = nil
			// No commit will be heard until a new connection listens, and
			// the server may be gone: every waiter looks again now, on a
			// new connection, and hears that the database is out of reach
			// rather than its own timeout.
			if ctx.Err() == nil {
				b.s.dropIdleReads()
				b.s.notify.wakeAll()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
		c, err := b.connectListener(ctx)
		if err != nil {
			continue
		}
		conn = c
		// Whatever was announced while no connection listened is lost:
		// every waiter looks again, and settings are read again.
		b.s.notify.wakeAll()
		if v, err := b.settingsVersion(ctx); err == nil {
			b.s.settings.publish(v)
		}
	}
}

// heard passes on what conn hears until it fails.
func (b *postgresDB) heard(ctx context.Context, conn *pgx.Conn) {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return
		}
		switch n.Channel {
		case "capture_commits":
			fields := strings.Fields(n.Payload)
			// This replica's own commits woke its waiters already.
			if len(fields) > 1 && fields[0] != b.replica {
				b.s.notify.notify(fields[1:])
			}
		case "capture_settings":
			if v, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
				b.s.settings.publish(v)
			}
		}
	}
}
