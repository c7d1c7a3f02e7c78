package smtp

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	gosmtp "github.com/emersion/go-smtp"

	"github.com/capturedev/capture/server/servertest/logbuffer"
	"github.com/capturedev/capture/store"
)

// fullDiskStore is a real store whose writes find the disk full while full
// is set.
type fullDiskStore struct {
	*store.Store
	full *atomic.Bool
}

func (f fullDiskStore) InsertMessage(ctx context.Context, m *store.NewMessage) (string, error) {
	if f.full.Load() {
		return "", fmt.Errorf("%w: %w: database or disk is full", store.ErrUnavailable, store.ErrDiskFull)
	}
	return f.Store.InsertMessage(ctx, m)
}

// While the disk is full every message is refused (452 4.3.1) and counted
// as unavailable, but the log says so once, not once a message; when
// messages are stored again it says that, with how many were refused.
func TestFullDiskIsLoggedOnceAndCounted(t *testing.T) {
	var logs logbuffer.Buffer
	var mu sync.Mutex
	heard := map[string]int{}
	full := &atomic.Bool{}
	full.Store(true)
	e := newEnvOver(t, "team", Config{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), // INFO: what serve logs by default
		Refused: func(code string) {
			mu.Lock()
			defer mu.Unlock()
			heard[code]++
		},
	}, func(st *store.Store) Store { return fullDiskStore{st, full} })
	const refused = 12
	r := e.session(t)
	for range refused {
		r.must(250, "", "MAIL FROM:<a@example.com>")
		r.must(250, "", "RCPT TO:<b@example.com>")
		if code, msg := r.data(crlf("Subject: no room\n\nbody\n")); code != 452 || !strings.HasPrefix(msg, "4.3.1 ") {
			t.Fatalf("DATA on a full disk: %d %q", code, msg)
		}
	}
	full.Store(false)
	for range 2 {
		r.must(250, "", "MAIL FROM:<a@example.com>")
		r.must(250, "", "RCPT TO:<b@example.com>")
		messageID(t)(r.data(crlf("Subject: room\n\nbody\n")))
	}
	e.shutdown(t)

	mu.Lock()
	if heard["unavailable"] != refused {
		t.Errorf("%d messages refused with 452 were counted as %v, want unavailable: %d", refused, heard, refused)
	}
	mu.Unlock()
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(l, "refused") || strings.Contains(l, "taken again") || strings.Contains(l, "level=ERROR") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 || !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], `why="the disk is full"`) ||
		!strings.Contains(lines[1], "level=INFO") || !strings.Contains(lines[1], fmt.Sprintf("refused=%d", refused)) {
		t.Errorf("%d messages refused on a full disk, then two stored, logged:\n%s\nwant one ERROR naming the full disk "+
			"and one INFO saying messages are taken again after %d refused", refused, logs.String(), refused)
	}
}

// Every temporary refusal of a message counts as unavailable: the busy
// server's 451, the full disk's 452, the stopping server's 421.
func TestTemporaryRefusalsCountAsUnavailable(t *testing.T) {
	var heard []string
	srv := &Server{cfg: Config{Refused: func(code string) { heard = append(heard, code) }}}
	for _, err := range []error{errBusy, errDiskFull, &gosmtp.SMTPError{Code: 421, EnhancedCode: gosmtp.EnhancedCode{4, 3, 2}}} {
		heard = nil
		srv.countRefusal(err)
		if len(heard) != 1 || heard[0] != "unavailable" {
			t.Errorf("%v counted as %v, want unavailable", err, heard)
		}
	}
}
