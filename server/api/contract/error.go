package contract

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Error codes of the envelope. Clients branch on these, never on messages.
const (
	// CodeInvalidParameter: a bad or unknown query parameter or body field;
	// Fields maps each to why.
	CodeInvalidParameter = "invalid_parameter"
	// CodeInvalidCursor: before/after names no capture of the collection
	// (malformed, never existed, pruned); list again without a cursor.
	CodeInvalidCursor = "invalid_cursor"
	// CodeUnauthorized: a missing, malformed, unknown or revoked API key.
	CodeUnauthorized = "unauthorized"
	// CodeNotFound: no such object in the key's project, or no such route.
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeNoTarget: a replay of a request whose endpoint has no saved target.
	CodeNoTarget = "no_target"
	// CodeQuotaExceeded: a plan quota is exceeded (403), or a capture is
	// larger than the plan allows (413, see Error.Status).
	CodeQuotaExceeded = "quota_exceeded"
	// CodeRateLimited: too many calls with this key; Retry-After says when
	// to come back.
	CodeRateLimited = "rate_limited"
	// CodeTooManyWaits: the project already holds its concurrent waits.
	CodeTooManyWaits = "too_many_waits"
	CodeInternal     = "internal"
	// CodeUnavailable: shutting down, or the database cannot commit in time;
	// nothing was acknowledged. Retry-After says when to come back.
	CodeUnavailable = "unavailable"
)

// statuses is the one table of codes and their HTTP statuses: servers read
// it to answer, and every code a client may see is in it.
var statuses = map[string]int{
	CodeInvalidParameter: http.StatusBadRequest,
	CodeInvalidCursor:    http.StatusBadRequest,
	CodeUnauthorized:     http.StatusUnauthorized,
	CodeNotFound:         http.StatusNotFound,
	CodeMethodNotAllowed: http.StatusMethodNotAllowed,
	CodeNoTarget:         http.StatusConflict,
	CodeQuotaExceeded:    http.StatusForbidden,
	CodeRateLimited:      http.StatusTooManyRequests,
	CodeTooManyWaits:     http.StatusTooManyRequests,
	CodeInternal:         http.StatusInternalServerError,
	CodeUnavailable:      http.StatusServiceUnavailable,
}

// StatusOf returns the HTTP status of code; a code outside the table is an
// internal error.
func StatusOf(code string) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Error is an error as the envelope carries it. A server returns one to say
// exactly what the caller did wrong; the Go client returns one for every
// answer that is not 2xx.
type Error struct {
	Code    string
	Message string
	// Fields maps each offending parameter or field to why; never nil on
	// the wire.
	Fields map[string]string
	// RetryAfter is how long to wait before calling again (Retry-After);
	// zero when the answer did not say.
	RetryAfter time.Duration
	// Status is the HTTP status. Zero means the code's own; a server sets
	// it only where SPEC §8 allows another (413 for an oversize capture). A
	// decoded error always has it, and an answer that was not an envelope
	// (a proxy's error page) has it with an empty Code.
	Status int
	// Allow lists the methods the route takes, for method_not_allowed.
	Allow []string
}

// HTTPStatus is the status the error is, or is answered with.
func (e *Error) HTTPStatus() int {
	if e.Status != 0 {
		return e.Status
	}
	return StatusOf(e.Code)
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(e.HTTPStatus()))
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// Errorf returns an error with code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns the invalid_parameter error for fields (name → why); its
// message names them all, so that a reader of the message alone can fix
// every one at once.
func Invalid(fields map[string]string) *Error {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names)
	// fields has them all; the message names the first few, so that a
	// request of thousands of bad parameters is not answered at twice its
	// size.
	shown := names[:min(len(names), maxNamedInMessage)]
	parts := make([]string, len(shown), len(shown)+1)
	for i, name := range shown {
		parts[i] = name + ": " + fields[name]
	}
	if more := len(names) - len(shown); more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more in fields", more))
	}
	msg := "invalid parameter"
	if len(names) > 1 {
		msg += "s"
	}
	return &Error{Code: CodeInvalidParameter, Message: msg + " (" + strings.Join(parts, "; ") + ")", Fields: fields}
}

// maxNamedInMessage is how many bad parameters Invalid's message names.
const maxNamedInMessage = 10

// IsCode reports whether err is, or wraps, an *Error with code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// NoRoute is the not_found answer to a request no route takes. The usual
// slips (a trailing or doubled slash) are named, since the route the caller
// meant exists.
func NoRoute(r *http.Request) *Error {
	p := r.URL.Path
	hint := "the routes are listed in " + Prefix + "/schema/"
	switch {
	case strings.Contains(p, "//"):
		hint = "the path has a doubled slash"
	case len(p) > 1 && strings.HasSuffix(p, "/") && p != Prefix+"/schema/":
		hint = "routes have no trailing slash"
	case HasEncodedSlash(r):
		p = r.URL.EscapedPath()
		hint = "a path segment holds an escaped slash (%2F), and no id holds a slash"
	}
	return Errorf(CodeNotFound, "no route %s %s: %s", r.Method, p, hint)
}

// HasEncodedSlash reports whether the request's path escapes a slash
// within a segment. Routers match the decoded path, where "msg_x%2Fraw"
// would be read as the id msg_x followed by /raw: another route.
func HasEncodedSlash(r *http.Request) bool {
	raw := r.URL.RawPath
	return raw != "" && (strings.Contains(raw, "%2F") || strings.Contains(raw, "%2f"))
}

// MethodNotAllowed is the method_not_allowed answer to a request whose path
// is a route that does not take its method; allow lists the ones it does.
func MethodNotAllowed(r *http.Request, allow []string) *Error {
	e := Errorf(CodeMethodNotAllowed, "%s does not take %s (allowed: %s)", r.URL.Path, r.Method, strings.Join(allow, ", "))
	e.Allow = allow
	return e
}
