package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capturedev/capture/forward/mcp"
	"github.com/capturedev/capture/forward/mcp/mcptest"
	"github.com/capturedev/capture/store/storetest"
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
	mux.Handle("/mcp", mcp.HTTPHandler(e.APIBase, "test", nil))
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

// inSession is a request of sess's, with key: a POST of body, or a DELETE
// when body is empty.
func inSession(ctx context.Context, url, key string, sess *mcpsdk.ClientSession, body string) *http.Request {
	method, reader := http.MethodDelete, io.Reader(nil)
	if body != "" {
		method, reader = http.MethodPost, strings.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctx, method, url, reader)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	req.Header.Set("Mcp-Session-Id", sess.ID())
	req.Header.Set("Mcp-Protocol-Version", sess.InitializeResult().ProtocolVersion)
	req.Header.Set("Authorization", "Bearer "+key)
	return req
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
		resp, err := http.DefaultClient.Do(inSession(t.Context(), url, key, sess, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`))
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

// Without Mcp-Session-Id only initialize (or a ping) is served; any other
// message is a bad request (the streamable HTTP transport's rule), told in
// the API's envelope, while initialize itself still works.
func TestHTTPWithoutSessionOnlyInitialize(t *testing.T) {
	e := mcptest.Start(t)
	url := mcpURL(t, e)
	post := func(body string) (int, string, string) {
		resp, b := postJSONRPC(t, url, "", e.Key, body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), b
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_inboxes","arguments":{}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`[{"jsonrpc":"2.0","id":4,"method":"tools/list"}]`,
	} {
		status, ct, b := post(body)
		if status != http.StatusBadRequest || ct != "application/json" ||
			!strings.Contains(b, `"code":"invalid_parameter"`) || !strings.Contains(b, `"Mcp-Session-Id"`) {
			t.Errorf("%s without a session: %d %s %s, want 400 invalid_parameter naming Mcp-Session-Id", body, status, ct, b)
		}
	}
	// A ping, which clients send to probe a server, is answered.
	if status, _, b := post(`{"jsonrpc":"2.0","id":5,"method":"ping"}`); status != http.StatusOK || !strings.Contains(b, `"result":{}`) {
		t.Errorf("ping without a session: %d %s", status, b)
	}
	status, _, b := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	if status != http.StatusOK || !strings.Contains(b, `"serverInfo"`) {
		t.Errorf("initialize without a session: %d %s", status, b)
	}
}

// Replicas behind a load balancer each see part of a client's requests
// (SPEC §19): the whole suite passes through a balancer that sends each
// request to the next of two handlers, neither of which holds the other's
// sessions. That includes a wait given up by its client, whose slot must
// come free at once on whichever replica holds it.
func TestHTTPAcrossReplicas(t *testing.T) {
	e := mcptest.Start(t)
	var replicas []*url.URL
	for range 2 {
		mux := http.NewServeMux()
		mux.Handle("/mcp", mcp.HTTPHandler(e.APIBase, "test", nil))
		ts := httptest.NewServer(mux)
		// A session's event stream stays open until its session ends,
		// which the client's DELETE does only on the replica holding it.
		t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
		u, _ := url.Parse(ts.URL)
		replicas = append(replicas, u)
	}
	var next atomic.Uint64
	balancer := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(replicas[next.Add(1)%uint64(len(replicas))])
		},
		FlushInterval: -1,
		// Calls the suite gives up on end as cancelled proxy requests.
		ErrorLog: log.New(io.Discard, "", 0),
	})
	t.Cleanup(func() { balancer.CloseClientConnections(); balancer.Close() })
	lb := balancer.URL + "/mcp"

	mcptest.Run(t, e, func(t *testing.T, key string) *mcpsdk.ClientSession {
		sess, err := connect(t, lb, key)
		if err != nil {
			t.Fatal(err)
		}
		return sess
	})

	// A session of one key is unknown to the other key on every replica.
	sess, err := connect(t, lb, e.Key)
	if err != nil {
		t.Fatal(err)
	}
	for _, replica := range replicas {
		for _, key := range []string{e.Other.Key, e.Key} {
			resp, err := http.DefaultClient.Do(inSession(t.Context(), replica.String()+"/mcp", key, sess,
				`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case key == e.Other.Key && (resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), `"code":"not_found"`)):
				t.Errorf("%s, another key on the session: %d %s, want 404 not_found", replica, resp.StatusCode, b)
			case key == e.Key && (resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "list_messages")):
				t.Errorf("%s, the session's own key: %d %s", replica, resp.StatusCode, b)
			}
		}
	}
	// Ending the session is answered on every replica, whichever holds it.
	for _, replica := range replicas {
		resp, err := http.DefaultClient.Do(inSession(t.Context(), replica.String()+"/mcp", e.Key, sess, ""))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("%s: DELETE of the session: %d", replica, resp.StatusCode)
		}
	}
}

