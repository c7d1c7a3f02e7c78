package forward_test

import (
	"bufio"
	"io"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capturedev/capture/forward/internal/capturetest"
	"github.com/capturedev/capture/server/api/contract"
)

// rawHit is the head of one request as it came over the wire, before any
// HTTP server library could add, drop or normalise a header.
type rawHit struct {
	line   string
	header textproto.MIMEHeader
	body   []byte
}

// rawHandler is a local handler that reads each request's head off the
// connection itself and answers 200 with the connection closed.
type rawHandler struct {
	URL    string
	status string // the status line it answers with
	mu     sync.Mutex
	hits   []rawHit
	more   chan struct{}
}

func newRawHandler(t *testing.T) *rawHandler { return newRawHandlerAnswering(t, "HTTP/1.1 200 OK") }

// newRawHandlerAnswering is a rawHandler answering with the status line
// given, whatever bytes it holds.
func newRawHandlerAnswering(t *testing.T, status string) *rawHandler {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &rawHandler{URL: "http://" + ln.Addr().String(), status: status, more: make(chan struct{})}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { h.serve(conn) })
		}
	})
	return h
}

func (h *rawHandler) serve(conn net.Conn) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(waitTimeout))
	r := textproto.NewReader(bufio.NewReader(conn))
	line, err := r.ReadLine()
	if err != nil {
		return
	}
	header, err := r.ReadMIMEHeader()
	if err != nil {
		return
	}
	// The requests of these tests have no body or a Content-Length.
	n, _ := strconv.Atoi(header.Get("Content-Length"))
	body := make([]byte, n)
	if _, err := io.ReadFull(r.R, body); err != nil {
		return
	}
	// Recorded before it is answered: the client sends the next request
	// only then, so hits stay in the order the requests were sent.
	h.mu.Lock()
	h.hits = append(h.hits, rawHit{line, header, body})
	close(h.more)
	h.more = make(chan struct{})
	h.mu.Unlock()
	io.WriteString(conn, h.status+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
}

func (h *rawHandler) waitFor(t *testing.T, n int) []rawHit {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		hits, more := append([]rawHit(nil), h.hits...), h.more
		h.mu.Unlock()
		if len(hits) >= n {
			return hits
		}
		select {
		case <-more:
		case <-deadline.C:
			t.Fatalf("handler got %d requests within %s, want %d", len(hits), waitTimeout, n)
		}
	}
}

// An empty delivery carries "Content-Length: 0" exactly when the capture
// did (never on a GET or HEAD), and no Transfer-Encoding: net/http alone
// would add the header to every empty POST, PUT and PATCH, and Python's
// http.client to any request given a body, even an empty one.
func TestForwardEmptyBodyFraming(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		h := newRawHandler(t)
		s := c.start(t, opts{api: srv.APIBase, key: srv.Key, endpoint: srv.EndpointID, to: h.URL})
		s.ready(t)

		type sent struct {
			method     string
			withLength bool
		}
		var want []sent
		for _, method := range []string{"PUT", "POST", "PATCH", "DELETE", "PURGE", "OPTIONS", "GET"} {
			for _, withLength := range []bool{false, true} {
				raw := method + " /{endpoint}/empty HTTP/1.1\r\nHost: sender.example\r\nX-Case: " + method + "\r\n"
				if withLength {
					raw += "Content-Length: 0\r\n"
				}
				srv.PostRaw(t, raw+"\r\n")
				want = append(want, sent{method, withLength})
			}
		}

		hits := h.waitFor(t, len(want))
		for i, w := range want {
			got := hits[i]
			if got.line != w.method+" /empty HTTP/1.1" {
				t.Errorf("hit %d request line %q, want %s /empty", i, got.line, w.method)
				continue
			}
			lengths, hasLength := got.header["Content-Length"]
			wantLength := w.withLength && w.method != "GET"
			if hasLength != wantLength || hasLength && (len(lengths) != 1 || lengths[0] != "0") {
				t.Errorf("%s captured with Content-Length %v: delivered with Content-Length %q, want it %v",
					w.method, w.withLength, lengths, wantLength)
			}
			if te := got.header.Get("Transfer-Encoding"); te != "" || len(got.body) != 0 {
				t.Errorf("%s delivered with Transfer-Encoding %q and body %q, want neither", w.method, te, got.body)
			}
			// Nothing added: the captured X-Case and Host set to the target.
			var names []string
			for name := range got.header {
				names = append(names, name)
			}
			for _, name := range names {
				switch name {
				case "Host", "X-Case", "Content-Length":
				default:
					t.Errorf("%s delivered with %s: %q, which the capture lacked", w.method, name, got.header[name])
				}
			}
			if got.header.Get("X-Case") != w.method || got.header.Get("Host") != strings.TrimPrefix(h.URL, "http://") {
				t.Errorf("%s delivered with headers %v", w.method, got.header)
			}
		}
	})
}

