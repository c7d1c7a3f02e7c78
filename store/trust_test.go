package store

import (
	"bytes"
	"database/sql"
	"errors"
	_ "github.com/jackc/pgx/v5/stdlib"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The database and the files SQLite keeps beside it hold revealable SMTP
// passwords: they are the owner's only, whether new or left by an older
// version with group and world access.
func TestDatabaseFilesAreOwnerOnly(t *testing.T) {
	sqliteOnly(t, "database files")
	dir := t.TempDir()
	path := filepath.Join(dir, DBFile)
	check := func(when string) {
		t.Helper()
		for _, name := range []string{DBFile, DBFile + "-wal", DBFile + "-shm"} {
			fi, err := os.Stat(filepath.Join(dir, name))
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: %s has mode %v, want 0600", when, name, fi.Mode().Perm())
			}
		}
	}
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	mustProject(t, s, "p", "free")
	check("new")
	// Files made readable by others, as older versions left them.
	for _, name := range []string{DBFile, DBFile + "-wal", DBFile + "-shm"} {
		if err := os.Chmod(filepath.Join(dir, name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s2, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	check("reopened")
	s.Close()
}

func TestDataDirOpenToOthersIsTightened(t *testing.T) {
	sqliteOnly(t, "the data dir holds the database")
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s, err := OpenDir(t.Context(), dir, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir mode %v, want 0700", fi.Mode().Perm())
	}
	if lines := strings.Split(strings.TrimSpace(logs.String()), "\n"); len(lines) != 1 ||
		!strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "0755") {
		t.Errorf("want one warning line, got %q", logs.String())
	}
	// Once tightened, nothing more to say.
	logs.Reset()
	s, err = OpenDir(t.Context(), dir, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if logs.Len() != 0 {
		t.Errorf("second open logged %q", logs.String())
	}
}

// lockDatabase holds the write lock from another connection, as another
// process would, until the returned function is called: on SQLite the
// database's, on PostgreSQL the row every write transaction reads.
func lockDatabase(t *testing.T, s *Store) (release func()) {
	t.Helper()
	var other *sql.DB
	var err error
	lock := "BEGIN EXCLUSIVE"
	if b, ok := s.b.(*postgresDB); ok {
		other, err = sql.Open("pgx", b.url)
		lock = "BEGIN; LOCK TABLE settings_version IN ACCESS EXCLUSIVE MODE"
	} else {
		other, err = sql.Open("sqlite", "file:"+s.Path())
	}
	if err != nil {
		t.Fatal(err)
	}
	conn, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), lock); err != nil {
		t.Fatal(err)
	}
	return func() {
		conn.ExecContext(t.Context(), "ROLLBACK")
		conn.Close()
		other.Close()
	}
}

// A write the database cannot commit within the deadline fails with
// ErrUnavailable, and is then never committed: its caller has been told to
// retry, and a retry must not find it stored twice.
func TestUncommittableWriteIsUnavailableAndDropped(t *testing.T) {
	s := newStore(t)
	p := mustProject(t, s, "p", "team")
	e, err := s.CreateEndpoint(t.Context(), p.ID, "e", nil)
	if err != nil {
		t.Fatal(err)
	}
	release := lockDatabase(t, s)
	const n = 20
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := s.InsertRequest(t.Context(), &NewRequest{EndpointID: e.ID, ReceivedAt: now(), Method: "POST",
				Path: "/" + string(rune('a'+i)), RemoteAddr: "127.0.0.1:1", Body: []byte("x")})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; !errors.Is(err, ErrUnavailable) {
			t.Errorf("write under another process's lock: %v, want ErrUnavailable", err)
		}
	}
	release()
	// The writer is free again; a write now commits, and nothing of the
	// refused ones came with it.
	insertRequests(t, s, e.ID, "/after")
	l, err := s.Requests(t.Context(), e.ID, RequestFilter{}, Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 || l.Items[0].Path != "/after" {
		t.Errorf("stored %+v, want only /after", l.Items)
	}
	if _, err := s.CreateProject(t.Context(), "after-close", "free"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.CreateProject(t.Context(), "closed", "free"); !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrClosed) {
		t.Errorf("write after Close: %v", err)
	}
}

// SettingsVersion moves with every change to what a listener caches, made
// here or by another process, and stays put under captures.
func TestSettingsVersion(t *testing.T) {
	s := newStore(t)
	other := openAgain(t, s) // as an admin command would
	version := func() int64 {
		t.Helper()
		v, err := s.SettingsVersion(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	p := mustProject(t, s, "p", "free")
	e, err := s.CreateEndpoint(t.Context(), p.ID, "e", nil)
	if err != nil {
		t.Fatal(err)
	}
	in, err := s.CreateInbox(t.Context(), p.ID, "i")
	if err != nil {
		t.Fatal(err)
	}
	v := version()
	if version() != v {
		t.Fatal("version moved with nothing changed")
	}
	insertRequests(t, s, e.ID, "/a", "/b")
	if _, err := s.InsertMessage(t.Context(), &NewMessage{InboxID: in.ID, ReceivedAt: now(), Raw: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if version() != v {
		t.Error("version moved with captures")
	}
	status := 202
	delay := time.Duration(0)
	for name, change := range map[string]func() error{
		"endpoint response": func() error {
			_, err := other.UpdateEndpoint(t.Context(), e.ID, EndpointUpdate{Status: &status})
			return err
		},
		"endpoint delay (this process)": func() error {
			_, err := s.UpdateEndpoint(t.Context(), e.ID, EndpointUpdate{Delay: &delay})
			return err
		},
		"plan": func() error {
			_, err := other.SetPlan(t.Context(), p.ID, "pro")
			return err
		},
		"inbox password": func() error {
			_, err := other.RotateInboxPassword(t.Context(), in.ID)
			return err
		},
		"new endpoint": func() error {
			_, err := other.CreateEndpoint(t.Context(), p.ID, "e2", nil)
			return err
		},
	} {
		if err := change(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if next := version(); next == v {
			t.Errorf("%s: version stayed %d", name, v)
		} else {
			v = next
		}
	}
}
