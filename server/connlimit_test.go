package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// limitedServer serves h on a loopback listener capped at max connections.
func limitedServer(t *testing.T, max int, h http.Handler, timeouts func(*http.Server)) (string, *connLimit) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newConnLimit(ln, max)
	srv := &http.Server{Handler: h, ConnState: l.track}
	if timeouts != nil {
		timeouts(srv)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), l
}

func dialIdle(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

// get sends one request on a connection of its own and reads the answer.
func get(t *testing.T, addr, path string) (*http.Response, string) {
	t.Helper()
	c := dialIdle(t, addr)
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// A flood of connections that send nothing cannot keep a client out: at
// the cap the oldest of them makes room. Only when every connection is
// busy is a new one refused, with a 503 in the usual envelope.
func TestConnLimit(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 3)
	becameIdle := make(chan struct{}, 1)
	addr, _ := limitedServer(t, 3, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			started <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok")
	}), func(srv *http.Server) {
		track := srv.ConnState
		srv.ConnState = func(c net.Conn, state http.ConnState) {
			track(c, state)
			if state == http.StateIdle {
				select {
				case becameIdle <- struct{}{}:
				default:
				}
			}
		}
	})

	var idle []net.Conn
	for range 3 {
		idle = append(idle, dialIdle(t, addr))
	}
	if resp, body := get(t, addr, "/"); resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("among idle connections: %d %q", resp.StatusCode, body)
	}
	if _, err := idle[0].Read(make([]byte, 1)); err == nil {
		t.Error("the oldest idle connection was not the one displaced")
	}

	// The connection of the request above may be displaced once its
	// server goroutine has marked it idle, which may come after its client
	// has read the answer.
	select {
	case <-becameIdle:
	case <-time.After(10 * time.Second):
		t.Fatal("the answered connection never became idle")
	}

	// Three requests in progress hold every slot.
	for range 3 {
		c := dialIdle(t, addr)
		io.WriteString(c, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("a request never got a slot")
		}
	}
	resp, body := get(t, addr, "/")
	var env struct{ Error struct{ Code string } }
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || json.Unmarshal([]byte(body), &env) != nil ||
		env.Error.Code != "unavailable" {
		t.Errorf("over the cap: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	close(release)
}

// At shutdown, connections that never sent a request are closed at once;
// those with one in progress are left to finish.
func TestCloseWaiting(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	addr, l := limitedServer(t, 10, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		io.WriteString(w, "finished")
	}), nil)
	busy := dialIdle(t, addr)
	io.WriteString(busy, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started
	// Accepted before closeWaiting or after it, it is closed either way.
	waiting := dialIdle(t, addr)
	l.closeWaiting()
	if _, err := waiting.Read(make([]byte, 1)); err == nil {
		t.Error("connection without a request left open")
	}
	close(release)
	resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("request in progress: %v %v", resp, err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "finished" {
		t.Errorf("got %q", b)
	}
}

// Requests that rightly take long get deadlines of their own beyond the
// server's write timeout; others are held to it.
func TestLongRequests(t *testing.T) {
	addr, _ := limitedServer(t, 10, longRequests(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-time.After(300 * time.Millisecond) // a wait, a replay, a stream
		io.WriteString(w, "done")
	}), context.Background()), func(s *http.Server) { s.WriteTimeout, s.ReadTimeout = 100*time.Millisecond, 100*time.Millisecond })

	for _, req := range []string{
		"GET /api/v1/endpoints/whe_x/requests?wait=1 HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /api/v1/requests/req_x/replay HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
		"GET /events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n",
		"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
	} {
		c := dialIdle(t, addr)
		io.WriteString(c, req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Errorf("%q: %v", strings.SplitN(req, "\r", 2)[0], err)
			continue
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != "done" {
			t.Errorf("%q: got %q", strings.SplitN(req, "\r", 2)[0], b)
		}
	}
	c := dialIdle(t, addr)
	io.WriteString(c, "GET /api/v1/me HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
		if b, err := io.ReadAll(resp.Body); err == nil && string(b) == "done" {
			t.Error("an ordinary request outlived the write timeout")
		}
	}
}

