package web_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/capturedev/capture/store"
)

// arrival is a request as a replay's target received it.
type arrival struct {
	method, uri string
	header      http.Header
	body        []byte
}

// replayTarget is a local handler that records what reaches it and
// answers 202 with a header and a JSON body.
func replayTarget(t *testing.T) (string, <-chan arrival) {
	t.Helper()
	arrived := make(chan arrival, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("target: %v", err)
		}
		arrived <- arrival{r.Method, r.RequestURI, r.Header.Clone(), body}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Reply", "yes")
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, arrived
}

// postWebhook sends a webhook to the endpoint's capture URL as a sender
// does, and returns the captured request's id.
func postWebhook(t *testing.T, e *env, endpointID, pathAndQuery string, header http.Header, body string) string {
	t.Helper()
	return sendWebhook(t, e, "POST", endpointID, pathAndQuery, header, body)
}

// sendWebhook sends a request with the method to the endpoint's capture
// URL, and returns the captured request's id.
func sendWebhook(t *testing.T, e *env, method, endpointID, pathAndQuery string, header http.Header, body string) string {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+e.srv.CaptureAddr().String()+"/"+endpointID+pathAndQuery, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("capture: %d", resp.StatusCode)
	}
	list, err := e.st.Requests(t.Context(), endpointID, store.RequestFilter{}, store.Page{Limit: 1})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("requests: %v %v", list, err)
	}
	return list.Items[0].ID
}

// reload reloads the page and waits for it.
func (b *browser) reload() {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if _, err := chromedp.RunResponse(ctx, chromedp.Reload()); err != nil {
		b.t.Fatalf("reload: %v (on %s)", err, b.location())
	}
}

