package capture

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capturedev/capture/server/admission"
	"github.com/capturedev/capture/server/openapi/openapitest"
	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/storetest"
)

// schemas checks the listener's answers against the shapes the OpenAPI
// document gives them.
var schemas = sync.OnceValues(openapitest.NewValidator)

func checkSchema(t *testing.T, name string, body []byte) {
	t.Helper()
	v, err := schemas()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.CheckSchema(name, body); err != nil {
		t.Errorf("answer does not match the OpenAPI document: %v", err)
	}
}

// env is a capture listener on a real port over a store in a temp dir.
type env struct {
	t        *testing.T
	st       *store.Store
	h        *Handler
	srv      *http.Server
	addr     string
	base     string // http://addr/whe_<id>
	project  store.Project
	endpoint store.Endpoint
	client   *http.Client

	mu     sync.Mutex
	closed map[string]chan struct{} // by client address
}

// newEnv starts the listener; setup, when given, adjusts the handler and
// server before they serve.
func newEnv(t *testing.T, setup func(*Handler, *http.Server)) *env {
	t.Helper()
	st := storetest.Store(t)
	p, err := st.CreateProject(t.Context(), "test", "free")
	if err != nil {
		t.Fatal(err)
	}
	ep, err := st.CreateEndpoint(t.Context(), p.ID, "hooks", nil)
	if err != nil {
		t.Fatal(err)
	}
	return startEnv(t, st, st, p, ep, setup)
}

func startEnv(t *testing.T, st *store.Store, cs Store, p store.Project, ep store.Endpoint, setup func(*Handler, *http.Server)) *env {
	t.Helper()
	e := &env{t: t, st: st, project: p, endpoint: ep, closed: map[string]chan struct{}{}}
	e.h = New(cs, Config{})
	e.srv = NewServer(e.h)
	e.srv.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			close(e.connClosed(c.RemoteAddr().String()))
		}
	}
	if setup != nil {
		setup(e.h, e.srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- e.srv.Serve(ln) }()
	t.Cleanup(func() {
		e.srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	e.addr = ln.Addr().String()
	e.base = "http://" + e.addr + "/" + ep.ID
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	e.client = &http.Client{Transport: tr}
	return e
}

// connClosed is closed once the server has closed the connection from
// client address addr, which is after its handler returned.
func (e *env) connClosed(addr string) chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.closed[addr]
	if !ok {
		c = make(chan struct{})
		e.closed[addr] = c
	}
	return c
}

func (e *env) waitClosed(c net.Conn) {
	e.t.Helper()
	select {
	case <-e.connClosed(c.LocalAddr().String()):
	case <-time.After(10 * time.Second):
		e.t.Fatal("server did not close the connection")
	}
}

func (e *env) do(req *http.Request) (*http.Response, []byte) {
	e.t.Helper()
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, body
}

func (e *env) newRequest(method, url string, body io.Reader) *http.Request {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), method, url, body)
	if err != nil {
		e.t.Fatal(err)
	}
	return req
}

// captured reads back the request a default 200 {"id":…} answer names.
func (e *env) captured(resp *http.Response, body []byte) store.Request {
	e.t.Helper()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		e.t.Fatalf("got %s %q %s, want 200 application/json", resp.Status, resp.Header.Get("Content-Type"), body)
	}
	var v struct{ ID string }
	if err := json.Unmarshal(body, &v); err != nil || !strings.HasPrefix(v.ID, "req_") {
		e.t.Fatalf("answer %s: want {\"id\":\"req_…\"} (%v)", body, err)
	}
	checkSchema(e.t, "CaptureReceipt", body)
	r, err := e.st.Request(e.t.Context(), e.project.ID, v.ID)
	if err != nil {
		e.t.Fatalf("answered id %s is not readable: %v", v.ID, err)
	}
	return r
}

func (e *env) stored() int {
	e.t.Helper()
	l, err := e.st.Requests(e.t.Context(), e.endpoint.ID, store.RequestFilter{}, store.Page{Limit: store.MaxLimit})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(l.Items)
}

// raw sends bytes as they are and reads one response.
func (e *env) raw(request string) (*http.Response, []byte) {
	e.t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, body
}

func checkError(t *testing.T, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %s, want %d; body %s", resp.Status, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var env struct {
		Error struct {
			Code    string
			Message string
			Fields  map[string]string
		}
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	if env.Error.Code != code || env.Error.Message == "" || env.Error.Fields == nil {
		t.Errorf("error envelope %s, want code %q with a message and fields", body, code)
	}
	checkSchema(t, "Error", body)
}

