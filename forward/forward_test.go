package forward_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capturedev/capture/forward"
	"github.com/capturedev/capture/forward/internal/capturetest"
	"github.com/capturedev/capture/server/api/contract"
)

// connectionHeaders are never forwarded, nor the headers a captured
// Connection header names; Host and Content-Length follow the new request.
var connectionHeaders = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Host", "Content-Length", "X-Hop"}

func TestForwardRequests(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		h := newHandler(t, nil)
		to := h.URL + "/base"
		s := c.start(t, opts{api: srv.APIBase, key: srv.Key, endpoint: srv.EndpointID, to: to})
		ready := s.ready(t)
		if ready["endpoint"] != srv.EndpointID || ready["to"] != to || ready["baseline"] != nil ||
			ready["api"] != srv.APIBase || ready["capture_url"] != srv.CaptureBase+"/"+srv.EndpointID {
			t.Errorf("ready = %v", ready)
		}

		// uri is what the handler gets after the base path, "" for target
		// (and for the bare capture URL, which goes to the base path as
		// given: /base, not /base/).
		type sent struct {
			id, method, target string
			body               []byte
			uri                string
		}
		var want []sent
		post := func(method, target string, header http.Header, body []byte) {
			want = append(want, sent{srv.Post(t, method, target, header, body), method, target, body, ""})
		}
		raw := "POST /{endpoint}/raw/path?z=%20&a=1 HTTP/1.1\r\n" +
			"Host: sender.example\r\n" +
			"Connection: keep-alive, X-Hop\r\n" +
			"X-Hop: named by Connection\r\n" +
			"Keep-Alive: timeout=5\r\n" +
			"Proxy-Authorization: Basic eDp5\r\n" +
			"Te: trailers\r\n" +
			"Upgrade: websocket\r\n" +
			"X-Keep: yes\r\n" +
			"Content-Type: text/plain\r\n" +
			"Content-Length: 5\r\n\r\nhello"
		want = append(want, sent{srv.PostRaw(t, raw), "POST", "/raw/path?z=%20&a=1", []byte("hello"), ""})
		post("PUT", "/ci/42/hook?x=1&y=%2F", http.Header{"X-Multi": {"1", "2"}, "Content-Type": {"application/json"}}, []byte(`{"a":1}`))
		post("GET", "", nil, nil)
		post("POST", "?x=1", nil, []byte("bare"))
		post("DELETE", "/a%2Fb/c", nil, nil)
		post("PATCH", "/p?flag", http.Header{"User-Agent": {"sender/1.0"}}, []byte("x"))
		post("PURGE", "/custom-method", nil, nil)
		// A path that climbs stays under the handler's base path.
		climb := "GET /{endpoint}/a/../../%2e%2E/admin?q HTTP/1.1\r\nHost: sender.example\r\n\r\n"
		want = append(want, sent{srv.PostRaw(t, climb), "GET", "/a/../../%2e%2E/admin?q", nil, "/admin?q"})

		hits := h.waitFor(t, len(want))
		if len(hits) != len(want) {
			t.Fatalf("handler got %v", uris(hits))
		}
		api := srv.Client()
		// uriOf is what the handler gets after the base path.
		uriOf := func(w sent) string {
			if w.uri != "" {
				return w.uri
			}
			return w.target
		}
		for i, w := range want {
			got := hits[i]
			if got.Method != w.method || got.URI != "/base"+uriOf(w) {
				t.Errorf("hit %d = %s %s, want %s /base%s", i, got.Method, got.URI, w.method, uriOf(w))
			}
			if got.Host != h.Host {
				t.Errorf("hit %d Host = %q, want the target %q", i, got.Host, h.Host)
			}
			if !bytes.Equal(got.Body, w.body) {
				t.Errorf("hit %d body = %q, want %q", i, got.Body, w.body)
			}
			// Every captured header but the connection ones arrives,
			// values in order, and nothing else.
			captured := getRequest(t, api, w.id).Headers.HTTP()
			for _, name := range connectionHeaders {
				delete(captured, name)
			}
			received := got.Header.Clone()
			delete(received, "Content-Length")
			if fmt.Sprint(received) != fmt.Sprint(captured) {
				t.Errorf("hit %d headers:\n got %v\nwant %v", i, received, captured)
			}
		}
		if hits[0].Header.Get("X-Keep") != "yes" || hits[0].Header.Get("Upgrade") != "" || hits[0].Header.Get("X-Hop") != "" {
			t.Errorf("hop-by-hop filtering: %v", hits[0].Header)
		}
		if !slices.Equal(hits[1].Header["X-Multi"], []string{"1", "2"}) {
			t.Errorf("X-Multi = %q", hits[1].Header["X-Multi"])
		}

		events := s.waitDeliveries(t, len(want))
		for i, w := range want {
			e := events[i]
			target, uri := w.target, uriOf(w)
			if target == "" || strings.HasPrefix(target, "?") {
				target = "/" + target
			}
			if e["request_id"] != w.id || e["method"] != w.method || e["path"] != target || e["url"] != to+uri ||
				e["status"] != float64(200) || e["error"] != nil || e["error_class"] != nil ||
				e["bytes"] != float64(len(w.body)) {
				t.Errorf("delivery %d = %v", i, e)
			}
			if d, ok := e["duration_ms"].(float64); !ok || d < 0 {
				t.Errorf("delivery %d duration_ms = %v", i, e["duration_ms"])
			}
			if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(e["time"])); err != nil {
				t.Errorf("delivery %d time = %v", i, e["time"])
			}
			ds := waitRecorded(t, api, w.id, 1)
			d := ds[0]
			if len(ds) != 1 || d.Kind != contract.KindForward || d.Status != contract.StatusDelivered ||
				d.ResponseStatus == nil || *d.ResponseStatus != 200 || d.Error != nil || d.TargetURL != to+uri {
				t.Errorf("recorded delivery of %s = %+v", w.id, ds)
			}
		}

		if code := s.stop(t); code != 0 {
			t.Errorf("exit code after interrupt = %d, want 0; stderr:\n%s", code, s.stderr)
		}
		all := s.events(t)
		last := all[len(all)-1]
		if last["type"] != "summary" || last["deliveries"] != float64(len(want)) || last["ok"] != float64(len(want)) {
			t.Errorf("last line = %v, want the summary", last)
		}
		if strings.Contains(s.stderr.String(), "warning") {
			t.Errorf("unexpected warnings:\n%s", s.stderr)
		}
	})
}

