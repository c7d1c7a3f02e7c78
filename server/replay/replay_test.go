package replay_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/server/replay"
	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/storetest"
)

// A replay sends the captured request, edited, to the saved target and
// records the delivery, whatever the target answered.
func TestReplay(t *testing.T) {
	ctx := t.Context()
	st := storetest.Store(t)
	boot, err := st.EnsureBootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id, err := st.InsertRequest(ctx, &store.NewRequest{
		EndpointID: boot.Endpoint.ID, ReceivedAt: time.Now(), Method: "POST", Path: "/hook", Query: "a=1",
		RemoteAddr: "127.0.0.1:1", Body: []byte("captured"),
		Headers: []store.Header{{Name: "X-Keep", Values: []string{"1"}}, {Name: "X-Drop", Values: []string{"2"}},
			{Name: "Connection", Values: []string{"close"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := replay.New(st, nil)

	if _, err := r.Replay(ctx, boot.Project.ID, id, contract.ReplayEdits{}); !contract.IsCode(err, contract.CodeNoTarget) {
		t.Fatalf("replay without a target = %v, want no_target", err)
	}
	// Bad edits are told before the missing target.
	badMethod := "BAD METHOD"
	if _, err := r.Replay(ctx, boot.Project.ID, id, contract.ReplayEdits{Method: &badMethod}); !contract.IsCode(err, contract.CodeInvalidParameter) {
		t.Fatalf("bad edit without a target = %v, want invalid_parameter", err)
	}

	type hit struct {
		method, uri, body string
		header            http.Header
	}
	got := make(chan hit, 1)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		got <- hit{req.Method, req.RequestURI, string(b), req.Header}
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, "thanks")
	}))
	defer target.Close()
	base := target.URL + "/base"
	if _, err := st.UpdateEndpoint(ctx, boot.Endpoint.ID, store.EndpointUpdate{Target: &base}); err != nil {
		t.Fatal(err)
	}

	bad := "a b"
	_, err = r.Replay(ctx, boot.Project.ID, id, contract.ReplayEdits{Path: &bad,
		Headers: map[string]contract.HeaderEdit{"Host": {Values: []string{"x"}}}})
	var e *contract.Error
	if !contract.IsCode(err, contract.CodeInvalidParameter) || !errors.As(err, &e) || len(e.Fields) != 2 {
		t.Fatalf("bad edits = %v, want invalid_parameter naming path and headers.Host", err)
	}

	method, body := "PUT", "edited"
	res, err := r.Replay(ctx, boot.Project.ID, id, contract.ReplayEdits{Method: &method, Body: &body,
		Headers: map[string]contract.HeaderEdit{"X-Drop": {Remove: true}, "X-New": {Values: []string{"3"}}}})
	if err != nil {
		t.Fatal(err)
	}
	h := <-got
	if h.method != "PUT" || h.uri != "/base/hook?a=1" || h.body != "edited" || h.header.Get("X-Keep") != "1" ||
		h.header.Get("X-Drop") != "" || h.header.Get("X-New") != "3" {
		t.Errorf("target got %+v", h)
	}
	if res.Response == nil || res.Response.Status != 202 || string(res.Response.Body) != "thanks" ||
		res.Sent.URL != base+"/hook?a=1" || res.Delivery.Kind != store.DeliveryReplay || res.Delivery.Status != "delivered" {
		t.Errorf("result %+v", res)
	}
	req, err := st.Request(ctx, boot.Project.ID, id)
	if err != nil || len(req.Deliveries) != 1 || req.Deliveries[0].ID != res.Delivery.ID {
		t.Errorf("history %+v, %v", req.Deliveries, err)
	}

	target.Close()
	res, err = r.Replay(ctx, boot.Project.ID, id, contract.ReplayEdits{})
	if err != nil || res.Response != nil || res.Delivery.Error == nil || res.Delivery.Status != "failed" {
		t.Fatalf("replay to a closed target = %+v, %v; want a failed delivery recorded", res, err)
	}
	// Said as a person reads it: what failed, not net/http's wording
	// ("Post \"http:/hook?a=1\": …", the method as Go spells it).
	// The client may still hold a connection the target has closed.
	if e := *res.Delivery.Error; !(strings.HasPrefix(e, "dial tcp ") && strings.Contains(e, "connection refused")) &&
		e != "the target closed the connection without an answer" {
		t.Errorf("error %q, want what happened in words", e)
	}
}

// An empty body is replayed with "Content-Length: 0" exactly when the
// capture carried one: net/http would add it to every empty POST, PUT and
// PATCH, a header the original lacked.
func TestReplayEmptyBodyFraming(t *testing.T) {
	ctx := t.Context()
	st := storetest.Store(t)
	boot, err := st.EnsureBootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The target reads each request's head off the wire, as sent.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	heads := make(chan string, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(c)
			var head strings.Builder
			for {
				line, err := br.ReadString('\n')
				head.WriteString(line)
				if err != nil || line == "\r\n" {
					break
				}
			}
			heads <- head.String()
			io.WriteString(c, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
			c.Close()
		}
	}()
	target := "http://" + ln.Addr().String()
	if _, err := st.UpdateEndpoint(ctx, boot.Endpoint.ID, store.EndpointUpdate{Target: &target}); err != nil {
		t.Fatal(err)
	}
	r := replay.New(st, nil)
	for _, method := range []string{"POST", "PUT", "PATCH", "DELETE", "PURGE"} {
		for _, hadLength := range []bool{false, true} {
			var headers []store.Header
			if hadLength {
				headers = []store.Header{{Name: "Content-Length", Values: []string{"0"}}}
			}
			id, err := st.InsertRequest(ctx, &store.NewRequest{EndpointID: boot.Endpoint.ID, ReceivedAt: time.Now(),
				Method: method, Path: "/", RemoteAddr: "127.0.0.1:1", Headers: headers, Body: []byte{}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Replay(ctx, boot.Project.ID, id, contract.ReplayEdits{}); err != nil {
				t.Fatal(err)
			}
			head := strings.ToLower(<-heads)
			sent := strings.Contains(head, "\r\ncontent-length: 0\r\n")
			if sent != hadLength || strings.Contains(head, "transfer-encoding") {
				t.Errorf("%s, captured with Content-Length: %v: sent %q", method, hadLength, head)
			}
		}
	}
}

// A capture whose path holds bytes a URI may not (a raw request line with
// UTF-8, quotes or braces) is replayed byte for byte, and its URL is
// reported, and kept in the history, as the URI a browser would write.
func TestReplayReportsAURI(t *testing.T) {
	ctx := t.Context()
	got := make(chan string, 1)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		got <- req.RequestURI
	}))
	defer target.Close()
	base := target.URL + "/base"
	st, boot, id := captured(t, store.NewRequest{Method: "POST", Path: `/café/{x}|"q"`, Query: "a=ü", Body: []byte("x")}, base)
	res, err := replay.New(st, nil).Replay(ctx, boot.Project.ID, id, contract.ReplayEdits{})
	if err != nil {
		t.Fatal(err)
	}
	if uri := <-got; uri != `/base/café/{x}|"q"?a=ü` {
		t.Errorf("target got %q, want the captured bytes", uri)
	}
	want := base + "/caf%C3%A9/%7Bx%7D%7C%22q%22?a=%C3%BC"
	if res.Sent.URL != want || res.Delivery.TargetURL != want {
		t.Errorf("reported %q, recorded %q, want %q", res.Sent.URL, res.Delivery.TargetURL, want)
	}
}