func gzipped(s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	zw.Close()
	return b.Bytes()
}

// onlyReader hides the length of a body so the client sends it chunked.
type onlyReader struct{ io.Reader }

func TestBodies(t *testing.T) {
	e := newEnv(t, nil)
	oneMiB := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	tests := []struct {
		name, method string
		body         []byte
		chunked      bool
		header       map[string]string
	}{
		{name: "utf-8 JSON", method: "POST", body: []byte(`{"event":"payé","emoji":"🦫","n":1}`),
			header: map[string]string{"Content-Type": "application/json"}},
		{name: "invalid UTF-8", method: "POST", body: []byte{0xff, 0xfe, 'a', 0xc3, 0x28, 0x80}},
		{name: "NUL-filled", method: "PUT", body: make([]byte, 4096)},
		{name: "empty POST", method: "POST", body: []byte{}},
		{name: "GET without body", method: "GET"},
		{name: "chunked", method: "POST", body: bytes.Repeat([]byte("chunk\x00\xff"), 5000), chunked: true},
		{name: "gzip stored as sent", method: "POST", body: gzipped(`{"compressed":true}`),
			header: map[string]string{"Content-Encoding": "gzip", "Content-Type": "application/json"}},
		{name: "1 MiB, the free limit", method: "POST", body: oneMiB},
		{name: "1 MiB chunked", method: "POST", body: oneMiB, chunked: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body != nil {
				body = bytes.NewReader(tt.body)
				if tt.chunked {
					body = onlyReader{body}
				}
			}
			req := e.newRequest(tt.method, e.base+"/hook", body)
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			r := e.captured(e.do(req))
			want := tt.body
			if want == nil {
				want = []byte{}
			}
			if !bytes.Equal(r.Body, want) {
				t.Errorf("body: stored %d bytes %.40q, sent %d bytes %.40q", len(r.Body), r.Body, len(want), want)
			}
			if r.Size != int64(len(want)) || r.Method != tt.method || r.Path != "/hook" || r.EndpointID != e.endpoint.ID {
				t.Errorf("stored %+v", r.RequestSummary)
			}
			if ct := tt.header["Content-Type"]; ct != "" && (r.ContentType == nil || *r.ContentType != ct) {
				t.Errorf("content type %v, want %q", r.ContentType, ct)
			}
			if ce := headerValues(r.Headers, "Content-Encoding"); tt.header["Content-Encoding"] != "" && !slices.Equal(ce, []string{"gzip"}) {
				t.Errorf("Content-Encoding %q, want gzip", ce)
			}
			if te := headerValues(r.Headers, "Transfer-Encoding"); tt.chunked != slices.Equal(te, []string{"chunked"}) {
				t.Errorf("Transfer-Encoding %q with chunked %v", te, tt.chunked)
			}
		})
	}
}

func TestRequestFields(t *testing.T) {
	e := newEnv(t, nil)
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /%s/orders/42?b=2&a=1 HTTP/1.1\r\nHost: hooks.example:8080\r\nX-Multi: one\r\n"+
		"x-multi: two\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello", e.endpoint.ID)
	before := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	r := e.captured(resp, body)
	if r.Path != "/orders/42" || r.Query != "b=2&a=1" || string(r.Body) != "hello" {
		t.Errorf("stored %+v body %q", r.RequestSummary, r.Body)
	}
	if r.RemoteAddr != c.LocalAddr().String() {
		t.Errorf("remote address %q, want %q", r.RemoteAddr, c.LocalAddr())
	}
	if d := r.ReceivedAt.Sub(before); d < -time.Second || d > time.Second {
		t.Errorf("received at %s, sent at %s", r.ReceivedAt, before)
	}
	want := []store.Header{
		{Name: "Content-Length", Values: []string{"5"}},
		{Name: "Content-Type", Values: []string{"text/plain"}},
		{Name: "Host", Values: []string{"hooks.example:8080"}},
		{Name: "X-Multi", Values: []string{"one", "two"}},
	}
	if !slices.EqualFunc(r.Headers, want, func(a, b store.Header) bool {
		return a.Name == b.Name && slices.Equal(a.Values, b.Values)
	}) {
		t.Errorf("headers %+v, want %+v", r.Headers, want)
	}
}

