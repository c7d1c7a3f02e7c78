package emailapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/store"
)

// kind classifies what went wrong; each provider maps kinds to its own
// statuses and error bodies in one place (its fail function).
type kind int

const (
	// noCredential: the request carries no credential at all.
	noCredential kind = iota
	// badCredential: a credential that names no inbox or does not verify.
	badCredential
	// malformed: the body cannot be read as the route's format.
	malformed
	// missing: a required field is absent or empty.
	missing
	// invalid: a field is present but wrong.
	invalid
	// mistyped: valid JSON whose shape is not the route's (a string where
	// an array belongs). Most providers answer it as an invalid field.
	mistyped
	// tooMany: a batch or recipient list over the provider's count limit.
	tooMany
	// tooLarge: the body or a message over the inbox's plan limit.
	tooLarge
	// unavailable: shutting down, or the store could not commit.
	unavailable
)

// retryAfter is what an unavailable answer asks clients to wait, seconds.
const retryAfter = "5"

// apiError is a refusal. Field names the request field at fault in the
// provider's own spelling; code, when set, is the provider's own error
// code for the case (an AWS error type, a Postmark number, a Resend name).
type apiError struct {
	kind  kind
	field string
	msg   string
	code  string
}

func (e *apiError) Error() string { return e.msg }

// readAPICode is the read API's error code for the refusal, which metrics
// count refusals by across SMTP, webhooks and the providers' routes.
func (e *apiError) readAPICode() string {
	switch e.kind {
	case noCredential, badCredential:
		return contract.CodeUnauthorized
	case tooLarge:
		return contract.CodeQuotaExceeded
	case unavailable:
		return contract.CodeUnavailable
	}
	return contract.CodeInvalidParameter
}

func errMissing(field, msg string) *apiError { return &apiError{kind: missing, field: field, msg: msg} }

func errInvalid(field, format string, args ...any) *apiError {
	return &apiError{kind: invalid, field: field, msg: fmt.Sprintf(format, args...)}
}

func errTooLarge(limit int64, plan string) *apiError {
	return &apiError{kind: tooLarge, msg: fmt.Sprintf("message exceeds the %d-byte limit of the %s plan", limit, plan)}
}

var errUnavailable = &apiError{kind: unavailable, msg: "capture cannot store messages right now (shutting down or the database is busy); try again"}

// errNotStored is the refusal of messages the store did not commit, with
// the reason when there is one to tell.
func errNotStored(err error) *apiError {
	if errors.Is(err, store.ErrDiskFull) {
		return &apiError{kind: unavailable, msg: "capture cannot store messages right now (the disk is full); try again once there is room"}
	}
	if why := store.Why(err); why != "" {
		return &apiError{kind: unavailable, msg: "capture cannot store messages right now (" + why + "); try again"}
	}
	return errUnavailable
}

// jsonError turns an encoding/json error into a refusal naming the field
// where the JSON's shape was wrong.
func jsonError(err error) *apiError {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		if field == "" {
			field = "body"
		}
		return &apiError{kind: mistyped, field: field,
			msg: fmt.Sprintf("%s: expected %s, got a JSON %s", field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)}
	}
	var apiErr *apiError
	if errors.As(err, &apiErr) {
		return apiErr
	}
	return &apiError{kind: malformed, msg: "the body is not valid JSON: " + strings.TrimPrefix(err.Error(), "json: ")}
}

func jsonKind(k string) string {
	switch k {
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "ptr", "interface":
		return "a value"
	}
	return "a number"
}

// writeJSON sends v with status. Like the providers' own answers, it
// writes < > & as they are: a Mailgun id "<…@domain>" reads as itself to
// a person with curl or grep, not as \u003c…\u003e.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	b := []byte(`{}`)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
	} else {
		b = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	if status == http.StatusServiceUnavailable {
		h.Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	w.Write(b)
}