// A capture of the bare capture URL goes to the handler's base path as
// given: with a trailing slash when --to has one (and to / without a
// path), as `stripe listen --forward-to` delivers.
func TestForwardBareCaptureURL(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		h := newHandler(t, nil)
		for _, tt := range []struct{ to, want string }{
			{h.URL + "/webhook/", "/webhook/?x=1"},
			{h.URL, "/?x=1"},
		} {
			s := c.start(t, opts{api: srv.APIBase, key: srv.Key, endpoint: srv.EndpointID, to: tt.to})
			s.ready(t)
			id := srv.Post(t, "POST", "?x=1", nil, nil)
			e := s.waitDeliveries(t, 1)[0]
			if e["request_id"] != id || e["path"] != "/?x=1" || e["url"] != h.URL+tt.want {
				t.Errorf("--to %s: delivery %v, want to %s", tt.to, e, h.URL+tt.want)
			}
			s.stop(t)
		}
		if got := uris(h.waitFor(t, 2)); !slices.Equal(got, []string{"POST /webhook/?x=1", "POST /?x=1"}) {
			t.Errorf("handler got %v", got)
		}
	})
}

// A --to path with characters a URL escapes (a space, é) is escaped as
// Go's net/url escapes it, by either client: the handler gets the
// escaped path, and the delivery names that URL.
func TestForwardEscapedTarget(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		h := newHandler(t, nil)
		cases := []struct{ to, base, want string }{
			{h.Host + "/a b/", "/a%20b/", "/a%20b/p"},
			{h.Host + "/é", "/%C3%A9", "/%C3%A9/p"},
			{h.Host + "/ok%20already/", "/ok%20already/", "/ok%20already/p"},
		}
		for _, tt := range cases {
			s := c.start(t, opts{api: srv.APIBase, key: srv.Key, endpoint: srv.EndpointID, to: tt.to})
			if ready := s.ready(t); ready["to"] != h.URL+tt.base {
				t.Errorf("--to %s: ready %v, want to %s", tt.to, ready, h.URL+tt.base)
			}
			id := srv.Post(t, "POST", "/p", nil, nil)
			e := s.waitDeliveries(t, 1)[0]
			if e["request_id"] != id || e["url"] != h.URL+tt.want || e["status"] != float64(200) {
				t.Errorf("--to %s: delivery %v, want 200 from %s", tt.to, e, h.URL+tt.want)
			}
			s.stop(t)
		}
		want := []string{"POST /a%20b/p", "POST /%C3%A9/p", "POST /ok%20already/p"}
		if got := uris(h.waitFor(t, len(cases))); !slices.Equal(got, want) {
			t.Errorf("handler got %v, want %v", got, want)
		}
	})
}

