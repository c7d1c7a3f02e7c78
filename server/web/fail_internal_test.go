package web

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/capturedev/capture/store"
)

// A database that cannot take a write (a full disk, a lock held past the
// timeout) is the server's condition to wait out, not an internal error:
// 503 with Retry-After and words that say what happened, as the API and
// the listeners say.
func TestUnavailableIsServiceUnavailable(t *testing.T) {
	h := &Handler{log: slog.New(slog.DiscardHandler)}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: %w: sqlite: database or disk is full", store.ErrUnavailable, store.ErrDiskFull), "disk capture stores its data on is full"},
		{fmt.Errorf("%w: nothing committed within 5s", store.ErrUnavailable), "The database cannot take writes now. Nothing was changed"},
		{store.ErrClosed, "The server is stopping. Nothing was changed"},
	} {
		rec := httptest.NewRecorder()
		h.fail(rec, httptest.NewRequest("POST", "/projects/p/endpoints", nil), tt.err)
		body := rec.Body.String()
		if rec.Code != 503 || rec.Header().Get("Retry-After") != "1" || !strings.Contains(body, `"unavailable"`) || !strings.Contains(body, tt.want) {
			t.Errorf("%v: %d %v %s, want 503 unavailable saying %q", tt.err, rec.Code, rec.Header(), body, tt.want)
		}
	}
	rec := httptest.NewRecorder()
	h.fail(rec, httptest.NewRequest("GET", "/", nil), errors.New("something else"))
	if rec.Code != 500 {
		t.Errorf("any other error: %d, want 500", rec.Code)
	}
}