// The web interface's sign-in cookies, which a browser sends to a capture
// URL on the same host, are never stored; the app's own cookies are, a
// header without ours byte for byte.
func TestWebCookiesAreNotCaptured(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct {
		sent []string
		want []string // nil: no Cookie header stored
	}{
		{[]string{"capture_session=s3cret"}, nil},
		{[]string{"app=1; capture_session=s3cret;capture_login=t0k; theme=dark"}, []string{"app=1; theme=dark"}},
		{[]string{"app=1;theme=dark", "capture_flash=x"}, []string{"app=1;theme=dark"}},
		{[]string{"capture_id=7;  mine=2"}, []string{"capture_id=7;  mine=2"}},
	} {
		req, _ := http.NewRequest("GET", "http://"+e.addr+"/"+e.endpoint.ID+"/page", nil)
		req.Header["Cookie"] = c.sent
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		r := e.captured(resp, body)
		var got []string
		for _, h := range r.Headers {
			if h.Name == "Cookie" {
				got = h.Values
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("sent Cookie %q, stored %q, want %q", c.sent, got, c.want)
		}
	}
}

func TestMethods(t *testing.T) {
	e := newEnv(t, nil)
	for _, m := range []string{"PROPFIND", "FROBNICATE", "DELETE", "PATCH", "OPTIONS", "HEAD", "M-SEARCH"} {
		t.Run(m, func(t *testing.T) {
			req := e.newRequest(m, e.base, strings.NewReader("x"))
			resp, body := e.do(req)
			if m == "HEAD" {
				// No body to carry the id; check the count instead.
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("HEAD: %s", resp.Status)
				}
				return
			}
			r := e.captured(resp, body)
			if r.Method != m || r.Path != "/" {
				t.Errorf("stored method %q path %q, want %q /", r.Method, r.Path, m)
			}
		})
	}
	if n := e.stored(); n != 7 {
		t.Errorf("%d stored, want 7", n)
	}
}

// Targets go on the wire untouched, as an http.Client would clean or
// reject some of them.
func TestRawTargets(t *testing.T) {
	e := newEnv(t, nil)
	id := e.endpoint.ID
	tests := []struct{ target, path, query string }{
		{"/" + id, "/", ""},
		{"/" + id + "/", "/", ""},
		{"/" + id + "?", "/", ""},
		{"/" + id + "?only=query", "/", "only=query"},
		{"/" + id + "/a/../../b/./c/%2e%2e/%2F%41", "/a/../../b/./c/%2e%2e/%2F%41", ""},
		{"/" + id + "/../../etc/passwd", "/../../etc/passwd", ""},
		{"/" + id + "//double//slash/", "//double//slash/", ""},
		{"/" + id + "/p?x=%ZZ&y=1+2&&z=%20;w", "/p", "x=%ZZ&y=1+2&&z=%20;w"},
		{"/" + id + "/ünï?q=ü", "/ünï", "q=ü"},
		{"http://proxy.example/" + id + "/absolute?k=v", "/absolute", "k=v"},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			resp, body := e.raw("POST " + tt.target + " HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok")
			r := e.captured(resp, body)
			if r.Path != tt.path || r.Query != tt.query {
				t.Errorf("stored path %q query %q, want %q %q", r.Path, r.Query, tt.path, tt.query)
			}
		})
	}
	// net/http itself refuses a malformed escape in the path (a query is
	// not checked) with a plain 400, before any handler runs.
	n := e.stored()
	resp, _ := e.raw("GET /" + id + "/bad%zz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != http.StatusBadRequest || e.stored() != n {
		t.Errorf("malformed escape: %s", resp.Status)
	}
}