func TestForwardReplayLast(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		h := newHandler(t, nil)
		old := []string{
			srv.Post(t, "POST", "/old/1", nil, []byte("1")),
			srv.Post(t, "POST", "/old/2", nil, []byte("2")),
			srv.Post(t, "POST", "/old/3", nil, []byte("3")),
		}
		checked := srv.CheckedAPI(t)
		s := c.start(t, opts{api: checked.APIBase, key: srv.Key, endpoint: srv.EndpointID, to: h.URL, replayLast: 2})
		if ready := s.ready(t); ready["baseline"] != old[2] || ready["replay_last"] != float64(2) {
			t.Errorf("ready = %v", ready)
		}
		h.waitFor(t, 2)
		srv.Post(t, "POST", "/new", nil, []byte("4"))
		hits := h.waitFor(t, 3)
		if got := uris(hits); !slices.Equal(got, []string{"POST /old/2", "POST /old/3", "POST /new"}) {
			t.Errorf("delivered %v, want the 2 newest existing oldest first, then the new one", got)
		}
	})
}

// TestForwardCountsFromItsStart: a request captured after the client was
// started, while it was still checking the key, is forwarded; the
// requests captured before it was started are the baseline.
func TestForwardCountsFromItsStart(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		h := newHandler(t, nil)
		old := srv.Post(t, "POST", "/old", nil, []byte("old"))
		// Capture times are kept in milliseconds: the client must start in
		// a later one for the old request to be unambiguously before it.
		oldAt := getRequest(t, srv.Client(), old).ReceivedAt.Time
		for !time.Now().Truncate(time.Millisecond).After(oldAt) {
			runtime.Gosched()
		}
		// Holds the client's first call, GET /me, until a request has been
		// captured behind its back.
		upstream, err := url.Parse(srv.APIBase)
		if err != nil {
			t.Fatal(err)
		}
		asked, release := make(chan struct{}), make(chan struct{})
		var first atomic.Bool
		proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: upstream.Scheme, Host: upstream.Host})
		proxy.ErrorLog = log.New(io.Discard, "", 0) // calls cut short when the test ends
		held := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/me") && first.CompareAndSwap(false, true) {
				close(asked)
				select {
				case <-release:
				case <-time.After(waitTimeout):
				}
			}
			proxy.ServeHTTP(w, r)
		}))
		t.Cleanup(held.Close)

		s := c.start(t, opts{api: held.URL + upstream.Path, key: srv.Key, endpoint: srv.EndpointID, to: h.URL})
		select {
		case <-asked:
		case <-time.After(waitTimeout):
			t.Fatal("the client never asked for /me")
		}
		srv.Post(t, "POST", "/early", nil, []byte("early"))
		close(release)
		if ready := s.ready(t); ready["baseline"] != old {
			t.Errorf("baseline = %v, want %s, the newest captured before the start", ready["baseline"], old)
		}
		h.waitFor(t, 1)
		srv.Post(t, "POST", "/late", nil, []byte("late"))
		if got := uris(h.waitFor(t, 2)); !slices.Equal(got, []string{"POST /early", "POST /late"}) {
			t.Errorf("delivered %v, want the one captured during the start, then the later one", got)
		}
	})
}

