package contract

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Prefix is where the read API is mounted on the --http listener.
const Prefix = "/api/v1"

// envelope is every error answer's body.
type envelope struct {
	Error *envelopeError `json:"error"`
}

type envelopeError struct {
	Code    string            `json:"code"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields"`
}

// WriteError answers with e's envelope and status, WWW-Authenticate on a
// 401 and Retry-After (whole seconds, rounded up) when e asks for a wait.
func WriteError(w http.ResponseWriter, e *Error) {
	body := EnvelopeOf(e)

	h := w.Header()
	status := e.HTTPStatus()
	if status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", "Bearer")
	}
	if len(e.Allow) > 0 {
		h.Set("Allow", strings.Join(e.Allow, ", "))
	}
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64((e.RetryAfter+time.Second-1)/time.Second), 10))
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// EnvelopeOf is the body of e's answer: its envelope, a line of JSON.
func EnvelopeOf(e *Error) []byte {
	fields := e.Fields
	if fields == nil {
		fields = map[string]string{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(envelope{&envelopeError{Code: e.Code, Message: e.Message, Fields: fields}})
	return buf.Bytes()
}

// DecodeError reads an error answer: its envelope, or for a body that is
// not one (something between the client and the API answered), the status
// with an empty Code and the start of the body as the message.
func DecodeError(status int, header http.Header, body []byte) *Error {
	e := &Error{Status: status, RetryAfter: ParseRetryAfter(header.Get("Retry-After"), time.Now())}
	var env envelope
	if json.Unmarshal(body, &env) == nil && env.Error != nil && env.Error.Code != "" {
		e.Code, e.Message, e.Fields = env.Error.Code, env.Error.Message, env.Error.Fields
	} else {
		e.Message = http.StatusText(status)
		if s := strings.TrimSpace(string(body)); s != "" && len(s) <= 200 {
			e.Message += ": " + s
		}
	}
	if e.Fields == nil {
		e.Fields = map[string]string{}
	}
	return e
}

// ParseRetryAfter reads Retry-After as seconds or as an HTTP date; zero
// when it is absent or unusable.
func ParseRetryAfter(v string, now time.Time) time.Duration {
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

// BearerToken returns the token of an `Authorization: Bearer <token>`
// header: one word, the scheme matched case-insensitively.
func BearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || strings.ContainsAny(token, " \t") {
		return "", false
	}
	return token, true
}

// The cookies of the web interface's sign-in. A browser sends a host's
// cookies to every port of it, so a capture URL on the same host as the web
// interface receives them too: the capture listener drops them, since they
// are credentials to every project and a capture is readable with one
// project's key.
const (
	SessionCookie = "capture_session"
	LoginCookie   = "capture_login"
	FlashCookie   = "capture_flash"
)

// IsWebCookie reports whether name is one of the web interface's cookies.
func IsWebCookie(name string) bool {
	return name == SessionCookie || name == LoginCookie || name == FlashCookie
}
