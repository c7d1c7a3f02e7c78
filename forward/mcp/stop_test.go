package mcp_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/forward/mcp/mcptest"
)

// rpcAnswer is the JSON-RPC answer to a tools/call, as a client reads it
// from the body of its POST (JSON or a short event stream).
type rpcAnswer struct {
	ID     int `json:"id"`
	Result *struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// text is the tool result's text, or the JSON-RPC error's message.
func (a rpcAnswer) text() string {
	switch {
	case a.Error != nil:
		return a.Error.Message
	case a.Result != nil && len(a.Result.Content) > 0:
		return a.Result.Content[0].Text
	}
	return ""
}

// callTool sends one tools/call of the session in the MCP at mcpURL and
// reads its answer; an empty body, or one without a JSON-RPC answer, is an
// error.
func callTool(url, key string, sess sessionInfo, id int, name string, args map[string]any) (rpcAnswer, error) {
	params, _ := json.Marshal(map[string]any{"name": name, "arguments": args})
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, id, params)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sess.id)
	req.Header.Set("Mcp-Protocol-Version", sess.version)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return rpcAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return rpcAnswer{}, fmt.Errorf("%d: reading the answer: %v", resp.StatusCode, err)
	}
	data := b
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		data = nil
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				data = []byte(strings.TrimSpace(d))
			}
		}
	}
	var a rpcAnswer
	if err := json.Unmarshal(data, &a); err != nil || a.ID != id || (a.Result == nil && a.Error == nil) {
		return rpcAnswer{}, fmt.Errorf("%d %s, body %q: no JSON-RPC answer to call %d", resp.StatusCode, resp.Header.Get("Content-Type"), b, id)
	}
	return a, nil
}

type sessionInfo struct{ id, version string }

// startSession opens an MCP session at url for key.
func startSession(t *testing.T, url, key string) sessionInfo {
	t.Helper()
	sess, err := connect(t, url, key)
	if err != nil {
		t.Fatal(err)
	}
	return sessionInfo{sess.ID(), sess.InitializeResult().ProtocolVersion}
}

// ownMCP is /mcp on e's own HTTP listener, as `serve` mounts it.
func ownMCP(e *mcptest.Env) string {
	return strings.TrimSuffix(e.APIBase, "/api/v1") + "/mcp"
}

// Tool calls that wait when serve begins to stop end at once with a tool
// error saying so and to retry, like the API's own waits (SPEC §13: a wait
// gets 503 unavailable, never an empty 200): the call is answered, and the
// stop is not held up by it, nor by the session's event stream.
func TestHTTPWaitsEndAtStop(t *testing.T) {
	e := mcptest.Start(t)
	url := ownMCP(e)
	sess := startSession(t, url, e.Key)

	calls := []struct {
		name string
		args map[string]any
	}{
		{"wait_for_message", map[string]any{"inbox_id": e.InboxID, "subject": "never", "timeout_seconds": 20}},
		{"list_messages", map[string]any{"inbox_id": e.InboxID, "subject": "never", "wait": 20}},
		{"list_requests", map[string]any{"endpoint_id": e.EndpointID, "path": "/never/", "wait": 20}},
	}
	type answer struct {
		name string
		rpcAnswer
		err error
	}
	answers := make(chan answer, len(calls))
	for i, c := range calls {
		go func() {
			a, err := callTool(url, e.Key, sess, i+1, c.name, c.args)
			answers <- answer{c.name, a, err}
		}()
	}
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for deadline := time.Now().Add(10 * time.Second); heldWaits(t, e) < len(calls); <-poll.C {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d waits held after 10 s", heldWaits(t, e), len(calls))
		}
	}

	stopped := make(chan error, 1)
	go func() { stopped <- e.Stop() }()
	for range calls {
		a := <-answers
		switch {
		case a.err != nil:
			t.Errorf("%s held at the stop: %v", a.name, a.err)
		case a.Result == nil || !a.Result.IsError || !strings.Contains(a.text(), "unavailable (HTTP 503): the server is shutting down") ||
			!strings.Contains(a.text(), "Retry in 1 s"):
			t.Errorf("%s held at the stop answered %+v (%q), want a tool error: unavailable, shutting down, retry", a.name, a.rpcAnswer, a.text())
		}
	}
	if err := <-stopped; err != nil {
		t.Error(err)
	}
}