// TestForwardConnectionPerDelivery: each delivery goes on a connection of
// its own. Handlers that write the head and the body of their answer
// apart (Python's http.server, and so Flask's and Django's development
// servers) have the body held by Nagle's algorithm until the client
// acknowledges the head, which on a reused connection Linux delays by up
// to 40 ms: a burst then crawled at about 25 deliveries a second. A new
// connection acknowledges at once.
func TestForwardConnectionPerDelivery(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		var conns atomic.Int32
		h := &handler{changed: make(chan struct{})}
		hs := httptest.NewUnstartedServer(h)
		hs.Config.ConnState = func(_ net.Conn, state http.ConnState) {
			if state == http.StateNew {
				conns.Add(1)
			}
		}
		hs.Start()
		t.Cleanup(hs.Close)
		s := c.start(t, opts{api: srv.APIBase, key: srv.Key, endpoint: srv.EndpointID, to: hs.URL})
		s.ready(t)
		for i := range 3 {
			srv.Post(t, "POST", fmt.Sprintf("/%d", i), nil, nil)
			h.waitFor(t, i+1)
		}
		if n := conns.Load(); n != 3 {
			t.Errorf("3 deliveries on %d connections, want one each", n)
		}
	})
}

func TestForwardBurst(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		release := make(chan struct{})
		// The handler holds the first delivery, and so the client, until
		// the whole burst is captured: it must then be found in one pull.
		h := newHandler(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/gate" {
				select {
				case <-release:
				case <-time.After(waitTimeout):
				}
			}
		})
		s := c.start(t, opts{api: srv.APIBase, key: srv.Key, endpoint: srv.EndpointID, to: h.URL})
		s.ready(t)
		srv.Post(t, "POST", "/gate", nil, nil)
		h.waitFor(t, 1)
		const burst = 130
		want := []string{"POST /gate"}
		for i := range burst {
			srv.Post(t, "POST", fmt.Sprintf("/burst/%d", i), nil, []byte(fmt.Sprint(i)))
			want = append(want, fmt.Sprintf("POST /burst/%d", i))
		}
		close(release)
		hits := h.waitFor(t, burst+1)
		if got := uris(hits); !slices.Equal(got, want) {
			t.Errorf("delivered %d in this order:\n%v\nwant %d in capture order", len(got), got, len(want))
		}
		s.waitDeliveries(t, burst+1)
		if n := len(s.deliveries(t)); n != burst+1 {
			t.Errorf("%d delivery lines, want %d", n, burst+1)
		}
	})
}

func TestForwardBinaryBodies(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		h := newHandler(t, nil)
		checked := srv.CheckedAPI(t)
		s := c.start(t, opts{api: checked.APIBase, key: srv.Key, endpoint: srv.EndpointID, to: h.URL})
		s.ready(t)
		every := make([]byte, 256)
		for i := range every {
			every[i] = byte(i)
		}
		large := make([]byte, 200<<10)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range large {
			large[i] = byte(rng.Uint32())
		}
		bodies := [][]byte{every, []byte("héllo ✓ \x00 \"quoted\"\n"), {}, large, {0xc3}}
		for i, b := range bodies {
			srv.Post(t, "POST", fmt.Sprintf("/body/%d", i), http.Header{"Content-Type": {"application/octet-stream"}}, b)
		}
		hits := h.waitFor(t, len(bodies))
		for i, b := range bodies {
			if !bytes.Equal(hits[i].Body, b) || hits[i].Length != int64(len(b)) {
				t.Errorf("body %d: got %d bytes (Content-Length %d), want %d byte for byte", i, len(hits[i].Body), hits[i].Length, len(b))
			}
		}
		for i, e := range s.waitDeliveries(t, len(bodies)) {
			if e["bytes"] != float64(len(bodies[i])) {
				t.Errorf("delivery %d bytes = %v, want %d", i, e["bytes"], len(bodies[i]))
			}
		}
	})
}

