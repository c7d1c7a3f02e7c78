package capture

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/capturedev/capture/server/servertest/logbuffer"
	"github.com/capturedev/capture/store"
)

// fullDiskStore is a real store whose writes find the disk full while full
// is set.
type fullDiskStore struct {
	*store.Store
	full *atomic.Bool
}

func (f fullDiskStore) InsertRequest(ctx context.Context, r *store.NewRequest) (string, error) {
	if f.full.Load() {
		return "", fmt.Errorf("%w: %w: database or disk is full", store.ErrUnavailable, store.ErrDiskFull)
	}
	return f.Store.InsertRequest(ctx, r)
}

// While the disk is full every webhook is refused, but the log says so
// once, not once a webhook; when captures are taken again it says that,
// with how many were refused meanwhile.
func TestFullDiskIsLoggedOnce(t *testing.T) {
	base := newEnv(t, nil)
	var logs logbuffer.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil)) // INFO: what serve logs by default
	full := &atomic.Bool{}
	full.Store(true)
	e := startEnv(t, base.st, fullDiskStore{base.st, full}, base.project, base.endpoint, func(h *Handler, _ *http.Server) {
		h.log, h.outage = log, webhookOutage(log)
	})
	const refused = 25
	for range refused {
		resp, body := e.do(e.newRequest("POST", e.base, strings.NewReader("x")))
		checkError(t, resp, body, http.StatusServiceUnavailable, "unavailable")
	}
	full.Store(false)
	e.captured(e.do(e.newRequest("POST", e.base, strings.NewReader("x"))))
	e.captured(e.do(e.newRequest("POST", e.base, strings.NewReader("x"))))

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], `why="the disk is full"`) ||
		!strings.Contains(lines[1], "level=INFO") || !strings.Contains(lines[1], "taken again") ||
		!strings.Contains(lines[1], fmt.Sprintf("refused=%d", refused)) {
		t.Errorf("%d webhooks refused on a full disk, then two taken, logged:\n%s\nwant one ERROR naming the full disk "+
			"and one INFO saying captures are taken again after %d refused", refused, logs.String(), refused)
	}
}

// A sender that half-closes its connection mid-body is told the body was
// incomplete, as a short chunked body is, not that the server is stopping:
// its connection's end also ends the request's context.
func TestHalfClosedBodyIsIncomplete(t *testing.T) {
	e := newEnv(t, nil)
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /%s HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000\r\n\r\n%s", e.endpoint.ID, e.addr, strings.Repeat("x", 500))
	c.(*net.TCPConn).CloseWrite()
	answer, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	head, body, _ := strings.Cut(string(answer), "\r\n\r\n")
	if !strings.HasPrefix(head, "HTTP/1.1 400 ") || !strings.Contains(body, "incomplete request body") {
		t.Errorf("a body half-closed at 500 of 1000 bytes was answered:\n%s", answer)
	}
	if n := e.stored(); n != 0 {
		t.Errorf("%d stored", n)
	}
}