func TestNotFound(t *testing.T) {
	e := newEnv(t, nil)
	for _, target := range []string{
		"/", "/favicon.ico", "/whe_", "/whe_nosuchendpoint0000", "/whe_nosuchendpoint0000/x?y",
		"/whe_bad!id/x", "/x/" + e.endpoint.ID, "//" + e.endpoint.ID, "/" + strings.ToUpper(e.endpoint.ID), "*",
		"/" + e.endpoint.ID + "%2Fx",
	} {
		t.Run(target, func(t *testing.T) {
			for _, method := range []string{"GET", "POST", "OPTIONS"} {
				resp, body := e.raw(method + " " + target + " HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
				checkError(t, resp, body, http.StatusNotFound, "not_found")
			}
		})
	}
	if n := e.stored(); n != 0 {
		t.Errorf("%d stored after 404s", n)
	}
}

func TestOversize(t *testing.T) {
	e := newEnv(t, nil)
	over := bytes.Repeat([]byte("x"), 1<<20+1)
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprint("chunked=", chunked), func(t *testing.T) {
			var body io.Reader = bytes.NewReader(over)
			if chunked {
				body = onlyReader{body}
			}
			resp, b := e.do(e.newRequest("POST", e.base, body))
			checkError(t, resp, b, http.StatusRequestEntityTooLarge, "quota_exceeded")
		})
	}
	// A declared length over the limit is refused before any byte of
	// the body is sent.
	resp, b := e.raw(fmt.Sprintf("POST /%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		e.endpoint.ID, 1<<30))
	checkError(t, resp, b, http.StatusRequestEntityTooLarge, "quota_exceeded")
	if n := e.stored(); n != 0 {
		t.Errorf("%d stored after 413s", n)
	}
}

// A client that writes its whole body before it reads anything, as
// Python's http.client (urllib, requests) does, gets the 413 and its
// envelope: the refused body is read and thrown away first, where closing
// with it unread would reset the connection under the client.
func TestOversizeSentWholeGetsTheAnswer(t *testing.T) {
	e := newEnv(t, nil)
	for _, size := range []int{1<<20 + 1, 8 << 20} {
		for _, chunked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d bytes, chunked=%v", size, chunked), func(t *testing.T) {
				c, err := net.Dial("tcp", e.addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(20 * time.Second))
				w := bufio.NewWriterSize(c, 64<<10)
				body := bytes.Repeat([]byte("x"), 64<<10)
				if chunked {
					fmt.Fprintf(w, "POST /%s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", e.endpoint.ID)
				} else {
					fmt.Fprintf(w, "POST /%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", e.endpoint.ID, size)
				}
				for sent := 0; sent < size; {
					n := min(len(body), size-sent)
					if chunked {
						fmt.Fprintf(w, "%x\r\n", n)
					}
					w.Write(body[:n])
					if chunked {
						io.WriteString(w, "\r\n")
					}
					sent += n
				}
				if chunked {
					io.WriteString(w, "0\r\n\r\n")
				}
				if err := w.Flush(); err != nil {
					t.Fatalf("sending the body: %v", err)
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatalf("reading the answer: %v", err)
				}
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatalf("reading the answer's body: %v", err)
				}
				checkError(t, resp, b, http.StatusRequestEntityTooLarge, "quota_exceeded")
			})
		}
	}
	if n := e.stored(); n != 0 {
		t.Errorf("%d stored after 413s", n)
	}
}

func TestPlanLimitFollowsProject(t *testing.T) {
	e := newEnv(t, nil)
	// Cached under the free plan first.
	e.captured(e.do(e.newRequest("POST", e.base, strings.NewReader("free"))))
	over := bytes.Repeat([]byte("x"), 1<<20+1)
	if _, err := e.st.SetPlan(t.Context(), e.project.ID, "pro"); err != nil {
		t.Fatal(err)
	}
	r := e.captured(e.do(e.newRequest("POST", e.base, bytes.NewReader(over))))
	if len(r.Body) != len(over) {
		t.Errorf("stored %d bytes, want %d", len(r.Body), len(over))
	}
}

func TestHeaderLimit(t *testing.T) {
	e := newEnv(t, nil)
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	// The server answers and hangs up while this is still being
	// written, so write and read at once.
	go func() {
		w := bufio.NewWriter(c)
		fmt.Fprintf(w, "POST /%s HTTP/1.1\r\nHost: x\r\n", e.endpoint.ID)
		for i := 0; w.Buffered() < 1<<20; i++ {
			fmt.Fprintf(w, "X-Filler-%d: %s\r\n", i, strings.Repeat("h", 1000))
		}
		io.WriteString(w, "Content-Length: 2\r\n\r\nok")
		w.Flush()
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("status %s, want 431", resp.Status)
	}
	if n := e.stored(); n != 0 {
		t.Errorf("%d stored", n)
	}
}