// Once a stop begins, the requests that wait for something to happen end
// (the handlers then answer 503); every other request, a replay included,
// keeps its context and is finished.
func TestWaitingRequestsEndWhenStopping(t *testing.T) {
	stopping, stop := context.WithCancel(t.Context())
	stop()
	h := longRequests(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The test's requests carry a context that never ends.
		if r.Context().Done() == nil {
			io.WriteString(w, "kept")
			return
		}
		<-r.Context().Done()
		io.WriteString(w, "ended")
	}), stopping)
	for _, c := range []struct {
		method, target, accept, want string
	}{
		{"GET", "/api/v1/endpoints/whe_x/requests?wait=1", "", "ended"},
		{"GET", "/projects/p/inboxes/i/events", "", "ended"},
		{"GET", "/anything", "text/event-stream", "ended"},
		// An MCP call lives on to carry its answer: its tools that wait
		// end themselves (Config.MCP). The session's event stream ends.
		{"POST", "/mcp", "application/json, text/event-stream", "kept"},
		{"GET", "/mcp", "text/event-stream", "ended"},
		{"POST", "/api/v1/requests/req_x/replay", "", "kept"},
		{"GET", "/api/v1/endpoints/whe_x/requests?wait=0", "", "kept"},
		{"POST", "/api/v1/projects", "", "kept"},
	} {
		r := httptest.NewRequest(c.method, c.target, nil)
		if c.accept != "" {
			r.Header.Set("Accept", c.accept)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if got := w.Body.String(); got != c.want {
			t.Errorf("%s %s (Accept %q): %s, want %s", c.method, c.target, c.accept, got, c.want)
		}
	}
}

// The answers net/http writes itself to a request it cannot read go out
// in the error envelope; a handler's own answers pass untouched.
func TestProtocolErrorsAreEnveloped(t *testing.T) {
	addr, _ := limitedServer(t, 8, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "the handler's own words", http.StatusTeapot)
	}), func(s *http.Server) { s.MaxHeaderBytes = 1 << 10 })

	exchange := func(request string) (*http.Response, string) {
		t.Helper()
		c := dialIdle(t, addr)
		if _, err := io.WriteString(c, request); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%q: %v", request, err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, tt := range []struct {
		name, request string
		status        int
		message       string
	}{
		{"no Host", "GET / HTTP/1.1\r\n\r\n", 400, "malformed HTTP request: missing required Host header"},
		{"space in the path", "POST /whe_x/sp ace HTTP/1.1\r\nHost: x\r\n\r\n", 400, "malformed HTTP request"},
		{"two lengths", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400, "malformed HTTP request"},
		{"header fields too large", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 8<<10) + "\r\n\r\n", 431,
			"the request's header fields are too large"},
		{"unknown expectation", "POST / HTTP/1.1\r\nHost: x\r\nExpect: foo\r\nContent-Length: 3\r\n\r\nabc", 417,
			`unsupported Expect header: only "100-continue" is understood`},
		{"unknown expectation, HTTP/1.0", "POST / HTTP/1.0\r\nHost: x\r\nExpect: foo\r\nContent-Length: 3\r\n\r\nabc", 417,
			`unsupported Expect header`},
	} {
		resp, body := exchange(tt.request)
		var env struct {
			Error struct {
				Code, Message string
				Fields        map[string]string
			}
		}
		if resp.StatusCode != tt.status || resp.Header.Get("Content-Type") != "application/json" ||
			json.Unmarshal([]byte(body), &env) != nil || env.Error.Code != "invalid_parameter" ||
			!strings.HasPrefix(env.Error.Message, tt.message) || env.Error.Fields == nil {
			t.Errorf("%s: %d %v %q", tt.name, resp.StatusCode, resp.Header, body)
		}
	}
	// A 417 of the handler's own, with a header more, passes untouched.
	if reply, ok := envelopedProtocolError([]byte("HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nContent-Type: text/plain\r\n" +
		"Date: Tue, 24 Nov 2026 10:12:24 GMT\r\nContent-Length: 0\r\n\r\n")); ok {
		t.Errorf("a custom 417 was taken for net/http's own: %q", reply)
	}
	resp, body := exchange("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != http.StatusTeapot || body != "the handler's own words\n" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("a handler's answer was changed: %d %v %q", resp.StatusCode, resp.Header, body)
	}
}
