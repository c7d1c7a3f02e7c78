package apiclient

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/capturedev/capture/server/api/contract"
)

// ErrUnreachable matches, with errors.Is, every error that means no answer
// came from the API at all: refused, no such host, timed out, cut off.
var ErrUnreachable = errors.New("API unreachable")

// UnreachableError says the API at URL did not answer.
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return "cannot reach the API at " + e.URL + ": " + e.Err.Error()
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnreachable) hold.
func (e *UnreachableError) Is(target error) bool { return target == ErrUnreachable }

// The retry policy of every client of the API: an answer that asks to come
// back later (429: rate_limited, too_many_waits; 503: unavailable) is
// retried after its Retry-After, never sooner; anything else that a caller
// chooses to retry backs off exponentially.

// RetryAfter reports whether err is an answer that asks the caller to come
// back later, and after how long. Without a usable Retry-After it is one
// second.
func RetryAfter(err error) (time.Duration, bool) {
	var e *contract.Error
	if !errors.As(err, &e) {
		return 0, false
	}
	if s := e.HTTPStatus(); s != http.StatusTooManyRequests && s != http.StatusServiceUnavailable {
		return 0, false
	}
	if e.RetryAfter <= 0 {
		return time.Second, true
	}
	return e.RetryAfter, true
}

// Retry runs call until its answer is not one that asks to come back later
// (RetryAfter), waiting as asked in between, or until ctx ends. onWait, if
// not nil, hears of each wait before it starts. The API refuses such a call
// before doing anything, so repeating it is safe.
func Retry[T any](ctx context.Context, call func() (T, error), onWait func(wait time.Duration, err error)) (T, error) {
	for {
		v, err := call()
		wait, later := RetryAfter(err)
		if !later {
			return v, err
		}
		if onWait != nil {
			onWait(wait, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, ctx.Err()
		case <-t.C:
		}
	}
}

// Backoff is how long to wait before the attempt-th retry (1 for the first)
// of a call that failed with err: what the API asked for (RetryAfter), else
// base doubled for each earlier attempt, at most limit.
func Backoff(err error, attempt int, base, limit time.Duration) time.Duration {
	if d, ok := RetryAfter(err); ok {
		return d
	}
	d := base
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}