func TestForwardFailingHandler(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		api := srv.Client()
		h := newHandler(t, func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/fail") {
				http.Error(w, "broken", http.StatusInternalServerError)
			}
		})
		s := c.start(t, opts{api: srv.APIBase, key: srv.Key, endpoint: srv.EndpointID, to: h.URL})
		s.ready(t)
		failed := srv.Post(t, "POST", "/fail", nil, []byte("x"))
		marker := srv.Post(t, "POST", "/ok", nil, []byte("y"))
		h.waitFor(t, 2)
		waitRecorded(t, api, marker, 1)
		// The marker came after the failure: had the failure been retried,
		// it would show by now.
		if got := uris(h.got()); !slices.Equal(got, []string{"POST /fail", "POST /ok"}) {
			t.Errorf("handler got %v, want the failure once, then the marker", got)
		}
		ds := getRequest(t, api, failed).Deliveries
		if len(ds) != 1 || ds[0].Kind != contract.KindForward || ds[0].Status != contract.StatusFailed ||
			ds[0].ResponseStatus == nil || *ds[0].ResponseStatus != 500 {
			t.Errorf("recorded deliveries of the failure = %+v", ds)
		}
		if e := s.deliveries(t)[0]; e["status"] != float64(500) || e["error"] != nil {
			t.Errorf("delivery of the failure = %v", e)
		}
		if strings.Contains(s.stderr.String(), "unreachable") {
			t.Errorf("a 500 is an answer, not an unreachable handler:\n%s", s.stderr)
		}
		s.stop(t)

		// Nothing listens at the target: refused, reported once, recorded,
		// not retried.
		s = c.start(t, opts{api: srv.APIBase, key: srv.Key, endpoint: srv.EndpointID, to: "http://" + capturetest.ClosedAddr(t)})
		s.ready(t)
		refused := srv.Post(t, "POST", "/refused/1", nil, []byte("x"))
		events := s.waitDeliveries(t, 1)
		if e := events[0]; e["request_id"] != refused || e["status"] != nil || e["error_class"] != "refused" || e["error"] == nil {
			t.Errorf("delivery to a closed port = %v", e)
		}
		second := srv.Post(t, "POST", "/refused/2", nil, []byte("y"))
		s.waitDeliveries(t, 2)
		waitRecorded(t, api, second, 1)
		ds = getRequest(t, api, refused).Deliveries
		if len(ds) != 1 || ds[0].Status != contract.StatusFailed || ds[0].ResponseStatus != nil ||
			ds[0].Error == nil || !strings.Contains(*ds[0].Error, "refused") {
			t.Errorf("recorded deliveries of the refused one = %+v", ds)
		}
		if n := strings.Count(s.stderr.String(), "unreachable"); n != 1 {
			t.Errorf("%d unreachable warnings for two failures in a row, want 1:\n%s", n, s.stderr)
		}
	})
}

func TestForwardInvalidCursor(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		api := srv.Client()
		ctx := context.Background()
		h := newHandler(t, nil)
		baseline := srv.Post(t, "POST", "/baseline", nil, nil)
		checked := srv.CheckedAPI(t)
		s := c.start(t, opts{api: checked.APIBase, key: srv.Key, endpoint: srv.EndpointID, to: h.URL})
		if ready := s.ready(t); ready["baseline"] != baseline {
			t.Fatalf("ready = %v", ready)
		}

		x := srv.Post(t, "POST", "/x", nil, nil)
		h.waitFor(t, 1)
		waitRecorded(t, api, x, 1)
		// The cursor is now x; deleting it makes the next pull fail with
		// invalid_cursor. y, captured meanwhile, is still delivered.
		if err := api.DeleteRequest(ctx, x); err != nil {
			t.Fatal(err)
		}
		y := srv.Post(t, "POST", "/y", nil, nil)
		h.waitFor(t, 2)
		s.stderr.waitContains(t, "no longer exists", 1)
		waitRecorded(t, api, y, 1)

		// Deleting y too leaves the old baseline as the newest: a new
		// baseline, and nothing delivered again.
		if err := api.DeleteRequest(ctx, y); err != nil {
			t.Fatal(err)
		}
		s.stderr.waitContains(t, "no longer exists", 2)
		srv.Post(t, "POST", "/z", nil, nil)
		hits := h.waitFor(t, 3)
		if got := uris(hits); !slices.Equal(got, []string{"POST /x", "POST /y", "POST /z"}) {
			t.Errorf("delivered %v, want x, y, z once each", got)
		}
		if n := len(s.waitDeliveries(t, 3)); n != 3 {
			t.Errorf("%d delivery lines, want 3", n)
		}
		if !strings.Contains(s.stderr.String(), "new baseline: "+baseline) {
			t.Errorf("stderr does not name the new baseline %s:\n%s", baseline, s.stderr)
		}
		// Every route the client uses was checked against the OpenAPI
		// document, the invalid_cursor answer included.
		for _, exchange := range []string{"GET /api/v1/me 200", "GET /api/v1/endpoints 200",
			"GET /api/v1/endpoints/{id}/requests 200", "GET /api/v1/endpoints/{id}/requests 400",
			"GET /api/v1/requests/{id} 200", "POST /api/v1/requests/{id}/deliveries 201"} {
			if checked.Seen(exchange) == 0 {
				t.Errorf("no %s exchange went through the check", exchange)
			}
		}
	})
}

