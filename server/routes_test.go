package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/forward/mcp"
	"github.com/capturedev/capture/server"
	"github.com/capturedev/capture/server/openapi/openapitest"
	"github.com/capturedev/capture/server/servertest"
)

// envelope is the API's error body.
type envelope struct {
	Error *struct {
		Code    string            `json:"code"`
		Message string            `json:"message"`
		Fields  map[string]string `json:"fields"`
	} `json:"error"`
}

// Every request the --http listener has no route for is answered in the
// error envelope: no HTML redirect, no plain text (SPEC §8).
func TestEveryRouteErrorIsAnEnvelope(t *testing.T) {
	st, boot := servertest.Open(t, "team")
	cfg := config(t)
	cfg.MCP = func(apiBase string, stopping <-chan struct{}) http.Handler {
		return mcp.HTTPHandler(apiBase, "test", stopping)
	}
	srv, err := server.Listen(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() { cancel(); <-done }()

	v, err := openapitest.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	// check validates an exchange on a path the OpenAPI document has
	// against it.
	documented := map[string]bool{"/api/v1/me": true, "/api/v1/requests/req_x": true, "/api/v1/requests/req_x/replay": true,
		"/api/v1/messages/msg_nope": true, "/api/v1/schema/": true, "/api/v1/inboxes/" + boot.Inbox.ID + "/messages": true}
	check := func(req *http.Request, resp *http.Response, body []byte) {
		t.Helper()
		if !documented[req.URL.Path] {
			return
		}
		if err := v.Check(req, resp.StatusCode, resp.Header, body); err != nil {
			t.Error(err)
		}
	}
	base := strings.TrimSuffix(srv.APIBase(), "/api/v1")
	// A client that follows no redirect, so that one shows as it is.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tests := []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"GET", "/api/v1/me/", 404, "not_found", ""},
		{"GET", "//api/v1/me", 404, "not_found", ""},
		{"GET", "/api/v1//me", 404, "not_found", ""},
		{"GET", "/api/v1/./me", 404, "not_found", ""},
		{"GET", "/api/v1/inboxes/../me", 404, "not_found", ""},
		{"GET", "/api/v1", 404, "not_found", ""},
		{"GET", "/api/v1/", 404, "not_found", ""},
		{"GET", "/api/v1/schema", 404, "not_found", ""},
		{"GET", "/api/v1/ME", 404, "not_found", ""},
		{"GET", "/nope", 404, "not_found", ""},
		{"GET", "/downloads/", 404, "not_found", ""},
		{"GET", "/downloads", 404, "not_found", ""},
		{"GET", "/mcp/", 404, "not_found", ""},
		{"PUT", "/api/v1/me", 405, "method_not_allowed", "GET"},
		{"OPTIONS", "/api/v1/me", 405, "method_not_allowed", "GET"},
		{"PATCH", "/api/v1/requests/req_x", 405, "method_not_allowed", "DELETE, GET"},
		{"GET", "/api/v1/requests/req_x/replay", 405, "method_not_allowed", "POST"},
		{"POST", "/downloads/tool.py", 405, "method_not_allowed", "GET, HEAD"},
		{"DELETE", "/", 405, "method_not_allowed", "GET, HEAD"},
		{"PUT", "/mcp", 405, "method_not_allowed", "GET, POST, DELETE"},
		{"GET", "/api/v1/messages/msg_nope", 404, "not_found", ""},
	}
	// send makes one exchange, checked against the document where it has
	// the path.
	send := func(method, path, key string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		check(req, resp, b)
		return resp, b
	}
	for _, tt := range tests {
		resp, b := send(tt.method, tt.path, boot.Secret)
		var env envelope
		if resp.StatusCode != tt.status || resp.Header.Get("Content-Type") != "application/json" ||
			json.Unmarshal(b, &env) != nil || env.Error == nil || env.Error.Code != tt.code ||
			env.Error.Message == "" || env.Error.Fields == nil || resp.Header.Get("Allow") != tt.allow {
			t.Errorf("%s %s: %d %v %s; want %d %s Allow %q", tt.method, tt.path, resp.StatusCode, resp.Header, b,
				tt.status, tt.code, tt.allow)
		}
	}

	// HEAD is no route of the API (SPEC §8): 405, headers only, as a
	// reply to HEAD has no body. Elsewhere, a GET route answers HEAD.
	for _, tt := range []struct {
		path, key string
		status    int
		allow     string
	}{
		{"/api/v1/me", boot.Secret, 405, "GET"},
		{"/api/v1/me", "", 405, "GET"},
		{"/api/v1/schema/", "", 405, "GET"},
		{"/api/v1/inboxes/" + boot.Inbox.ID + "/messages", boot.Secret, 405, "DELETE, GET"},
		{"/downloads/tool.py", "", 200, ""},
	} {
		resp, b := send("HEAD", tt.path, tt.key)
		if resp.StatusCode != tt.status || len(b) != 0 || resp.Header.Get("Content-Type") == "" || resp.Header.Get("Allow") != tt.allow {
			t.Errorf("HEAD %s: %d %v %q, want %d", tt.path, resp.StatusCode, resp.Header, b, tt.status)
		}
	}
	// The schema, served without a key, refuses parameters as every
	// route does.
	if resp, b := send("GET", "/api/v1/schema/?x=1", ""); resp.StatusCode != http.StatusBadRequest || !bytes.Contains(b, []byte(`"x"`)) {
		t.Errorf("schema with an unknown parameter: %d %s", resp.StatusCode, b)
	}
}

// A wait in progress when the server stops gets 503 unavailable with
// Retry-After, never an empty 200 (SPEC §13).
func TestWaitAtShutdownIsUnavailable(t *testing.T) {
	st, boot := servertest.Open(t, "free")
	srv, err := server.Listen(st, config(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()

	v, err := openapitest.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	waitURL := srv.APIBase() + "/endpoints/" + boot.Endpoint.ID + "/requests?path=/never&wait="
	get := func(wait string) (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", waitURL+wait, nil)
		req.Header.Set("Authorization", "Bearer "+boot.Secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return nil, nil
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := v.Check(req, resp.StatusCode, resp.Header, b); err != nil {
			t.Error(err)
		}
		return resp, b
	}
	type answer struct {
		resp *http.Response
		body []byte
	}
	// Five waits for the project's four slots: the first answer is the one
	// refused, and it comes only once the other four hold their slots,
	// waiting in the server.
	got := make(chan answer, 5)
	for range 5 {
		go func() {
			resp, b := get("30")
			got <- answer{resp, b}
		}()
	}
	if a := <-got; a.resp == nil || a.resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("first answer: %+v", a)
	}
	cancel()
	for range 4 {
		a := <-got
		if a.resp == nil {
			continue
		}
		var env envelope
		if a.resp.StatusCode != 503 || a.resp.Header.Get("Retry-After") != "1" ||
			json.Unmarshal(a.body, &env) != nil || env.Error == nil || env.Error.Code != "unavailable" {
			t.Errorf("wait at shutdown: %d %v %s", a.resp.StatusCode, a.resp.Header, a.body)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
}
