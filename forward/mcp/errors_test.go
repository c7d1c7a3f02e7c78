package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/server/api/contract"
)

// Every error a tool can meet reads as the code, what happened, and what
// to do; the end-to-end tests cannot provoke all of them.
func TestExplain(t *testing.T) {
	apiErr := func(status int, code, msg string, retry time.Duration) error {
		return fmt.Errorf("GET /x: %w", &contract.Error{Status: status, Code: code, Message: msg, RetryAfter: retry,
			Fields: map[string]string{}})
	}
	tests := []struct {
		name string
		err  error
		want []string
	}{
		{"not found", apiErr(404, "not_found", "no message \"msg_x\"", 0),
			[]string{"not_found (HTTP 404): no message \"msg_x\"", "another project", "list_messages"}},
		{"invalid cursor", apiErr(400, "invalid_cursor", "invalid cursor", 0),
			[]string{"invalid_cursor (HTTP 400)", "without before and after"}},
		{"too many waits", apiErr(429, "too_many_waits", "too many waits", time.Second),
			[]string{"too_many_waits (HTTP 429)", "Retry in 1 s", "without wait"}},
		{"rate limited", apiErr(429, "rate_limited", "slow down", 1500*time.Millisecond),
			[]string{"rate_limited (HTTP 429): slow down", "Retry in 2 s"}},
		{"invalid parameter", &contract.Error{Status: 400, Code: "invalid_parameter", Message: "invalid parameter (limit: 1 to 100)",
			Fields: map[string]string{"limit": "1 to 100", "wait": "0 to 30"}},
			[]string{"invalid_parameter (HTTP 400): invalid parameter (limit: 1 to 100); wait: 0 to 30", "fix the parameters"}},
		{"local invalid parameter", invalidParameter("since", "want RFC 3339"),
			[]string{"invalid_parameter (HTTP 400): invalid parameter (since: want RFC 3339)."}},
		{"no target", apiErr(409, "no_target", "endpoint has no target", 0), []string{"no_target (HTTP 409)", "--target"}},
		{"unauthorized", apiErr(401, "unauthorized", "revoked key", 0), []string{"unauthorized (HTTP 401)", "valid key"}},
		{"quota", apiErr(403, "quota_exceeded", "full", 0), []string{"quota_exceeded (HTTP 403)"}},
		{"unavailable", apiErr(503, "unavailable", "the server is shutting down; nothing was changed, retry after 1 s", time.Second),
			[]string{"unavailable (HTTP 503): the server is shutting down", "Retry in 1 s", "capture serve"}},
		{"internal", apiErr(500, "internal", "internal error", 0), []string{"internal (HTTP 500)", "retrying may help"}},
		{"proxy page", &contract.Error{Status: 502, Message: "Bad Gateway"}, []string{"http_error (HTTP 502): Bad Gateway"}},
		{"unreachable", &apiclient.UnreachableError{URL: "http://127.0.0.1:1/api/v1", Err: errors.New("connection refused")},
			[]string{"unreachable: cannot reach the API at http://127.0.0.1:1/api/v1: connection refused", "capture serve"}},
		{"cancelled", context.Canceled, []string{"cancelled"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := explain(tt.err)
			if !errors.Is(got, tt.err) && !errors.Is(got, errors.Unwrap(tt.err)) {
				t.Errorf("explain(%v) lost the cause", tt.err)
			}
			for _, w := range tt.want {
				if !strings.Contains(got.Error(), w) {
					t.Errorf("explain(%v) = %q, want %q in it", tt.err, got, w)
				}
			}
			if explain(got) != got {
				t.Error("explaining twice changed the text")
			}
		})
	}
}

func TestCut(t *testing.T) {
	long := strings.Repeat("é", maxBody) // two bytes each: the cut falls inside one
	s := long
	if !cutText(&s) || len(s) > maxBody || !strings.HasPrefix(long, s) || len(s) < maxBody-1 {
		t.Errorf("cutText: %d bytes", len(s))
	}
	short := "short"
	if cutText(&short) || short != "short" || cutText(nil) {
		t.Error("cutText changed a short body")
	}
	b64 := strings.Repeat("QUJD", maxBody)
	if !cutBase64(&b64) || len(b64)%4 != 0 || len(b64) > maxBody {
		t.Errorf("cutBase64: %d bytes", len(b64))
	}
}

func TestHeaderValues(t *testing.T) {
	for _, tt := range []struct {
		in   any
		want []string
		ok   bool
	}{
		{nil, nil, true},
		{"v", []string{"v"}, true},
		{[]any{"a", "b"}, []string{"a", "b"}, true},
		{[]any{}, []string{}, true},
		{[]any{"a", 1.0}, nil, false},
		{3.0, nil, false},
	} {
		got, ok := headerEdit(tt.in)
		if ok != tt.ok || ok && (fmt.Sprint(got.Values) != fmt.Sprint(tt.want) || got.Remove != (tt.want == nil)) {
			t.Errorf("headerEdit(%#v) = %#v, %v", tt.in, got, ok)
		}
	}
}