// A capture is delivered with its bytes: a request line with raw UTF-8 in
// its path and query, header values in UTF-8 (which http.client would
// write as Latin-1, or refuse), and a value that was not UTF-8, which the
// API carries as U+FFFD and both clients send alike. The deliveries are
// recorded as made.
func TestForwardExactBytes(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		api := srv.Client()
		h := newRawHandler(t)
		s := c.start(t, opts{api: srv.APIBase, key: srv.Key, endpoint: srv.EndpointID, to: h.URL + "/base"})
		s.ready(t)

		line := srv.PostRaw(t, "POST /{endpoint}/ci/İstanbul/ü?q=ä HTTP/1.1\r\nHost: sender.example\r\nContent-Length: 2\r\n\r\nok")
		header := srv.PostRaw(t, "POST /{endpoint}/header HTTP/1.1\r\nHost: sender.example\r\n"+
			"X-Customer: 山田\r\nX-Name: Zoë\r\nX-Latin: Zo\xeb\r\nContent-Length: 0\r\n\r\n")
		latin := getRequest(t, api, header).Headers.Get("X-Latin")

		for i, e := range s.waitDeliveries(t, 2) {
			if e["error"] != nil || e["status"] != float64(200) {
				t.Errorf("delivery %d = %v", i, e)
			}
			ds := waitRecorded(t, api, e["request_id"].(string), 1)
			if d := ds[0]; d.Status != contract.StatusDelivered || d.Error != nil || d.ResponseStatus == nil {
				t.Errorf("recorded delivery of %s = %+v (error %v), want delivered", e["request_id"], d, strOf(d.Error))
			}
		}
		if t.Failed() {
			return
		}
		hits := h.waitFor(t, 2)
		if want := "POST /base/ci/\xc4\xb0stanbul/\xc3\xbc?q=\xc3\xa4 HTTP/1.1"; hits[0].line != want {
			t.Errorf("request line %q, want %q", hits[0].line, want)
		}
		if string(hits[0].body) != "ok" {
			t.Errorf("body %q, want ok", hits[0].body)
		}
		if got := hits[1].header.Get("X-Customer"); got != "\xe5\xb1\xb1\xe7\x94\xb0" {
			t.Errorf("X-Customer %q, want the captured UTF-8 山田", got)
		}
		if got := hits[1].header.Get("X-Name"); got != "Zo\xc3\xab" {
			t.Errorf("X-Name %q, want the captured UTF-8 Zoë", got)
		}
		if latin != "Zo\uFFFD" {
			t.Errorf("the API gives the captured Latin-1 value as %q, want the bytes that are not UTF-8 as U+FFFD", latin)
		}
		if got := hits[1].header.Get("X-Latin"); got != latin {
			t.Errorf("X-Latin %q, want %q as the API gives it", got, latin)
		}
		if want := h.URL + "/base/ci/%C4%B0stanbul/%C3%BC?q=%C3%A4"; waitRecorded(t, api, line, 1)[0].TargetURL != want {
			t.Errorf("recorded target %q, want %q", waitRecorded(t, api, line, 1)[0].TargetURL, want)
		}
	})
}

func strOf(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