func TestDisconnectMidBody(t *testing.T) {
	e := newEnv(t, nil)
	for name, head := range map[string]string{
		"length":  "Content-Length: 10000\r\n",
		"chunked": "Transfer-Encoding: chunked\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", e.addr)
			if err != nil {
				t.Fatal(err)
			}
			part := strings.Repeat("p", 4000)
			if name == "chunked" {
				part = fmt.Sprintf("%x\r\n%s\r\n", len(part), part)
			}
			fmt.Fprintf(c, "POST /%s HTTP/1.1\r\nHost: x\r\n%s\r\n%s", e.endpoint.ID, head, part)
			c.Close()
			e.waitClosed(c)
		})
	}
	if n := e.stored(); n != 0 {
		t.Errorf("%d stored from bodies cut short", n)
	}
}

func TestSlowClients(t *testing.T) {
	const timeout = 300 * time.Millisecond
	e := newEnv(t, func(_ *Handler, srv *http.Server) {
		srv.ReadHeaderTimeout = timeout
		srv.ReadTimeout = timeout
	})
	tests := []struct {
		name  string
		start string
		drip  string
	}{
		{"slowloris headers", "POST /" + e.endpoint.ID + " HTTP/1.1\r\nHost: x\r\n", "X-A: b\r\n"},
		{"slow body", "POST /" + e.endpoint.ID + " HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n", "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Before the dial: the server may start its clock as soon as
			// it accepts, which can be before Dial returns here.
			begin := time.Now()
			c, err := net.Dial("tcp", e.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, tt.start)
			// Keep the connection busy well past the timeout; the server
			// must cut it off regardless.
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				tick := time.NewTicker(timeout / 10)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						if _, err := io.WriteString(c, tt.drip); err != nil {
							return
						}
					}
				}
			}()
			c.SetReadDeadline(time.Now().Add(20 * timeout))
			_, err = io.Copy(io.Discard, c)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the server kept the connection open")
			}
			if d := time.Since(begin); d < timeout {
				t.Errorf("closed after %s, before the %s timeout", d, timeout)
			}
			e.waitClosed(c)
		})
	}
	if n := e.stored(); n != 0 {
		t.Errorf("%d stored from slow clients", n)
	}
}

// Once the server begins to stop, a capture is still committed, and its
// endpoint's response delay is not waited out: the stop finishes requests
// in flight without holding on to the ones already stored.
func TestStoppingEndsTheResponseDelay(t *testing.T) {
	stopping := make(chan struct{})
	e := newEnv(t, func(h *Handler, _ *http.Server) { h.stopping = stopping })
	status, body, delay := 202, "later", store.MaxResponseDelay
	if _, err := e.st.UpdateEndpoint(t.Context(), e.endpoint.ID, store.EndpointUpdate{
		Status: &status, Body: &body, Delay: &delay, Headers: map[string]string{},
	}); err != nil {
		t.Fatal(err)
	}
	close(stopping)
	begin := time.Now()
	resp, got := e.do(e.newRequest("POST", e.base+"/late", strings.NewReader("x")))
	if resp.StatusCode != status || string(got) != body {
		t.Errorf("got %s %q", resp.Status, got)
	}
	if d := time.Since(begin); d >= delay/2 {
		t.Errorf("answered after %s: the %s delay was waited out while stopping", d, delay)
	}
	if n := e.stored(); n != 1 {
		t.Errorf("%d stored, want 1", n)
	}
}