// A capture of the bare capture URL (path "/") is replayed to the
// target's path as saved, /webhook and not /webhook/, as the forwarding
// clients deliver it; a longer path is appended and never climbs above it.
func TestReplayBareCaptureURL(t *testing.T) {
	ctx := t.Context()
	got := make(chan string, 1)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		got <- req.RequestURI
	}))
	defer target.Close()
	for _, tt := range []struct {
		base string
		path *string
		want string
	}{
		{"/webhook", nil, "/webhook?x=1"},
		{"/webhook/", nil, "/webhook/?x=1"},
		{"", nil, "/?x=1"},
		{"/webhook", ptr("/a"), "/webhook/a?x=1"},
		{"/webhook", ptr("/../.."), "/webhook/?x=1"},
	} {
		st, boot, id := captured(t, store.NewRequest{Method: "POST", Path: "/", Query: "x=1", Body: []byte("x")}, target.URL+tt.base)
		res, err := replay.New(st, nil).Replay(ctx, boot.Project.ID, id, contract.ReplayEdits{Path: tt.path})
		if err != nil {
			t.Fatal(err)
		}
		if uri := <-got; uri != tt.want || res.Sent.URL != target.URL+tt.want {
			t.Errorf("target %s, path %v: sent to %q (%s), want %q", tt.base, tt.path, uri, res.Sent.URL, tt.want)
		}
	}
}

func ptr(s string) *string { return &s }

// An empty list of values removes a header, as null does; two spellings of
// one header name are refused rather than one silently kept.
func TestReplayHeaderEditsEdgeCases(t *testing.T) {
	ctx := t.Context()
	got := make(chan http.Header, 1)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { got <- req.Header }))
	defer target.Close()
	st, boot, id := captured(t, store.NewRequest{Method: "POST", Path: "/hook", Body: []byte("x"),
		Headers: []store.Header{{Name: "X-E", Values: []string{"1"}}}}, target.URL)
	r := replay.New(st, nil)
	_, err := r.Replay(ctx, boot.Project.ID, id, contract.ReplayEdits{
		Headers: map[string]contract.HeaderEdit{"x-lower": {Values: []string{"1"}}, "X-Lower": {Values: []string{"2"}}}})
	var e *contract.Error
	if !errors.As(err, &e) || e.Code != contract.CodeInvalidParameter || !strings.Contains(e.Fields["headers.x-lower"], `"X-Lower"`) {
		t.Errorf("two spellings of one header = %v, want invalid_parameter on the second", err)
	}
	res, err := r.Replay(ctx, boot.Project.ID, id, contract.ReplayEdits{
		Headers: map[string]contract.HeaderEdit{"X-E": {Values: []string{}}}})
	if err != nil {
		t.Fatal(err)
	}
	if h := <-got; h.Values("X-E") != nil {
		t.Errorf("target got X-E %q after an empty edit", h.Values("X-E"))
	}
	if _, ok := res.Sent.Header["X-E"]; ok {
		t.Errorf("reported headers %v hold X-E", res.Sent.Header)
	}
}

// captured stores req in a new store's bootstrap endpoint, pointed at
// target when it is not empty, and returns the store, what the bootstrap
// made and the request's id.
func captured(t *testing.T, req store.NewRequest, target string) (*store.Store, store.Bootstrap, string) {
	t.Helper()
	st := storetest.Store(t)
	boot, err := st.EnsureBootstrap(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	req.EndpointID, req.ReceivedAt, req.RemoteAddr = boot.Endpoint.ID, time.Now(), "127.0.0.1:1"
	id, err := st.InsertRequest(t.Context(), &req)
	if err != nil {
		t.Fatal(err)
	}
	if target != "" {
		if _, err := st.UpdateEndpoint(t.Context(), boot.Endpoint.ID, store.EndpointUpdate{Target: &target}); err != nil {
			t.Fatal(err)
		}
	}
	return st, boot, id
}
