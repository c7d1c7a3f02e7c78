package bodyread_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/capturedev/capture/server/admission"
	"github.com/capturedev/capture/server/bodyread"
)

// A body declared over the limit is refused as too large at once, even
// while the budget has no room: it never waits for room it would not use,
// nor is it refused as busy.
func TestDeclaredOverLimitIsRefusedBeforeWaitingForRoom(t *testing.T) {
	const limit = 1 << 10
	budget := admission.New(64 << 10)
	full, err := budget.Reserve(context.Background(), 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Release()

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// No room will come: the wait is over before it starts.
		ctx, cancel := context.WithCancelCause(r.Context())
		cancel(admission.ErrBusy)
		_, res, _, err := bodyread.Read(ctx, w, r, budget, limit, 1)
		res.Release()
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			w.WriteHeader(http.StatusRequestEntityTooLarge)
		case errors.Is(err, admission.ErrBusy):
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			http.Error(w, "read: "+errString(err), http.StatusInternalServerError)
		}
	}))
	defer srv.Close()

	resp, err := http.Post(srv.URL, "text/plain", strings.NewReader(strings.Repeat("x", limit+1)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want %d", resp.StatusCode, http.StatusRequestEntityTooLarge)
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
