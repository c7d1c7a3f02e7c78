package web_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/server/servertest"
	"github.com/capturedev/capture/server/web"
	"github.com/capturedev/capture/store"
)

// sendingReplayer sends a captured request with its edits to the
// endpoint's target and records the delivery: what the read API's replay
// does, in the few lines a test needs to show the page's form at work.
type sendingReplayer struct{ st *store.Store }

func (rp sendingReplayer) Replay(ctx context.Context, projectID, requestID string, ed web.ReplayEdits) (store.Delivery, error) {
	rq, err := rp.st.Request(ctx, projectID, requestID)
	if err != nil {
		return store.Delivery{}, err
	}
	ep, err := rp.st.Endpoint(ctx, projectID, rq.EndpointID)
	if err != nil {
		return store.Delivery{}, err
	}
	if ep.TargetURL == nil {
		return store.Delivery{}, fmt.Errorf("%w: no target", store.ErrInvalid)
	}
	method, path, query, body := rq.Method, rq.Path, rq.Query, rq.Body
	if ed.Method != nil {
		method = *ed.Method
	}
	if ed.Path != nil {
		path = *ed.Path
	}
	if ed.Query != nil {
		query = *ed.Query
	}
	if ed.Body != nil {
		body = ed.Body
	}
	target := strings.TrimSuffix(*ep.TargetURL, "/") + path + "?" + query
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return store.Delivery{}, err
	}
	for _, h := range rq.Headers {
		if h.Name != "Host" && h.Name != "Content-Length" {
			req.Header[h.Name] = h.Values
		}
	}
	for name, v := range ed.Headers {
		if v == nil {
			req.Header.Del(name)
		} else {
			req.Header.Set(name, *v)
		}
	}
	began := time.Now()
	nd := store.NewDelivery{Kind: store.DeliveryReplay, TargetURL: target}
	if resp, err := http.DefaultClient.Do(req); err != nil {
		msg := err.Error()
		nd.Error = &msg
	} else {
		resp.Body.Close()
		nd.ResponseStatus = &resp.StatusCode
	}
	nd.Duration = time.Since(began)
	return rp.st.AddDelivery(ctx, projectID, requestID, nd)
}

func TestBrowserReplayWithEdits(t *testing.T) {
	st, boot := servertest.Open(t, "free")
	got := make(chan *http.Request, 1)
	bodies := make(chan string, 1)
	handler := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- string(b)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer handler.Close()
	ui := httptest.NewServer(web.New(st, web.Config{SMTPHost: "localhost", CaptureBase: "http://127.0.0.1:7781",
		Replayer: sendingReplayer{st}, Logger: slog.New(slog.DiscardHandler)}))
	defer ui.Close()
	e := &env{st: st, boot: boot, base: ui.URL}

	ctx := t.Context()
	target := handler.URL + "/app"
	if _, err := st.UpdateEndpoint(ctx, boot.Endpoint.ID, store.EndpointUpdate{Target: &target}); err != nil {
		t.Fatal(err)
	}
	id, err := st.InsertRequest(ctx, &store.NewRequest{EndpointID: boot.Endpoint.ID, ReceivedAt: time.Now(), Method: "POST",
		Path: "/hook", Query: "a=1", ContentType: "application/json", RemoteAddr: "127.0.0.1:1",
		Headers: []store.Header{{Name: "Content-Type", Values: []string{"application/json"}}, {Name: "X-Sig", Values: []string{"abc"}}},
		Body:    []byte(`{"amount":1}`)})
	if err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t, e, desktop)
	b.signIn()
	b.open("/projects/" + boot.Project.ID + "/requests/" + id)
	b.fill("Body", `{"amount":2}`)
	b.fill("Headers", "Content-Type: application/json\nX-New: 1")
	b.clickAndLoad("button", "Replay")

	r := <-got
	if body := <-bodies; body != `{"amount":2}` || r.URL.Path != "/app/hook" || r.URL.RawQuery != "a=1" ||
		r.Header.Get("X-New") != "1" || r.Header.Get("X-Sig") != "" || r.Method != "POST" {
		t.Errorf("the handler got %s %s?%s %v %q", r.Method, r.URL.Path, r.URL.RawQuery, r.Header, body)
	}
	if flash := run(b, textOf(`[role=status]`)); !strings.Contains(flash, "status 202") {
		t.Errorf("after Replay: %q", flash)
	}
	if row := run(b, textOf(`#deliveries-head + table tbody tr`)); !strings.Contains(row, "replay") || !strings.Contains(row, "202") {
		t.Errorf("deliveries row %q", row)
	}
	shoot(t, b, os.Getenv("CAPTURE_SCREENSHOTS"), "desktop-light", "19-request-replay")
	b.checkClean()
}
