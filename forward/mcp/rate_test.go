package mcp_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capturedev/capture/forward/mcp"
	"github.com/capturedev/capture/forward/mcp/mcptest"
	"github.com/capturedev/capture/server/api/contract"
)

// countingAPI stands in front of e's API and counts the requests that
// reach it; once limited, it answers every one 429 rate_limited, as the
// API does to a key past its rate.
type countingAPI struct {
	mu      sync.Mutex
	paths   []string
	limited bool
}

func (c *countingAPI) start(t *testing.T, e *mcptest.Env) string {
	t.Helper()
	target, err := url.Parse(e.APIBase)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(&url.URL{Scheme: target.Scheme, Host: target.Host})
		r.Out.URL.Path = r.In.URL.Path
	}}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.paths = append(c.paths, r.URL.Path)
		limited := c.limited
		c.mu.Unlock()
		if limited {
			contract.WriteError(w, &contract.Error{Code: contract.CodeRateLimited,
				Message: "too many requests for this key; retry after 2 s", RetryAfter: 2 * time.Second})
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + target.Path
}

// take returns the paths requested since the last take.
func (c *countingAPI) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.paths
	c.paths = nil
	return p
}

func (c *countingAPI) limit() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.limited = true
}

// mcpOver serves /mcp for the API at apiBase on a listener of the test's.
func mcpOver(t *testing.T, apiBase string) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.HTTPHandler(apiBase, "test", nil))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// A tool call over HTTP costs the key's rate (SPEC §5) what it costs over
// stdio: the tool's own API calls, not also a check of the key for the
// /mcp request that carries it. A call the API refuses for the rate is a
// tool error that says when to retry, never an HTTP 429 of the transport,
// on a replica that never saw the key too.
func TestHTTPToolCallCountsOnceAgainstTheRate(t *testing.T) {
	e := mcptest.Start(t)
	id := e.Message(t, e.InboxID, mcptest.Mail{Subject: "counted"})
	api := &countingAPI{}
	apiBase := api.start(t, e)
	url := mcpOver(t, apiBase)
	sess, err := connect(t, url, e.Key)
	if err != nil {
		t.Fatal(err)
	}
	api.take()
	for range 3 {
		mcptest.Ok(t, sess, "get_message", map[string]any{"message_id": id}, nil)
		if got := api.take(); len(got) != 1 || !strings.HasSuffix(got[0], "/messages/"+id) {
			t.Errorf("API requests of one get_message over HTTP: %v, want the message's alone", got)
		}
	}

	// A filtered get_message_links is one call too: the links route says
	// whether the message kept all its links.
	mcptest.Ok(t, sess, "get_message_links", map[string]any{"message_id": id, "match": "verify", "kind": "verify"}, nil)
	if got := api.take(); len(got) != 1 || !strings.Contains(got[0], "/messages/"+id+"/links") {
		t.Errorf("API requests of one filtered get_message_links over HTTP: %v, want the links route's alone", got)
	}

	api.limit()
	res, err := sess.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "get_message", Arguments: map[string]any{"message_id": id}})
	if err != nil {
		t.Fatalf("get_message past the rate: %v, want a tool error", err)
	}
	if text := res.Content[0].(*mcpsdk.TextContent).Text; !res.IsError || !strings.Contains(text, "rate_limited (HTTP 429)") ||
		!strings.Contains(text, "Retry in 2 s") {
		t.Errorf("get_message past the rate: %+v", res.Content[0])
	}
	// Another replica, which does not know the key yet.
	a, err := callTool(mcpOver(t, apiBase), e.Key, sessionInfo{sess.ID(), sess.InitializeResult().ProtocolVersion}, 7,
		"get_message", map[string]any{"message_id": id})
	if err != nil {
		t.Fatalf("get_message past the rate on another replica: %v, want a tool error", err)
	}
	if a.Result == nil || !a.Result.IsError || !strings.Contains(a.text(), "rate_limited (HTTP 429)") || !strings.Contains(a.text(), "Retry in 2 s") {
		t.Errorf("get_message past the rate on another replica: %+v (%q)", a, a.text())
	}
}

// A message in a session is not read before its key is checked: one
// without a valid key is refused at once, its body never asked for, so no
// one without a key can make the process hold bodies (a tool call is told
// from the rest by its body only for a key already checked).
func TestHTTPBodyNotReadBeforeTheKey(t *testing.T) {
	e := mcptest.Start(t)
	u, err := url.Parse(mcpOver(t, e.APIBase))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The body is sent once the server asks for it (100 Continue), which
	// reading it does.
	io.WriteString(conn, "POST "+u.Path+" HTTP/1.1\r\nHost: "+u.Host+"\r\n"+
		"Authorization: Bearer cap_notakey0000000000000000000000000000000000\r\n"+
		"Mcp-Session-Id: cap_x.session\r\nContent-Type: application/json\r\n"+
		"Expect: 100-continue\r\nContent-Length: 1000000\r\n\r\n")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("a message with a bad key, its body not sent: %v, want 401 at once", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a message with a bad key: %d, want 401 before its body is asked for", resp.StatusCode)
	}
}
