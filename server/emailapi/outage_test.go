package emailapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/capturedev/capture/server/emailapi"
	"github.com/capturedev/capture/server/servertest"
	"github.com/capturedev/capture/server/servertest/logbuffer"
	"github.com/capturedev/capture/store"
)

// fullDiskStore is a real store whose writes find the disk full while full
// is set.
type fullDiskStore struct {
	*store.Store
	full *atomic.Bool
}

func (f fullDiskStore) InsertMessages(ctx context.Context, ms []*store.NewMessage) ([]string, error) {
	if f.full.Load() {
		return nil, fmt.Errorf("%w: %w: database or disk is full", store.ErrUnavailable, store.ErrDiskFull)
	}
	return f.Store.InsertMessages(ctx, ms)
}

// While the disk is full every send is refused, but the log says so once,
// not once a send; when messages are stored again it says that, with how
// many were refused meanwhile.
func TestFullDiskIsLoggedOnce(t *testing.T) {
	st, boot := servertest.Open(t, "free")
	var logs logbuffer.Buffer
	full := &atomic.Bool{}
	full.Store(true)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := emailapi.NewServer(emailapi.New(fullDiskStore{st, full},
		emailapi.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})) // INFO: what serve logs by default
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	e := &env{t: t, st: st, boot: boot, base: "http://" + l.Addr().String()}
	send := `{"From": "app@example.com", "To": "alice@example.com", "Subject": "s", "TextBody": "t"}`
	const refused = 10
	for range refused {
		if r := e.postmark("/email", send); r.status != 503 {
			t.Fatalf("a send on a full disk: %d %s", r.status, r.body)
		}
	}
	full.Store(false)
	for range 2 {
		if r := e.postmark("/email", send); r.status != 200 {
			t.Fatalf("a send with room again: %d %s", r.status, r.body)
		}
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], `why="the disk is full"`) ||
		!strings.Contains(lines[1], "level=INFO") || !strings.Contains(lines[1], fmt.Sprintf("refused=%d", refused)) {
		t.Errorf("%d sends refused on a full disk, then two stored, logged:\n%s\nwant one ERROR naming the full disk "+
			"and one INFO saying messages are taken again after %d refused", refused, logs.String(), refused)
	}
}

// A sender that half-closes its connection mid-body is told the body
// ended early, not that capture is shutting down or busy: its
// connection's end also ends the request's context.
func TestHalfClosedBodyIsIncomplete(t *testing.T) {
	e := newEnv(t)
	addr := strings.TrimPrefix(e.base, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /email HTTP/1.1\r\nHost: %s\r\nX-Postmark-Server-Token: %s\r\nContent-Type: application/json\r\n"+
		"Content-Length: 1000\r\n\r\n%s", addr, e.password(), strings.Repeat(" ", 500))
	c.(*net.TCPConn).CloseWrite()
	answer, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	head, body, _ := strings.Cut(string(answer), "\r\n\r\n")
	if strings.HasPrefix(head, "HTTP/1.1 503 ") || !strings.Contains(body, "ended before its declared length") {
		t.Errorf("a body half-closed at 500 of 1000 bytes was answered:\n%s", answer)
	}
	if n := len(e.messages()); n != 0 {
		t.Errorf("%d messages stored", n)
	}
}