func TestForwardAPIDown(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		h := newHandler(t, nil)
		s := c.start(t, opts{api: srv.APIBase, key: srv.Key, endpoint: srv.EndpointID, to: h.URL})
		s.ready(t)
		before := srv.Post(t, "POST", "/before", nil, nil)
		h.waitFor(t, 1)
		waitRecorded(t, srv.Client(), before, 1)

		srv.Stop(t)
		s.stderr.waitContains(t, "cannot reach the API", 1)
		srv.Restart(t)
		srv.Post(t, "POST", "/after", nil, nil)
		hits := h.waitFor(t, 2)
		if got := uris(hits); !slices.Equal(got, []string{"POST /before", "POST /after"}) {
			t.Errorf("delivered %v", got)
		}
		s.stderr.waitContains(t, "API answers again", 1)
		if n := strings.Count(s.stderr.String(), "cannot reach the API"); n != 1 {
			t.Errorf("%d unreachable lines, want one for the whole outage:\n%s", n, s.stderr)
		}
	})
}

// When the API answers again, the client says so before it delivers what
// was captured meanwhile, naming the cursor it resumes after: the last
// request delivered before the outage.
func TestForwardResumeLine(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		upstream, err := url.Parse(srv.HTTPBase)
		if err != nil {
			t.Fatal(err)
		}
		rp := httputil.NewSingleHostReverseProxy(upstream)
		// While down, the API's connections are cut without an answer.
		var down atomic.Bool
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if down.Load() {
				if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
					conn.Close()
				}
				return
			}
			rp.ServeHTTP(w, r)
		}))
		defer proxy.Close()

		var s *session
		const resumed = "API answers again"
		// toldFirst says whether the line came before the delivery after
		// the outage reached the handler. The wait for it is short: the
		// client waits on this answer, and a line it wrote only after
		// giving up on it (30 s) must not count.
		toldFirst := make(chan bool, 1)
		h := newHandler(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/during" {
				toldFirst <- s.stderr.hasWithin(resumed, 2*time.Second)
			}
		})
		s = c.start(t, opts{api: proxy.URL + "/api/v1", key: srv.Key, endpoint: srv.EndpointID, to: h.URL})
		s.ready(t)
		before := srv.Post(t, "POST", "/before", nil, nil)
		h.waitFor(t, 1)
		waitRecorded(t, srv.Client(), before, 1)

		down.Store(true)
		s.stderr.waitContains(t, "cannot reach the API", 1)
		during := srv.Post(t, "POST", "/during", nil, nil)
		down.Store(false)
		h.waitFor(t, 2)
		if !<-toldFirst {
			t.Errorf("the delivery of %s reached the handler before the client said the API answers again; stderr:\n%s", during, s.stderr)
		}
		want := resumed + "; resuming after " + before
		if got := s.stderr.waitContains(t, resumed, 1); !strings.Contains(got, want+"\n") {
			t.Errorf("stderr:\n%s\nwant the line %q", got, want)
		}
	})
}

