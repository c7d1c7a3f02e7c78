package mcp_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capturedev/capture/forward/mcp"
	"github.com/capturedev/capture/forward/mcp/mcptest"
)

// mcpURL is where e serves MCP over HTTP: /mcp on its own HTTP listener
// once `serve` mounts it there, else the handler on a listener of the
// test's, in front of the same API.
func mcpURL(t *testing.T, e *mcptest.Env) string {
	t.Helper()
	own := strings.TrimSuffix(e.APIBase, "/api/v1") + "/mcp"
	resp, err := http.Post(own, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		return own
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.HTTPHandler(e.APIBase, "test"))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// withKey sends every request with the API key as a Bearer token, as an
// MCP client configured with that header does.
type withKey struct{ key string }

func (k withKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return http.DefaultTransport.RoundTrip(r)
}

func connect(t *testing.T, url, key string) (*mcpsdk.ClientSession, error) {
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "mcp-test", Version: "v0"}, nil)
	sess, err := client.Connect(t.Context(), &mcpsdk.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: withKey{key}}, MaxRetries: -1,
	}, nil)
	if err == nil {
		t.Cleanup(func() { sess.Close() })
	}
	return sess, err
}

func TestHTTP(t *testing.T) {
	e := mcptest.Start(t)
	url := mcpURL(t, e)
	mcptest.Run(t, e, func(t *testing.T, key string) *mcpsdk.ClientSession {
		sess, err := connect(t, url, key)
		if err != nil {
			t.Fatal(err)
		}
		return sess
	})
}

func TestHTTPUnauthorized(t *testing.T) {
	e := mcptest.Start(t)
	url := mcpURL(t, e)
	ctx := t.Context()
	revoked, revokedKey, err := e.Store.CreateKey(ctx, e.ProjectID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.RevokeKey(ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`

	for _, tt := range []struct{ name, header string }{
		{"no header", ""},
		{"not bearer", "Basic " + e.Key},
		{"not a key", "Bearer hunter2"},
		{"unknown key", "Bearer cap_00000000000000000000000000000000"},
		{"revoked key", "Bearer " + revokedKey},
		{"two tokens", "Bearer " + e.Key + " " + e.Key},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
				req, _ := http.NewRequest(method, url, strings.NewReader(initialize))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				if tt.header != "" {
					req.Header.Set("Authorization", tt.header)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var env struct {
					Error struct {
						Code    string            `json:"code"`
						Message string            `json:"message"`
						Fields  map[string]string `json:"fields"`
					} `json:"error"`
				}
				if resp.StatusCode != http.StatusUnauthorized || json.Unmarshal(b, &env) != nil ||
					env.Error.Code != "unauthorized" || env.Error.Message == "" || env.Error.Fields == nil ||
					resp.Header.Get("WWW-Authenticate") != "Bearer" ||
					resp.Header.Get("Content-Type") != "application/json" {
					t.Errorf("%s: %d %v %s", method, resp.StatusCode, resp.Header, b)
				}
			}
		})
	}

	if _, err := connect(t, url, "cap_wrong"); err == nil {
		t.Error("the SDK client connected with a wrong key")
	}
}

// A session belongs to the key that opened it: its id is no use with
// another key, even a valid one.
func TestHTTPSessionBoundToKey(t *testing.T) {
	e := mcptest.Start(t)
	url := mcpURL(t, e)
	sess, err := connect(t, url, e.Key)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{e.Other.Key, e.Key} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sess.ID())
		req.Header.Set("Mcp-Protocol-Version", sess.InitializeResult().ProtocolVersion)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case key == e.Other.Key && (resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/json" ||
			!strings.Contains(string(b), `"code":"not_found"`) || !strings.Contains(string(b), sess.ID())):
			// To the other key the session does not exist, and it is told
			// so in the API's envelope like every error of serve.
			t.Errorf("another key on the session: %d %v %s, want 404 not_found", resp.StatusCode, resp.Header, b)
		case key == e.Key && (resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "list_messages")):
			t.Errorf("the session's own key: %d %s", resp.StatusCode, b)
		}
	}
}