// A wait whose client closes its HTTP request ends at once, whether its
// session lives on the replica that serves it or not: the client's own
// notification of the cancel may go to another replica, and a wait left
// running would hold one of the project's four slots for up to 30 s.
func TestHTTPWaitEndsWithItsRequest(t *testing.T) {
	e := mcptest.Start(t)
	var replicas []string
	for range 2 {
		mux := http.NewServeMux()
		mux.Handle("/mcp", mcp.HTTPHandler(e.APIBase, "test", nil))
		ts := httptest.NewServer(mux)
		t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
		replicas = append(replicas, ts.URL+"/mcp")
	}
	sess, err := connect(t, replicas[0], e.Key)
	if err != nil {
		t.Fatal(err)
	}
	var ids atomic.Int64 // a session's calls each have their own id
	call := func(ctx context.Context, replica string, wait int) (string, error) {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"list_requests","arguments":{"endpoint_id":%q,"path":"/held/","wait":%d}}}`,
			ids.Add(1), e.EndpointID, wait)
		resp, err := http.DefaultClient.Do(inSession(ctx, replica, e.Key, sess, body))
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%d %s", resp.StatusCode, b)
		}
		return string(b), err
	}
	held := func() int { return heldWaits(t, e) }

	// Two waits in the session on the replica that holds it, two on the
	// other one.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 4)
	for i := range 4 {
		go func() {
			_, err := call(ctx, replicas[i%2], 30)
			done <- err
		}()
	}
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for deadline := time.Now().Add(10 * time.Second); held() < 4; <-poll.C {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 4 waits held after 10 s", held())
		}
	}
	cancel()
	for range 4 {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("a wait ended before its client gave up on it: %v", err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); held() > 0; <-poll.C {
		if time.Now().After(deadline) {
			t.Fatalf("%d waits still held 10 s after their clients closed them", held())
		}
	}
}

// heldWaits reads how many waits e's project holds, from the server's
// metrics.
func heldWaits(t *testing.T, e *mcptest.Env) int {
	t.Helper()
	n, err := waitsHeld(e)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitsHeld is heldWaits for goroutines, which must not call t.Fatal.
func waitsHeld(e *mcptest.Env) (int, error) { return e.HeldWaits() }

// Behind a reverse proxy that keeps the public Host, requests reach /mcp
// on a loopback address under a Host that is not localhost: they are
// served like any other, the key being what guards them.
func TestHTTPBehindProxyKeepingHost(t *testing.T) {
	e := mcptest.Start(t)
	target, err := url.Parse(mcpURL(t, e))
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: target.Scheme, Host: target.Host})
			r.Out.Host = "capture.test"
		},
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
	})
	t.Cleanup(func() { proxy.CloseClientConnections(); proxy.Close() })

	sess, err := connect(t, proxy.URL+target.Path, e.Key)
	if err != nil {
		t.Fatalf("connect through a proxy keeping Host: %v", err)
	}
	res, err := sess.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "list_inboxes", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("list_inboxes through a proxy keeping Host: %v %+v", err, res)
	}

	// The same by hand, with the Host of the report and one with a port.
	for _, host := range []string{"capture.test", "capture.example.com:8443"} {
		resp, b := postJSONRPC(t, target.String(), host, e.Key,
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" || !strings.Contains(b, `"serverInfo"`) {
			t.Errorf("initialize with Host %s: %d %v %s", host, resp.StatusCode, resp.Header, b)
		}
	}
}

// A wait tool held by a key that is then revoked ends at once as
// unauthorized, giving back its slot, and the key opens nothing more.
func TestHTTPWaitEndsWhenItsKeyIsRevoked(t *testing.T) {
	e := mcptest.Start(t)
	url := mcpURL(t, e)
	k, secret, err := e.Store.CreateKey(t.Context(), e.ProjectID)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := connect(t, url, secret)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res *mcpsdk.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := sess.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "list_requests",
			Arguments: map[string]any{"endpoint_id": e.EndpointID, "path": "/after-revoke/", "wait": 30}})
		done <- answer{res, err}
	}()
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for deadline := time.Now().Add(10 * time.Second); heldWaits(t, e) < 1; <-poll.C {
		if time.Now().After(deadline) {
			t.Fatal("the wait was not held after 10 s")
		}
	}
	// Revoked as `capture key revoke` does, from another process.
	if _, err := storetest.OpenAgain(t, e.Store).RevokeKey(t.Context(), k.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-done:
		if a.err == nil && !a.res.IsError {
			t.Fatalf("the revoked key's wait answered: %+v", a.res)
		}
		if a.err == nil {
			text, _ := a.res.Content[0].(*mcpsdk.TextContent)
			if text == nil || !strings.Contains(text.Text, "unauthorized (HTTP 401)") {
				t.Errorf("the revoked key's wait: %+v", a.res.Content)
			}
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the revoked key's wait did not end")
	}
	if n := heldWaits(t, e); n != 0 {
		t.Errorf("%d waits still held once the revoked key's ended", n)
	}
	resp, err := http.DefaultClient.Do(inSession(t.Context(), url, secret, sess, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != "Bearer" {
		t.Errorf("the revoked key in its session: %d %v", resp.StatusCode, resp.Header)
	}
}

// postJSONRPC posts a JSON-RPC body to /mcp at url as a streamable HTTP
// client does, with key, Host set to host unless it is empty, and the
// headers of nameValues (name, value, …); it returns the answer and its
// body.
func postJSONRPC(t *testing.T, url, host, key, body string, nameValues ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+key)
	for i := 0; i+1 < len(nameValues); i += 2 {
		req.Header.Set(nameValues[i], nameValues[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// A key keeps at most 32 sessions open: opening more closes the least
// recently used, whose stream then ends, and whose requests are still
// answered, without a session.
func TestHTTPSessionsOfAKeyAreBounded(t *testing.T) {
	e := mcptest.Start(t)
	url := mcpURL(t, e)
	open := func() string {
		t.Helper()
		resp, _ := postJSONRPC(t, url, "", e.Key, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
		id := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != http.StatusOK || id == "" {
			t.Fatalf("initialize: %d %v", resp.StatusCode, resp.Header)
		}
		return id
	}

	first := open()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+e.Key)
	req.Header.Set("Mcp-Session-Id", first)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("GET stream of the first session: %v %v", stream, err)
	}
	defer stream.Body.Close()
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, stream.Body)
		ended <- err
	}()

	for range 31 {
		open()
	}
	select {
	case err := <-ended:
		t.Fatalf("the first session's stream ended at 32 sessions: %v", err)
	default:
	}
	open()
	select {
	case err := <-ended:
		if err != nil {
			t.Errorf("the stream of the closed session ended with %v, want its end", err)
		}
	case <-ctx.Done():
		t.Fatal("the least recently used session stayed open past 32")
	}

	resp, b := postJSONRPC(t, url, "", e.Key, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		"Mcp-Session-Id", first, "Mcp-Protocol-Version", "2025-06-18")
	if resp.StatusCode != http.StatusOK || !strings.Contains(b, "list_inboxes") {
		t.Errorf("a request of the closed session: %d %s", resp.StatusCode, b)
	}
}

// A session ended with DELETE is gone (MCP's streamable HTTP: its id then
// gets 404), though a session this process does not hold is otherwise
// served without one, for replicas: the process that ended it refuses it
// from then on, whether it held it or not.
func TestHTTPSessionEndedByDeleteIsGone(t *testing.T) {
	e := mcptest.Start(t)
	url := mcpURL(t, e)
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.HTTPHandler(e.APIBase, "test", nil))
	replica := httptest.NewServer(mux)
	t.Cleanup(replica.Close)
	other := replica.URL + "/mcp"

	do := func(url string, sess *mcpsdk.ClientSession, body string) (int, string) {
		t.Helper()
		resp, err := http.DefaultClient.Do(inSession(t.Context(), url, e.Key, sess, body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const list = `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`
	gone := func(where string, sess *mcpsdk.ClientSession) {
		t.Helper()
		for _, body := range []string{list, ""} {
			status, b := do(where, sess, body)
			if status != http.StatusNotFound || !strings.Contains(b, `"code":"not_found"`) || !strings.Contains(b, sess.ID()) {
				t.Errorf("%q in the session ended: %d %.200s, want 404 not_found naming it", body, status, b)
			}
		}
	}

	// Ended where it is held.
	sess, err := connect(t, url, e.Key)
	if err != nil {
		t.Fatal(err)
	}
	if status, b := do(url, sess, list); status != http.StatusOK || !strings.Contains(b, "list_inboxes") {
		t.Fatalf("tools/list in the session: %d %s", status, b)
	}
	if status, b := do(url, sess, ""); status != http.StatusNoContent {
		t.Fatalf("DELETE of the session: %d %s", status, b)
	}
	gone(url, sess)

	// Ended on a replica that does not hold it: refused there, while the
	// one that holds it, which cannot know, still serves it.
	sess, err = connect(t, url, e.Key)
	if err != nil {
		t.Fatal(err)
	}
	if status, b := do(other, sess, list); status != http.StatusOK || !strings.Contains(b, "list_inboxes") {
		t.Fatalf("tools/list on the replica not holding the session: %d %s", status, b)
	}
	if status, b := do(other, sess, ""); status != http.StatusNoContent {
		t.Fatalf("DELETE of the session on the replica not holding it: %d %s", status, b)
	}
	gone(other, sess)
	if status, b := do(url, sess, list); status != http.StatusOK {
		t.Errorf("tools/list where the session is held, after a DELETE elsewhere: %d %s", status, b)
	}
}