func TestCustomResponse(t *testing.T) {
	e := newEnv(t, nil)
	e.captured(e.do(e.newRequest("POST", e.base, strings.NewReader("before"))))

	status, body, delay := 418, "I'm a teapot", 300*time.Millisecond
	_, err := e.st.UpdateEndpoint(t.Context(), e.endpoint.ID, store.EndpointUpdate{
		Status: &status, Body: &body, Delay: &delay,
		Headers: map[string]string{"x-custom": "yes", "Content-Type": "text/plain; charset=utf-8"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The very next capture answers with it: nothing cached outlives a
	// change.
	begin := time.Now()
	resp, got := e.do(e.newRequest("POST", e.base+"/custom", strings.NewReader("after")))
	if d := time.Since(begin); d < delay {
		t.Errorf("answered after %s, before the %s delay", d, delay)
	}
	if resp.StatusCode != status || string(got) != body || resp.Header.Get("X-Custom") != "yes" ||
		resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" || resp.ContentLength != int64(len(body)) {
		t.Errorf("got %s %q headers %v", resp.Status, got, resp.Header)
	}
	if n := e.stored(); n != 2 {
		t.Errorf("%d stored, want 2", n)
	}

	// Back to the default: the answer names the request again.
	status, body, delay = 200, "", 0
	if _, err := e.st.UpdateEndpoint(t.Context(), e.endpoint.ID, store.EndpointUpdate{
		Status: &status, Body: &body, Delay: &delay, Headers: map[string]string{},
	}); err != nil {
		t.Fatal(err)
	}
	r := e.captured(e.do(e.newRequest("POST", e.base, strings.NewReader("default"))))
	if string(r.Body) != "default" {
		t.Errorf("stored %q", r.Body)
	}
}

func TestCustomResponseWithoutContentType(t *testing.T) {
	e := newEnv(t, nil)
	status, body := 202, `{"ok":true}`
	if _, err := e.st.UpdateEndpoint(t.Context(), e.endpoint.ID, store.EndpointUpdate{Status: &status, Body: &body}); err != nil {
		t.Fatal(err)
	}
	resp, got := e.do(e.newRequest("POST", e.base, nil))
	if resp.StatusCode != 202 || string(got) != body {
		t.Errorf("got %s %q", resp.Status, got)
	}
	if ct, ok := resp.Header["Content-Type"]; ok {
		t.Errorf("Content-Type %q sent, none configured", ct)
	}
}

// A custom response that sets no body of its own (and no Content-Type)
// answers with the default one, naming the capture: a delay, a status or a
// header alone changes only itself. A status that allows no body sends
// none, and a configured Content-Type with no body is sent as configured.
func TestCustomResponseWithoutBodyNamesTheCapture(t *testing.T) {
	e := newEnv(t, nil)
	ms := func(d time.Duration) *time.Duration { return &d }
	num := func(n int) *int { return &n }
	for _, tt := range []struct {
		name      string
		update    store.EndpointUpdate
		status    int
		named     bool
		header    string // X-Custom wanted
		emptyType string // Content-Type wanted with an empty body
	}{
		{"delay only", store.EndpointUpdate{Delay: ms(50 * time.Millisecond)}, 200, true, "", ""},
		{"status and a header", store.EndpointUpdate{Status: num(202), Headers: map[string]string{"X-Custom": "yes"}, Delay: ms(0)}, 202, true, "yes", ""},
		{"no content", store.EndpointUpdate{Status: num(204), Headers: map[string]string{}}, 204, false, "", ""},
		{"a type of its own", store.EndpointUpdate{Status: num(200), Headers: map[string]string{"Content-Type": "text/plain"}}, 200, false, "", "text/plain"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := e.st.UpdateEndpoint(t.Context(), e.endpoint.ID, tt.update); err != nil {
				t.Fatal(err)
			}
			resp, got := e.do(e.newRequest("POST", e.base+"/x", strings.NewReader("body")))
			if resp.StatusCode != tt.status || resp.Header.Get("X-Custom") != tt.header {
				t.Fatalf("got %s, X-Custom %q; want %d, %q", resp.Status, resp.Header.Get("X-Custom"), tt.status, tt.header)
			}
			if !tt.named {
				if len(got) != 0 || resp.Header.Get("Content-Type") != tt.emptyType {
					t.Errorf("body %q, Content-Type %q; want no body and %q", got, resp.Header.Get("Content-Type"), tt.emptyType)
				}
				return
			}
			var v struct{ ID string }
			if err := json.Unmarshal(got, &v); err != nil || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("body %q (%v), Content-Type %q; want the default JSON", got, err, resp.Header.Get("Content-Type"))
			}
			if r, err := e.st.Request(t.Context(), e.project.ID, v.ID); err != nil || string(r.Body) != "body" {
				t.Errorf("the answer names %s: %v", v.ID, err)
			}
		})
	}
}

// A sender that gives up during the delay has its capture stored all the
// same, and the handler does not sit out the delay.
func TestCustomDelayClientLeaves(t *testing.T) {
	e := newEnv(t, nil)
	delay := 10 * time.Second
	if _, err := e.st.UpdateEndpoint(t.Context(), e.endpoint.ID, store.EndpointUpdate{Delay: &delay}); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /%s HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody", e.endpoint.ID)
	// The capture is committed before the delay starts.
	for ch := e.st.Watch(e.endpoint.ID); e.stored() == 0; {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("not stored")
		}
		ch = e.st.Watch(e.endpoint.ID)
	}
	begin := time.Now()
	c.Close()
	e.waitClosed(c)
	if d := time.Since(begin); d > delay/2 {
		t.Errorf("handler took %s to notice the client left", d)
	}
}