// An answer that asks to come back later (429, 503) is waited out as
// Retry-After says, and the capture still delivered once.
func TestForwardComeBackLater(t *testing.T) {
	for _, tt := range []struct {
		status     int
		code, line string
	}{
		{http.StatusTooManyRequests, contract.CodeRateLimited, "rate limit"},
		{http.StatusServiceUnavailable, contract.CodeUnavailable, "unavailable"},
	} {
		t.Run(tt.code, func(t *testing.T) {
			both(t, func(t *testing.T, c client) {
				srv := capturetest.Start(t)
				upstream, err := url.Parse(srv.HTTPBase)
				if err != nil {
					t.Fatal(err)
				}
				rp := httputil.NewSingleHostReverseProxy(upstream)
				// The first two fetches of a capture are turned away.
				var refused atomic.Int32
				proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method == "GET" && strings.Contains(r.URL.Path, "/requests/") && refused.Add(1) <= 2 {
						contract.WriteError(w, &contract.Error{Code: tt.code, Message: "later", RetryAfter: time.Second})
						return
					}
					rp.ServeHTTP(w, r)
				}))
				defer proxy.Close()
				h := newHandler(t, nil)
				s := c.start(t, opts{api: proxy.URL + "/api/v1", key: srv.Key, endpoint: srv.EndpointID, to: h.URL})
				s.ready(t)
				posted := time.Now()
				id := srv.Post(t, "POST", "/limited", nil, []byte("x"))
				h.waitFor(t, 1)
				if waited := time.Since(posted); waited < 2*time.Second {
					t.Errorf("delivered %s after capture, want at least the two Retry-After waits of 1 s", waited)
				}
				waitRecorded(t, srv.Client(), id, 1)
				if n := len(h.got()); n != 1 {
					t.Errorf("handler got %d requests, want 1", n)
				}
				if !strings.Contains(s.stderr.String(), tt.line) {
					t.Errorf("no %q status line:\n%s", tt.line, s.stderr)
				}
			})
		})
	}
}

func TestForwardBadStart(t *testing.T) {
	srv := capturetest.Start(t)
	tests := []struct {
		name string
		o    opts
		want string
	}{
		{"bad key", opts{api: srv.APIBase, key: "cap_notakey", endpoint: srv.EndpointID}, "refused the key"},
		{"unknown endpoint", opts{api: srv.APIBase, key: srv.Key, endpoint: "whe_unknown"}, "endpoint whe_unknown not found"},
		{"unreachable API", opts{api: "http://" + capturetest.ClosedAddr(t) + "/api/v1", key: srv.Key, endpoint: srv.EndpointID}, "cannot reach the API"},
		{"interval out of range", opts{api: srv.APIBase, key: srv.Key, endpoint: srv.EndpointID, interval: 61}, "60"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			both(t, func(t *testing.T, c client) {
				h := newHandler(t, nil)
				o := tt.o
				o.to = h.URL
				s := c.start(t, o)
				if code := s.wait(t); code != 2 {
					t.Errorf("exit code %d, want 2; stderr:\n%s", code, s.stderr)
				}
				// One line; argparse puts its usage before it.
				lines := strings.Split(strings.TrimSpace(s.stderr.String()), "\n")
				if !strings.Contains(lines[len(lines)-1], tt.want) {
					t.Errorf("stderr = %q, want one clear line with %q", s.stderr, tt.want)
				}
				if len(h.got()) != 0 {
					t.Error("something was delivered")
				}
			})
		})
	}

	t.Run("python flags and key", func(t *testing.T) {
		t.Parallel()
		script := pythonScript(t)
		cases := []struct {
			name string
			env  []string
			args []string
			want string
		}{
			{"interval 0", pythonEnv(t, srv.Key, ""), []string{"--endpoint", srv.EndpointID, "--to", "localhost:1", "--interval", "0"}, "--interval"},
			{"missing --to", pythonEnv(t, srv.Key, ""), []string{"--endpoint", srv.EndpointID}, "--to"},
			{"no key anywhere", pythonEnv(t, "", ""), []string{"--api", srv.APIBase, "--endpoint", srv.EndpointID, "--to", "localhost:1"}, "no API key: set CAPTURE_API_KEY (or CAPTURE_KEY), or save one in"},
		}
		for _, tc := range cases {
			s := runPython(t, tc.env, append([]string{script}, tc.args...)...)
			if code := s.wait(t); code != 2 || !strings.Contains(s.stderr.String(), tc.want) {
				t.Errorf("%s: exit %d, stderr %q; want 2 and %q", tc.name, code, s.stderr, tc.want)
			}
		}
	})
}