// A replay_request in flight when serve begins to stop is finished like
// any request in flight: the target gets the whole request, its answer
// comes back to the caller, and the delivery is recorded delivered.
func TestHTTPReplayFinishesAtStop(t *testing.T) {
	e := mcptest.Start(t)
	url := ownMCP(e)
	sess := startSession(t, url, e.Key)

	arrived, release := make(chan struct{}), make(chan struct{})
	targetGone := make(chan error, 1)
	target := newTarget(t, func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		close(arrived)
		select {
		case <-release:
		case <-r.Context().Done():
			targetGone <- r.Context().Err()
			return
		}
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "answered after the stop began")
	})
	ep, err := e.Store.CreateEndpoint(t.Context(), e.ProjectID, "slow-target", &target)
	if err != nil {
		t.Fatal(err)
	}
	id := e.Post(t, ep.ID, "POST", "/slow", nil, []byte("replay me"))

	answers := make(chan rpcAnswer, 1)
	errs := make(chan error, 1)
	go func() {
		a, err := callTool(url, e.Key, sess, 1, "replay_request", map[string]any{"request_id": id})
		answers <- a
		errs <- err
	}()
	<-arrived
	stopped := make(chan error, 1)
	go func() { stopped <- e.Stop() }()
	// The stop has begun once the listener takes no new connection.
	awaitRefused(t, url)
	close(release)

	a, err := <-answers, <-errs
	if err != nil {
		t.Fatalf("replay_request in flight at the stop: %v", err)
	}
	var out struct {
		Delivery struct {
			Status         string `json:"status"`
			ResponseStatus int    `json:"response_status"`
		} `json:"delivery"`
	}
	if a.Result == nil || a.Result.IsError || json.Unmarshal(a.Result.StructuredContent, &out) != nil ||
		out.Delivery.Status != "delivered" || out.Delivery.ResponseStatus != http.StatusOK {
		t.Errorf("replay_request in flight at the stop answered %+v (%q), want the delivery, delivered", a, a.text())
	}
	select {
	case err := <-targetGone:
		t.Errorf("the target's request was cut off: %v", err)
	default:
	}
	if err := <-stopped; err != nil {
		t.Error(err)
	}
	r, err := e.Store.Request(t.Context(), e.ProjectID, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Deliveries) != 1 || r.Deliveries[0].Status != "delivered" {
		t.Errorf("deliveries recorded: %+v, want one delivered", r.Deliveries)
	}
}

// newTarget is a replay target served by h until the test ends; its URL.
func newTarget(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

// awaitRefused waits until the listener of rawURL takes no connection.
func awaitRefused(t *testing.T, rawURL string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for deadline := time.Now().Add(10 * time.Second); ; <-poll.C {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			return
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s still takes connections 10 s after the stop began", u.Host)
		}
	}
}

// Over stdio, MCP is a client of the API: a tool held in a wait when serve
// stops gets the API's 503 and reports it at once as a tool error that says
// to retry, never as an empty or malformed answer, and wait_for_message
// does not wait out its time retrying (README: it answers at once).
func TestStdioWaitsReportAStop(t *testing.T) {
	e := mcptest.Start(t)
	const held = 3
	lines := append(initialize("2025-06-18"),
		fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_messages","arguments":{"inbox_id":%q,"subject":"never","wait":20}}}`, e.InboxID),
		fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_requests","arguments":{"endpoint_id":%q,"path":"/never/","wait":20}}}`, e.EndpointID),
		fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"wait_for_message","arguments":{"inbox_id":%q,"subject":"never","timeout_seconds":20}}}`, e.InboxID))
	stopped := make(chan error, 1)
	go func() {
		poll := time.NewTicker(5 * time.Millisecond)
		defer poll.Stop()
		for deadline := time.Now().Add(10 * time.Second); ; <-poll.C {
			n, err := waitsHeld(e)
			if err != nil {
				stopped <- err
				return
			}
			if n == held {
				break
			}
			if time.Now().After(deadline) {
				stopped <- fmt.Errorf("%d of %d waits held after 10 s", n, held)
				return
			}
		}
		stopped <- e.Stop()
	}()
	out, err := overStdio(t, e, lines...)
	if err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	answered := 0
	for _, line := range out {
		var a rpcAnswer
		if json.Unmarshal([]byte(line), &a) != nil || a.ID < 2 {
			continue
		}
		answered++
		if a.Result == nil || !a.Result.IsError || !strings.Contains(a.text(), "unavailable (HTTP 503): the server is shutting down") ||
			!strings.Contains(a.text(), "Retry in 1 s") {
			t.Errorf("call %d held at the stop answered %s, want a tool error: unavailable, shutting down, retry", a.ID, line)
		}
	}
	if answered != held {
		t.Errorf("answers to the held calls: %d, want %d in\n%s", answered, held, strings.Join(out, "\n"))
	}
}
