package apiclient

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// APIError is an error answer of the API: its envelope, or for a reply
// that is not one (a proxy's error page), the status alone.
type APIError struct {
	Status  int
	Code    string
	Message string
	Fields  map[string]string
	// RetryAfter is the wait the API asked for with Retry-After (429).
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(e.Status))
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// Error codes of the API that callers act on.
const (
	CodeInvalidParameter = "invalid_parameter"
	CodeInvalidCursor    = "invalid_cursor"
	CodeUnauthorized     = "unauthorized"
	CodeNotFound         = "not_found"
	CodeNoTarget         = "no_target"
	CodeQuotaExceeded    = "quota_exceeded"
	CodeRateLimited      = "rate_limited"
	CodeTooManyWaits     = "too_many_waits"
	CodeInternal         = "internal"
)

// IsCode reports whether err is an API error with the given code.
func IsCode(err error, code string) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == code
}

// RetryAfter reports whether err asks the caller to come back later (429),
// and after how long. A 429 without a usable Retry-After means one second.
func RetryAfter(err error) (time.Duration, bool) {
	var e *APIError
	if !errors.As(err, &e) || e.Status != http.StatusTooManyRequests {
		return 0, false
	}
	if e.RetryAfter <= 0 {
		return time.Second, true
	}
	return e.RetryAfter, true
}

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

// parseRetryAfter reads Retry-After as seconds or as an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