func TestForwardTextOutput(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		h := newHandler(t, nil)
		s := c.start(t, opts{api: srv.APIBase, key: srv.Key, endpoint: srv.EndpointID, to: h.URL, output: forward.OutputText})
		s.stdout.waitContains(t, "Press Ctrl-C to stop.", 1)
		banner := s.stdout.String()
		for _, want := range []string{"Forwarding " + srv.EndpointID + " → " + h.URL, srv.APIBase, "Baseline"} {
			if !strings.Contains(banner, want) {
				t.Errorf("banner lacks %q:\n%s", want, banner)
			}
		}
		id := srv.Post(t, "POST", "/ci/42/hook", nil, bytes.Repeat([]byte("a"), 1024))
		out := s.stdout.waitContains(t, " → ", 2)
		line := regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d ` + id + ` POST /ci/42/hook → 200 OK \d+ ms 1\.0 KiB$`)
		if !line.MatchString(out) {
			t.Errorf("no delivery line like `22:14:03 %s POST /ci/42/hook → 200 OK 12 ms 1.0 KiB` in:\n%s", id, out)
		}
		// A path the sender wrote with C1 controls and a bidi override in
		// raw UTF-8 is shown, not acted on by the terminal.
		hostile := srv.PostRaw(t, "POST /{endpoint}/c1\u009b2J\u009d0;TITLE\u009c\u202eevil HTTP/1.1\r\nHost: sender.example\r\nContent-Length: 0\r\n\r\n")
		out = s.stdout.waitContains(t, " → ", 3)
		if want := " POST /c1\uFFFD2J\uFFFD0;TITLE\uFFFD\uFFFDevil → 200 OK"; !strings.Contains(out, hostile+want) {
			t.Errorf("no delivery line with %q in:\n%q", hostile+want, out)
		}
		if strings.ContainsAny(out, "\u009b\u009d\u009c\u202e") {
			t.Errorf("controls of the path reach the terminal:\n%q", out)
		}
		if code := s.stop(t); code != 0 {
			t.Errorf("exit code %d", code)
		}
		out = s.stdout.String()
		if !strings.Contains(out, "Stopped after") || !strings.Contains(out, "2 forwarded (2 answered 2xx") {
			t.Errorf("no summary:\n%s", out)
		}
		if strings.Contains(out, "\x1b[") {
			t.Errorf("colour in plain output:\n%q", out)
		}
	})
}

func TestForwardColor(t *testing.T) {
	t.Parallel()
	srv := capturetest.Start(t)
	h := newHandler(t, nil)
	out := newOutput()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- forward.Run(ctx, forward.Config{Endpoint: srv.EndpointID, To: h.URL, Interval: time.Second,
			Stdout: out, Stderr: io.Discard, Color: true, Client: srv.Client()})
	}()
	out.waitContains(t, "Press Ctrl-C", 1)
	srv.Post(t, "GET", "/c", nil, nil)
	out.waitContains(t, "\x1b[32m200 OK\x1b[0m", 1)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v after cancel, want nil", err)
	}
}

func TestDownload(t *testing.T) {
	t.Parallel()
	srv := capturetest.Start(t)
	resp, err := http.Get(srv.HTTPBase + "/downloads/capture-forward.py")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Equal(body, forward.PythonClient) ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/x-python") {
		t.Fatalf("download: %d %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
	if !bytes.HasPrefix(body, []byte("#!/usr/bin/env python3\n")) {
		t.Error("the script does not start with #!/usr/bin/env python3")
	}
	s := runPython(t, pythonEnv(t, "", ""), pythonScript(t), "--help")
	if code := s.wait(t); code != 0 {
		t.Fatalf("--help exit %d: %s", code, s.stderr)
	}
	for _, flag := range []string{"--endpoint", "--to", "--api", "--interval", "--replay-last", "--output", "CAPTURE_API_KEY", "CAPTURE_KEY"} {
		if !strings.Contains(s.stdout.String(), flag) {
			t.Errorf("--help does not mention %s", flag)
		}
	}
}

// --api naming the server's root, as one sets it for other tools, reaches
// the API under it at /api/v1 in both clients.
func TestForwardAPIAtServerRoot(t *testing.T) {
	srv := capturetest.Start(t)
	for _, api := range []string{srv.HTTPBase, srv.HTTPBase + "/"} {
		t.Run(api, func(t *testing.T) {
			both(t, func(t *testing.T, c client) {
				h := newHandler(t, nil)
				s := c.start(t, opts{api: api, key: srv.Key, endpoint: srv.EndpointID, to: h.URL})
				if ready := s.ready(t); ready["api"] != srv.APIBase {
					t.Errorf("ready api = %v, want %s", ready["api"], srv.APIBase)
				}
				if code := s.stop(t); code != 0 {
					t.Errorf("exit code %d; stderr:\n%s", code, s.stderr)
				}
			})
		})
	}
}
