package store

import (
	"bytes"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capturedev/capture/store/pgtest"
)

// stallNextCommit makes the writer's next transaction stop before its
// COMMIT, as a frozen or failing disk stops it there, until the returned
// release is called; stalled is closed once the writer has stopped. Later
// transactions commit as usual.
func stallNextCommit(t *testing.T, s *Store) (stalled <-chan struct{}, release func()) {
	t.Helper()
	reached, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	stall := func() {
		once.Do(func() {
			close(reached)
			<-resume
		})
	}
	s.beforeCommit.Store(&stall)
	var released sync.Once
	release = func() { released.Do(func() { close(resume) }) }
	// Released even when the test fails, so that Close can finish.
	t.Cleanup(release)
	return reached, release
}

// A capture whose commit the disk holds up past the deadline is refused
// (ErrUnavailable, so 503 or 451) while the commit is still stuck, not
// once it lands; and when it lands, the capture is taken out again, so
// that the sender's retry does not find it stored twice. Requests and
// messages alike.
func TestCaptureStalledInCommitIsRefusedAndTakenBack(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	p := mustProject(t, s, "p", "team")
	stalledEndpoint, err := s.CreateEndpoint(ctx, p.ID, "stalled", nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.CreateEndpoint(ctx, p.ID, "other", nil)
	if err != nil {
		t.Fatal(err)
	}
	inbox, err := s.CreateInbox(ctx, p.ID, "in")
	if err != nil {
		t.Fatal(err)
	}
	captures := []struct {
		name       string
		collection string
		insert     func() error
	}{
		{"request", stalledEndpoint.ID, func() error {
			_, err := s.InsertRequest(ctx, &NewRequest{EndpointID: stalledEndpoint.ID, ReceivedAt: now(), Method: "POST",
				Path: "/stalled", RemoteAddr: "127.0.0.1:1", Body: []byte("stalled")})
			return err
		}},
		{"message", inbox.ID, func() error {
			_, err := s.InsertMessage(ctx, &NewMessage{InboxID: inbox.ID, ReceivedAt: now(), EnvelopeFrom: "a@example.com",
				EnvelopeTo: []string{"b@example.com"}, Subject: "stalled", Raw: []byte("Subject: stalled\r\n\r\nstalled\r\n")})
			return err
		}},
	}
	for _, c := range captures {
		t.Run(c.name, func(t *testing.T) {
			woken := s.Watch(c.collection)
			stalled, release := stallNextCommit(t, s)
			refused := make(chan error, 1)
			go func() { refused <- c.insert() }()
			<-stalled
			// The commit stays stuck until release: the caller must hear
			// at its deadline, not when the disk comes back.
			select {
			case err := <-refused:
				if !errors.Is(err, ErrUnavailable) {
					t.Fatalf("capture whose commit stalled: %v, want ErrUnavailable", err)
				}
			case <-time.After(4 * commitTimeout):
				t.Fatalf("no answer %s into a stalled commit, past the %s deadline", 4*commitTimeout, commitTimeout)
			}
			release()
			// Written after the stalled commit and its taking back: once
			// it is committed, both are done.
			insertRequests(t, s, other.ID, "/after-"+c.name)
			select {
			case <-woken:
				t.Error("the refused capture woke its collection's waiters")
			default:
			}
			reqs, err := s.Requests(ctx, stalledEndpoint.ID, RequestFilter{}, Page{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			msgs, err := s.Messages(ctx, inbox.ID, MessageFilter{}, Page{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(reqs.Items)+len(msgs.Items) != 0 {
				t.Errorf("refused capture found stored: requests %+v, messages %+v", reqs.Items, msgs.Items)
			}
			e, err := s.Endpoint(ctx, p.ID, stalledEndpoint.ID)
			if err != nil {
				t.Fatal(err)
			}
			in, err := s.Inbox(ctx, p.ID, inbox.ID)
			if err != nil {
				t.Fatal(err)
			}
			if e.RequestCount != 0 || in.MessageCount != 0 {
				t.Errorf("counters after taking back: endpoint %d requests, inbox %d messages; want 0", e.RequestCount, in.MessageCount)
			}
		})
	}
	s.beforeCommit.Store(nil)
	// A capture that commits in time is kept, and heard as committed.
	insertRequests(t, s, stalledEndpoint.ID, "/kept")
	reqs, err := s.Requests(ctx, stalledEndpoint.ID, RequestFilter{}, Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs.Items) != 1 || reqs.Items[0].Path != "/kept" {
		t.Errorf("after the stall: %+v, want /kept alone", reqs.Items)
	}
}

// A database file deleted or replaced while serving would go on taking
// commits into the open, unlinked file, acknowledged and then lost at the
// next start. Every write is refused instead, naming the cause, which is
// logged once.
func TestDatabaseFileGoneRefusesWrites(t *testing.T) {
	if pgtest.Requested() {
		t.Skip("SQLite only: PostgreSQL has no file to lose")
	}
	for _, how := range []string{"removed", "replaced"} {
		t.Run(how, func(t *testing.T) {
			var logs bytes.Buffer
			dir := t.TempDir()
			s, err := OpenDir(t.Context(), dir, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			p := mustProject(t, s, "p", "team")
			e, err := s.CreateEndpoint(t.Context(), p.ID, "e", nil)
			if err != nil {
				t.Fatal(err)
			}
			insertRequests(t, s, e.ID, "/before")
			path := filepath.Join(dir, DBFile)
			if how == "removed" {
				err = os.Remove(path)
			} else {
				err = os.Rename(newSQLiteFile(t), path)
			}
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				_, err := s.InsertRequest(t.Context(), &NewRequest{EndpointID: e.ID, ReceivedAt: now(), Method: "POST",
					Path: "/after", RemoteAddr: "127.0.0.1:1"})
				if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "capture.db was removed or replaced while serving; restart serve") {
					t.Fatalf("capture with %s %s: %v, want ErrUnavailable naming the cause", DBFile, how, err)
				}
			}
			if err := s.Ping(t.Context()); !errors.Is(err, ErrUnavailable) {
				t.Errorf("Ping with %s %s: %v, want ErrUnavailable", DBFile, how, err)
			}
			if n := strings.Count(logs.String(), "removed or replaced"); n != 1 {
				t.Errorf("logged the cause %d times, want once:\n%s", n, logs.String())
			}
		})
	}
}

// newSQLiteFile is another SQLite database file, outside the data dir.
func newSQLiteFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE t (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	return path
}

// On PostgreSQL a batch's statements stop at its oldest capture's deadline
// (a lock held elsewhere). Captures queued later in that batch still have
// time: they are tried again and commit once the lock goes, instead of
// being refused with the oldest, before their own five seconds.
func TestLaterCapturesOutliveTheOldestsDeadline(t *testing.T) {
	if !pgtest.Requested() {
		t.Skip("PostgreSQL only: SQLite takes its write lock before a batch is claimed")
	}
	ctx := t.Context()
	s := newStore(t)
	p := mustProject(t, s, "p", "team")
	e, err := s.CreateEndpoint(ctx, p.ID, "e", nil)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("pgx", s.b.(*postgresDB).url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	lock, err := admin.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	if _, err := lock.ExecContext(ctx, `LOCK TABLE requests IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	insert := func(path string) <-chan error {
		out := make(chan error, 1)
		go func() {
			_, err := s.InsertRequest(ctx, &NewRequest{EndpointID: e.ID, ReceivedAt: time.Now(), Method: "POST",
				Path: path, RemoteAddr: "127.0.0.1:1"})
			out <- err
		}()
		return out
	}
	// first blocks the writer on the lock; second and third queue behind
	// it and go together in the next batch, whose statements stop at
	// second's deadline. The lock goes between second's deadline and
	// third's.
	start := time.Now()
	first := insert("/first")
	time.Sleep(500 * time.Millisecond)
	second := insert("/second")
	time.Sleep(3 * time.Second)
	third := insert("/third")
	time.Sleep(time.Until(start.Add(7 * time.Second)))
	lock.Rollback()
	for name, ch := range map[string]<-chan error{"first": first, "second": second} {
		if err := <-ch; !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s, past its deadline under the lock: %v, want ErrUnavailable", name, err)
		}
	}
	if err := <-third; err != nil {
		t.Errorf("third, queued later and within its five seconds when the lock went: %v", err)
	}
	list, err := s.Requests(ctx, e.ID, RequestFilter{}, Page{Limit: 10})
	if err != nil || len(list.Items) != 1 || list.Items[0].Path != "/third" {
		t.Errorf("stored: %+v, %v; want /third alone", list.Items, err)
	}
}

// A write that is not a capture (an inbox created) cannot be taken back,
// so a stalled commit is heard to its end: its caller is never told it
// failed while the write lands after all.
func TestStalledWriteThatIsNoCaptureIsHeardToItsEnd(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	p := mustProject(t, s, "p", "team")
	stalled, release := stallNextCommit(t, s)
	done := make(chan error, 1)
	var created Inbox
	go func() {
		var err error
		created, err = s.CreateInbox(ctx, p.ID, "late")
		done <- err
	}()
	<-stalled
	select {
	case err := <-done:
		t.Fatalf("CreateInbox answered %v while its commit was still stalled", err)
	case <-time.After(commitTimeout + time.Second):
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("CreateInbox, once its stalled commit landed: %v", err)
	}
	if _, err := s.Inbox(ctx, p.ID, created.ID); err != nil {
		t.Errorf("the inbox is not there: %v", err)
	}
}