func TestCommittedBeforeResponse(t *testing.T) {
	e := newEnv(t, nil)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			body := fmt.Sprintf(`{"n":%d}`, i)
			resp, err := e.client.Post(e.base+"/concurrent", "application/json", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var v struct{ ID string }
			if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
				t.Error(err)
				return
			}
			r, err := e.st.Request(context.Background(), e.project.ID, v.ID)
			if err != nil || string(r.Body) != body {
				t.Errorf("request %s right after its answer: %q, %v", v.ID, r.Body, err)
			}
		})
	}
	wg.Wait()
}

// failingStore is a real store whose writes fail.
type failingStore struct {
	*store.Store
	lookupErr, insertErr error
}

func (f failingStore) Endpoint(ctx context.Context, projectID, id string) (store.Endpoint, error) {
	if f.lookupErr != nil {
		return store.Endpoint{}, f.lookupErr
	}
	return f.Store.Endpoint(ctx, projectID, id)
}

func (f failingStore) InsertRequest(context.Context, *store.NewRequest) (string, error) {
	if f.insertErr != nil {
		return "", f.insertErr
	}
	return "", errors.New("disk I/O error")
}

func TestStoreFailure(t *testing.T) {
	base := newEnv(t, nil)
	for name, fs := range map[string]failingStore{
		"insert": {Store: base.st},
		"lookup": {Store: base.st, lookupErr: errors.New("database is locked")},
	} {
		t.Run(name, func(t *testing.T) {
			e := startEnv(t, base.st, fs, base.project, base.endpoint, nil)
			resp, body := e.do(e.newRequest("POST", e.base, strings.NewReader("x")))
			checkError(t, resp, body, http.StatusInternalServerError, "internal")
			if strings.Contains(string(body), "disk") || strings.Contains(string(body), "locked") {
				t.Errorf("internal detail leaked: %s", body)
			}
		})
	}
	if n := base.stored(); n != 0 {
		t.Errorf("%d stored", n)
	}
}

// What may pass (a database locked past the commit deadline, too much
// ingest at once) is a 503 asking the sender to retry, never a 2xx.
func TestUnavailableIsA503WithRetryAfter(t *testing.T) {
	base := newEnv(t, nil)
	check := func(t *testing.T, e *env, body io.Reader) {
		t.Helper()
		resp, b := e.do(e.newRequest("POST", e.base, body))
		checkError(t, resp, b, http.StatusServiceUnavailable, "unavailable")
		if resp.Header.Get("Retry-After") == "" {
			t.Error("no Retry-After")
		}
	}
	t.Run("locked", func(t *testing.T) {
		fs := failingStore{Store: base.st, insertErr: fmt.Errorf("%w: locked", store.ErrUnavailable)}
		check(t, startEnv(t, base.st, fs, base.project, base.endpoint, nil), strings.NewReader("x"))
	})
	budget := admission.New(1 << 20)
	hold, err := budget.Reserve(t.Context(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Release()
	busy := func(h *Handler, _ *http.Server) { h.budget, h.admissionWait = budget, 20*time.Millisecond }
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprint("budget spent, chunked=", chunked), func(t *testing.T) {
			e := startEnv(t, base.st, base.st, base.project, base.endpoint, busy)
			var body io.Reader = strings.NewReader(strings.Repeat("x", 100<<10))
			if chunked {
				body = onlyReader{body}
			}
			check(t, e, body)
		})
	}
	if n := base.stored(); n != 0 {
		t.Errorf("%d stored", n)
	}
	// With room again, the same request is captured.
	hold.Release()
	e := startEnv(t, base.st, base.st, base.project, base.endpoint, busy)
	e.captured(e.do(e.newRequest("POST", e.base, strings.NewReader(strings.Repeat("x", 100<<10)))))
}

