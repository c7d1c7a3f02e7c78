package store

import (
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capturedev/capture/store/pgtest"
)

// cutOff is a TCP proxy in front of the test server that can be cut, as a
// stopped PostgreSQL is: every open connection drops and new ones are
// refused. The test server itself stays up for the package's other tests.
type cutOff struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	done   bool
}

// behindCutOff returns a proxy to the database at rawURL and the URL that
// reaches the database through it.
func behindCutOff(t *testing.T, rawURL string) (*cutOff, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutOff{ln: ln, target: u.Host}
	go p.serve()
	t.Cleanup(p.cut)
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *cutOff) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.done {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { io.Copy(s, c); s.Close() }()
		go func() { io.Copy(c, s); c.Close() }()
	}
}

// cut drops every connection and refuses new ones from now on.
func (p *cutOff) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = true
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// A wait in progress when the database goes away hears of it at once:
// its waiter is woken and its next read fails as unavailable (503 from
// the API), instead of holding until its time is up and answering an
// empty list as if nothing had arrived.
func TestWaitersWokenWhenDatabaseGoesAway(t *testing.T) {
	if !pgtest.Requested() {
		t.Skip("PostgreSQL only: SQLite has no connection to lose")
	}
	proxy, through := behindCutOff(t, pgDatabase(t))
	s, err := Open(t.Context(), through)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	p := mustProject(t, s, "p", "free")
	e, err := s.CreateEndpoint(ctx, p.ID, "e", nil)
	if err != nil {
		t.Fatal(err)
	}
	woken := s.Watch(e.ID)
	proxy.cut()
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter slept on while the database was out of reach")
	}
	_, err = s.Requests(ctx, e.ID, RequestFilter{}, Page{Limit: 1})
	if !IsUnavailable(err) {
		t.Fatalf("reading with the database out of reach: %v, want unavailable", err)
	}
	// What the refusal says is the lost connection, without the
	// database's address (user, host), which would reach webhook senders.
	if why := Why(err); why != "lost the connection to the database" {
		t.Errorf("Why = %q, want the lost connection, unaddressed", why)
	}
}

// After PostgreSQL restarts, the first commit that goes through (what
// /readyz checks) means reads go through as well: the read pool kept no
// connection from before the restart to fail one more call each.
func TestReadsWorkOnceCommitsDoAfterRestart(t *testing.T) {
	if !pgtest.Requested() {
		t.Skip("PostgreSQL only: SQLite has no server to restart")
	}
	s := newStore(t)
	ctx := t.Context()
	p := mustProject(t, s, "p", "free")
	// Fill the read pool with connections in steady use, as a serving
	// process has: checked out twice, so that pgx no longer checks them
	// before handing them out again.
	for range 2 {
		conns := make([]*sql.Conn, readIdleConns)
		for i := range conns {
			var err error
			if conns[i], err = s.rdb.Conn(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range conns {
			c.Close()
		}
	}
	// What a restart does to every client: the server ends each backend
	// with FATAL 57P01 ("terminating connection due to administrator
	// command"), as pg_ctl stop -m fast does. The listening connection is
	// spared, so that the writer alone finds out (the listener may hear of
	// it later, or have heard and reconnected before the others died).
	admin, err := sql.Open("pgx", s.b.(*postgresDB).url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query NOT LIKE 'LISTEN%'`); err != nil {
		t.Fatal(err)
	}
	// The first write hears of the restart, takes a new connection and
	// commits on it: a capture sent once the server is back is not
	// refused.
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("the first commit after the restart: %v", err)
	}
	for i := range readIdleConns + 1 {
		if _, err := s.Project(ctx, p.ID); err != nil {
			t.Fatalf("read %d after a commit went through: %v", i+1, err)
		}
	}
}

// A write the disk has no room for is refused as unavailable, saying that
// the disk is full and nothing else (SQLite has rolled the transaction back
// itself), and the store writes again once there is room (and the WAL has
// been checkpointed).
func TestDiskFullIsUnavailable(t *testing.T) {
	if pgtest.Requested() {
		t.Skip("SQLite's page limit stands in for a full disk")
	}
	s := newStore(t)
	ctx := t.Context()
	boot, err := s.EnsureBootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	makeRoom := fillDisk(t, s)
	body := make([]byte, 600<<10) // random: the pack cannot shrink it
	rand.Read(body)
	_, err = s.InsertRequest(ctx, &NewRequest{EndpointID: boot.Endpoint.ID, ReceivedAt: time.Now(), Method: "POST",
		Path: "/full", RemoteAddr: "127.0.0.1:1", Body: body})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrDiskFull) || strings.Contains(err.Error(), "rollback") {
		t.Fatalf("insert on a full disk = %v, want unavailable: the disk is full", err)
	}
	makeRoom()
	// Captures are taken again once a checkpoint has given the WAL's
	// blocks back (the checkpoint loop's next, at most 200 ms on).
	if _, _, err := s.b.(*sqliteDB).checkpoint("TRUNCATE"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertRequest(ctx, &NewRequest{EndpointID: boot.Endpoint.ID, ReceivedAt: time.Now(), Method: "POST",
		Path: "/room", RemoteAddr: "127.0.0.1:1", Body: body}); err != nil {
		t.Fatalf("insert once there is room: %v", err)
	}
	list, err := s.Requests(ctx, boot.Endpoint.ID, RequestFilter{}, Page{Limit: 10})
	if err != nil || len(list.Items) != 1 || list.Items[0].Path != "/room" {
		t.Fatalf("stored after the full disk: %+v, %v", list, err)
	}
}

// fillDisk makes the disk full to the writer: SQLite's page limit for its
// connection, two pages past what the database holds. The function it
// returns makes room again.
func fillDisk(t *testing.T, s *Store) (makeRoom func()) {
	t.Helper()
	var pages int64
	if err := s.rdb.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	limit := func(n int64) {
		if err := s.write(t.Context(), func(t *wtx) error {
			_, err := t.exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, n))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	limit(pages + 2)
	return func() { limit(1 << 30) }
}
