package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/capturedev/capture/store"
)

// Error is an API error as the envelope shows it.
type Error struct {
	Status     int
	Code       string
	Message    string
	Fields     map[string]string
	RetryAfter int // seconds; sets Retry-After when > 0
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

var errInternal = &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error"}

func errUnauthorized(msg string) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: "unauthorized", Message: msg}
}

func errNotFound(msg string) *Error {
	return &Error{Status: http.StatusNotFound, Code: "not_found", Message: msg}
}

func errInvalid(fields map[string]string) *Error {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	msg := "invalid parameter"
	if len(names) > 1 {
		msg += "s"
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + ": " + fields[n]
	}
	return &Error{Status: http.StatusBadRequest, Code: "invalid_parameter",
		Message: msg + " (" + strings.Join(parts, "; ") + ")", Fields: fields}
}

func writeError(w http.ResponseWriter, e *Error) {
	fields := e.Fields
	if fields == nil {
		fields = map[string]string{}
	}
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="capture"`)
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	writeJSON(w, e.Status, map[string]any{
		"error": map[string]any{"code": e.Code, "message": e.Message, "fields": fields},
	})
}

// fail maps an error from below to its reply; this is the one place where
// store errors meet HTTP statuses.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	var apiErr *Error
	switch {
	case errors.As(err, &apiErr):
		writeError(w, apiErr)
	case errors.Is(err, store.ErrNotFound):
		writeError(w, errNotFound(detail(err, store.ErrNotFound)))
	case errors.Is(err, store.ErrInvalidCursor):
		writeError(w, &Error{Status: http.StatusBadRequest, Code: "invalid_cursor",
			Message: "invalid cursor: " + detail(err, store.ErrInvalidCursor) + "; list again without a cursor to get a new baseline"})
	case errors.Is(err, store.ErrQuotaExceeded):
		writeError(w, &Error{Status: http.StatusForbidden, Code: "quota_exceeded", Message: detail(err, store.ErrQuotaExceeded)})
	case errors.Is(err, store.ErrInvalid):
		writeError(w, &Error{Status: http.StatusBadRequest, Code: "invalid_parameter", Message: detail(err, store.ErrInvalid)})
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the reply.
	default:
		a.log.Error("API request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, errInternal)
	}
}

// detail strips the sentinel's own text from a wrapped error message.
func detail(err, sentinel error) string {
	msg := strings.TrimPrefix(err.Error(), sentinel.Error()+": ")
	return msg
}