// The Replay form sends the captured request, with the edits made in it,
// to the endpoint's target through the server's own replay, and shows
// what the target answered.
func TestBrowserReplayWithEdits(t *testing.T) {
	e := start(t)
	targetBase, arrived := replayTarget(t)
	target := targetBase + "/app"
	if _, err := e.st.UpdateEndpoint(t.Context(), e.boot.Endpoint.ID, store.EndpointUpdate{Target: &target}); err != nil {
		t.Fatal(err)
	}
	id := postWebhook(t, e, e.boot.Endpoint.ID, "/hook?a=1", http.Header{
		"Content-Type": {"application/json"}, "User-Agent": {"shop/1.0"}, "Accept-Encoding": {"identity"},
		"X-Sig": {"abc"}, "X-Keep": {"one", "two"},
	}, `{"amount":1}`)

	b := newBrowser(t, e, desktop)
	b.signIn()
	page := "/projects/" + e.boot.Project.ID + "/requests/" + id
	b.open(page)
	headers := b.value("textbox", "Headers")
	for _, line := range []string{"X-Sig: abc\n", "X-Keep: one\nX-Keep: two\n", "User-Agent: shop/1.0\n"} {
		if !strings.Contains(headers, line) {
			t.Fatalf("the form's headers %q lack %q", headers, line)
		}
	}
	if strings.Contains(headers, "Host:") || strings.Contains(headers, "Content-Length:") {
		t.Errorf("the form offers headers a replay never sends: %q", headers)
	}
	// Remove one header, change the body.
	b.fill("Headers", strings.Replace(headers, "X-Sig: abc\n", "", 1))
	b.fill("Body", `{"amount":2}`)
	b.clickAndLoad("button", "Replay")

	var got arrival
	select {
	case got = <-arrived:
	default:
		t.Fatal("the page answered before the target was reached")
	}
	want := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"shop/1.0"}, "Accept-Encoding": {"identity"},
		"X-Keep": {"one", "two"}, "Content-Length": {"12"}}
	if got.method != "POST" || got.uri != "/app/hook?a=1" || !bytes.Equal(got.body, []byte(`{"amount":2}`)) ||
		!reflect.DeepEqual(got.header, want) {
		t.Errorf("the target got %s %s %v %q\nwant POST /app/hook?a=1 %v {\"amount\":2}", got.method, got.uri, got.header, got.body, want)
	}

	// The page shows the delivery and the target's answer.
	result := run(b, textOf(`.replay-result`))
	for _, s := range []string{"delivered", "POST", targetBase + "/app/hook?a=1", "202 Accepted", "X-Reply", "yes", `"ok": true`} {
		if !strings.Contains(result, s) {
			t.Errorf("the result lacks %q:\n%s", s, result)
		}
	}
	if row := run(b, textOf(`#deliveries-head + table tbody tr`)); !strings.Contains(row, "replay") || !strings.Contains(row, "202") {
		t.Errorf("deliveries row %q", row)
	}
	// The form keeps the edits, to replay again with a change.
	if body := b.value("textbox", "Body"); body != `{"amount":2}` {
		t.Errorf("after Replay the form's body is %q", body)
	}
	shoot(t, b, os.Getenv("CAPTURE_SCREENSHOTS"), "desktop-light", "19-request-replayed")

	// A reload shows the request again and replays nothing.
	if loc := b.location(); loc != e.base+page+"#replay" {
		t.Errorf("after Replay the address is %s", loc)
	}
	b.reload()
	if n := eval[int](b, `document.querySelectorAll(".replay-result").length`); n != 0 {
		t.Errorf("the reloaded page still shows a result")
	}
	rq, err := e.st.Request(t.Context(), e.boot.Project.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(rq.Deliveries) != 1 || rq.Deliveries[0].Kind != store.DeliveryReplay || *rq.Deliveries[0].ResponseStatus != 202 {
		t.Errorf("deliveries after a reload: %+v", rq.Deliveries)
	}
	select {
	case a := <-arrived:
		t.Errorf("the reload replayed again: %+v", a)
	default:
	}

	// A body left as it is goes as captured, even one with a NUL, which
	// the textarea holds as U+FFFD.
	nul := postWebhook(t, e, e.boot.Endpoint.ID, "/nul", http.Header{"Content-Type": {"text/plain"}}, "nul:\x00:end\r\nline")
	b.open("/projects/" + e.boot.Project.ID + "/requests/" + nul)
	if body := b.value("textbox", "Body"); body != "nul:\uFFFD:end\nline" {
		t.Errorf("the form's body is %q", body)
	}
	b.clickAndLoad("button", "Replay")
	select {
	case got = <-arrived:
	default:
		t.Fatal("the page answered before the target was reached")
	}
	if want := "nul:\x00:end\r\nline"; got.uri != "/app/nul" || string(got.body) != want {
		t.Errorf("an unedited body with a NUL replayed as %s %q, want /app/nul %q", got.uri, got.body, want)
	}
	b.checkClean()
}

// A replay of a request whose endpoint has no target says so, names the
// way to set one, and sends nothing.
func TestBrowserReplayWithoutTarget(t *testing.T) {
	e := start(t)
	id := postWebhook(t, e, e.boot.Endpoint.ID, "/hook", http.Header{"Content-Type": {"text/plain"}}, "hello")
	b := newBrowser(t, e, viewport{width: 390, height: 844, mobile: true})
	b.signIn()
	b.open("/projects/" + e.boot.Project.ID + "/requests/" + id)
	b.clickAndLoad("button", "Replay")
	if alert := run(b, textOf(`#replay [role=alert]`)); !strings.Contains(alert, "has no replay target, so nothing was sent") {
		t.Errorf("the alert says %q", alert)
	}
	shoot(t, b, os.Getenv("CAPTURE_SCREENSHOTS"), "phone-light", "21-request-no-target")
	if b.value("textbox", "Body") != "hello" {
		t.Error("the form lost its body")
	}
	b.clickAndLoad("link", "Set a replay target in the endpoint settings")
	if loc := b.location(); !strings.HasSuffix(loc, "/endpoints/"+e.boot.Endpoint.ID+"/settings") {
		t.Errorf("the link led to %s", loc)
	}
	rq, err := e.st.Request(t.Context(), e.boot.Project.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(rq.Deliveries) != 0 {
		t.Errorf("a replay without a target recorded %+v", rq.Deliveries)
	}
	b.checkClean()
}
