package apiclient_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/server/api/contract"
)

func TestBackoff(t *testing.T) {
	base, limit := 250*time.Millisecond, 5*time.Second
	refused := &apiclient.UnreachableError{URL: "x", Err: errors.New("refused")}
	for attempt, want := range map[int]time.Duration{1: 250 * time.Millisecond, 2: 500 * time.Millisecond,
		3: time.Second, 5: 4 * time.Second, 6: 5 * time.Second, 20: 5 * time.Second} {
		if got := apiclient.Backoff(refused, attempt, base, limit); got != want {
			t.Errorf("attempt %d: %s, want %s", attempt, got, want)
		}
	}
	for _, e := range []*contract.Error{
		{Status: http.StatusTooManyRequests, Code: contract.CodeRateLimited, RetryAfter: 3 * time.Second},
		{Status: http.StatusServiceUnavailable, Code: contract.CodeUnavailable, RetryAfter: 3 * time.Second},
	} {
		if got := apiclient.Backoff(e, 1, base, limit); got != 3*time.Second {
			t.Errorf("%s should wait its Retry-After: %s", e.Code, got)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want time.Duration
		ok   bool
	}{
		{"429 with Retry-After", &contract.Error{Status: 429, Code: contract.CodeTooManyWaits, RetryAfter: 2 * time.Second}, 2 * time.Second, true},
		{"429 without", &contract.Error{Status: 429, Code: contract.CodeRateLimited}, time.Second, true},
		{"503", &contract.Error{Status: 503, Code: contract.CodeUnavailable, RetryAfter: 5 * time.Second}, 5 * time.Second, true},
		{"404", &contract.Error{Status: 404, Code: contract.CodeNotFound}, 0, false},
		{"unreachable", &apiclient.UnreachableError{URL: "x", Err: errors.New("refused")}, 0, false},
		{"nil", nil, 0, false},
	}
	for _, tt := range tests {
		if got, ok := apiclient.RetryAfter(tt.err); got != tt.want || ok != tt.ok {
			t.Errorf("%s: RetryAfter = %s, %v; want %s, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// Retry repeats a call the API turned away until it goes through, and
// gives up at once on any other error or when the context ends.
func TestRetry(t *testing.T) {
	busy := &contract.Error{Status: 503, Code: contract.CodeUnavailable, RetryAfter: time.Millisecond}
	calls, waits := 0, 0
	got, err := apiclient.Retry(t.Context(), func() (int, error) {
		calls++
		if calls < 3 {
			return 0, busy
		}
		return 42, nil
	}, func(d time.Duration, err error) {
		waits++
		if d != time.Millisecond || !contract.IsCode(err, contract.CodeUnavailable) {
			t.Errorf("onWait(%s, %v)", d, err)
		}
	})
	if got != 42 || err != nil || calls != 3 || waits != 2 {
		t.Errorf("Retry = %d, %v after %d calls and %d waits", got, err, calls, waits)
	}

	notFound := &contract.Error{Status: 404, Code: contract.CodeNotFound}
	calls = 0
	if _, err := apiclient.Retry(t.Context(), func() (int, error) { calls++; return 0, notFound }, nil); err != notFound || calls != 1 {
		t.Errorf("Retry(not_found) = %v after %d calls", err, calls)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	slow := &contract.Error{Status: 429, Code: contract.CodeRateLimited, RetryAfter: time.Hour}
	if _, err := apiclient.Retry(ctx, func() (int, error) { return 0, slow }, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Retry after cancel = %v", err)
	}
}