// TestStalledBodiesHoldLittle: senders that declare large bodies and then
// send (almost) nothing hold only a first piece of the ingest budget, so a
// real capture is still admitted at once; and they are cut off once their
// body falls behind the minimum rate.
func TestStalledBodiesHoldLittle(t *testing.T) {
	const stalled = 8
	budget := admission.New(4 << 20)
	e := newEnv(t, func(h *Handler, _ *http.Server) { h.budget, h.admissionWait = budget, 50*time.Millisecond })
	// Each declares 1 MiB, the free plan's most: together twice the budget.
	conns := make([]net.Conn, stalled)
	for i := range conns {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "POST /"+e.endpoint.ID+" HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\nabc")
		conns[i] = c
	}
	// Their requests have reached the handler once the next one on a
	// connection of their own is answered; then a real capture must be
	// admitted while they stall.
	e.captured(e.do(e.newRequest("POST", e.base, strings.NewReader("first"))))
	e.captured(e.do(e.newRequest("POST", e.base, strings.NewReader(strings.Repeat("x", 512<<10)))))
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("stalled sender %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "arrived too slowly") {
			t.Errorf("stalled sender %d got %d %s, want 400 saying the body arrived too slowly", i, resp.StatusCode, b)
		}
	}
	if n := e.stored(); n != 2 {
		t.Errorf("%d stored, want the 2 real captures", n)
	}
}

func TestSplitTarget(t *testing.T) {
	tests := []struct {
		uri, id, path, query string
		ok                   bool
	}{
		{"/whe_abc", "whe_abc", "/", "", true},
		{"/whe_abc/x/../y?q=%zz#frag", "whe_abc", "/x/../y", "q=%zz#frag", true},
		{"/whe_abc?x/y", "whe_abc", "/", "x/y", true},
		{"https://h:1/whe_abc/p", "whe_abc", "/p", "", true},
		{"https://h:1?/whe_abc", "", "", "", false},
		{"http://h", "", "", "", false},
		{"/whe_", "", "", "", false},
		{"/whe_a-b", "", "", "", false},
		{"/whe_" + strings.Repeat("a", 65), "", "", "", false},
		{"/wha_abc", "", "", "", false},
		{"*", "", "", "", false},
		{"example.com:443", "", "", "", false},
		{"", "", "", "", false},
	}
	for _, tt := range tests {
		id, path, query, ok := splitTarget(tt.uri)
		if id != tt.id || path != tt.path || query != tt.query || ok != tt.ok {
			t.Errorf("splitTarget(%q) = %q %q %q %v, want %q %q %q %v", tt.uri, id, path, query, ok, tt.id, tt.path, tt.query, tt.ok)
		}
	}
}

// headerValues returns the values stored under a header name.
func headerValues(hs []store.Header, name string) []string {
	for _, h := range hs {
		if strings.EqualFold(h.Name, name) {
			return h.Values
		}
	}
	return nil
}

// Changes made by another process (an admin command: here a second store
// on the same file) reach the very next capture.
func TestSettingsFromAnotherProcessApplyAtOnce(t *testing.T) {
	e := newEnv(t, nil)
	other := storetest.OpenAgain(t, e.st)
	e.captured(e.do(e.newRequest("POST", e.base, strings.NewReader("cached"))))

	status, body := 201, "made"
	if _, err := other.UpdateEndpoint(t.Context(), e.endpoint.ID, store.EndpointUpdate{Status: &status, Body: &body}); err != nil {
		t.Fatal(err)
	}
	if resp, got := e.do(e.newRequest("POST", e.base, strings.NewReader("x"))); resp.StatusCode != 201 || string(got) != "made" {
		t.Errorf("after endpoint set elsewhere: %s %q", resp.Status, got)
	}
	// A body only a larger plan accepts, right after the upgrade.
	big := bytes.Repeat([]byte("x"), 2<<20)
	if resp, b := e.do(e.newRequest("POST", e.base, bytes.NewReader(big))); resp.StatusCode != 413 {
		t.Fatalf("2 MiB on free: %s %s", resp.Status, b)
	}
	if _, err := other.SetPlan(t.Context(), e.project.ID, "pro"); err != nil {
		t.Fatal(err)
	}
	if resp, got := e.do(e.newRequest("POST", e.base, bytes.NewReader(big))); resp.StatusCode != 201 {
		t.Errorf("2 MiB right after the upgrade elsewhere: %s %.80s", resp.Status, got)
	}
	if _, err := other.SetPlan(t.Context(), e.project.ID, "free"); err != nil {
		t.Fatal(err)
	}
	if resp, b := e.do(e.newRequest("POST", e.base, bytes.NewReader(big))); resp.StatusCode != 413 {
		t.Errorf("2 MiB right after the downgrade elsewhere: %s %s", resp.Status, b)
	}
}
