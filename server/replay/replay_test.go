package replay_test

import (
	"errors"
	"io"
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
