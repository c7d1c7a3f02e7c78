package web_test

import (
	"bufio"
	"context"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/server/servertest"
	"github.com/capturedev/capture/server/web"
	"github.com/capturedev/capture/store"
)

// A page that does not exist, or a method a page does not take, is an
// HTML page for a browser and the read API's error envelope for anything
// that does not ask for HTML.
func TestUnknownPagesAnswerByAccept(t *testing.T) {
	st, boot := servertest.Open(t, "free")
	ui := httptest.NewServer(web.New(st, web.Config{SMTPHost: "localhost", CaptureBase: "http://127.0.0.1:7781",
		Logger: slog.New(slog.DiscardHandler)}))
	defer ui.Close()
	browser := "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	message := "/projects/" + boot.Project.ID + "/messages/msg_x/delete"
	tests := []struct {
		method, path, accept string
		status               int
		code, allow          string // code "" wants the HTML page
	}{
		{"GET", "/nope", "", 404, "not_found", ""},
		{"GET", "/nope", "application/json", 404, "not_found", ""},
		{"GET", "/nope", "*/*", 404, "not_found", ""},
		{"GET", "/nope", "text/html;q=0, */*", 404, "not_found", ""},
		{"GET", "/nope", browser, 404, "", ""},
		{"GET", "/static/app.css", "", 404, "not_found", ""},
		{"GET", "/static/nope.js", browser, 404, "", ""},
		{"DELETE", "/", "", 405, "method_not_allowed", "GET, HEAD"},
		{"DELETE", "/", browser, 405, "", "GET, HEAD"},
		{"PUT", "/login", "", 405, "method_not_allowed", "GET, HEAD, POST"},
		{"GET", message, "", 405, "method_not_allowed", "POST"},
		{"GET", message, browser, 405, "", "POST"},
		{"GET", "/projects/" + boot.Project.ID + "/messages/msg_x/nope", "", 404, "not_found", ""},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, ui.URL+tt.path, nil)
		if tt.accept != "" {
			req.Header.Set("Accept", tt.accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := new(strings.Builder)
		_, err = bufio.NewReader(resp.Body).WriteTo(body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		where := fmt.Sprintf("%s %s (Accept %q)", tt.method, tt.path, tt.accept)
		if resp.StatusCode != tt.status || resp.Header.Get("Allow") != tt.allow {
			t.Errorf("%s: %d Allow %q, want %d Allow %q", where, resp.StatusCode, resp.Header.Get("Allow"), tt.status, tt.allow)
		}
		if tt.code == "" {
			if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(body.String(), "<h1>"+http.StatusText(tt.status)+"</h1>") {
				t.Errorf("%s: want the HTML page, got %s %q", where, resp.Header.Get("Content-Type"), body)
			}
			continue
		}
		envelope(t, where, response{resp, body.String()}, tt.status, tt.code)
	}
}

// The request list shows each request's last delivery, in the rows of
// the page and in the rows the live list receives.
func TestRequestListLastDelivery(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	ctx := t.Context()
	pid, eid := e.boot.Project.ID, e.boot.Endpoint.ID
	first := postWebhook(t, e, eid, "/first", http.Header{}, "1")
	second := postWebhook(t, e, eid, "/second", http.Header{}, "2")
	third := postWebhook(t, e, eid, "/third", http.Header{}, "3")
	status := 202
	if _, err := e.st.AddDelivery(ctx, pid, second, store.NewDelivery{Kind: store.DeliveryForward,
		TargetURL: "http://localhost:3000/second", ResponseStatus: &status, Duration: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	refused := "connection refused"
	if _, err := e.st.AddDelivery(ctx, pid, third, store.NewDelivery{Kind: store.DeliveryReplay,
		TargetURL: "http://localhost:3000/third", Error: &refused, Duration: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	cells := func(html, id string) string {
		t.Helper()
		_, row, ok := strings.Cut(html, `data-id="`+id+`"`)
		row, _, _ = strings.Cut(row, "</a>")
		_, cell, found := strings.Cut(row, `<span class="c-dlv" data-mark>`)
		if !ok || !found {
			t.Fatalf("no row %s with a delivery cell in %s", id, html)
		}
		cell, _, _ = strings.Cut(cell, "\n")
		return cell
	}
	page := c.get("/projects/" + pid + "/endpoints/" + eid).body
	if cell := cells(page, first); cell != "</span>" {
		t.Errorf("a request never delivered shows %q", cell)
	}
	if cell := cells(page, second); !strings.Contains(cell, "badge-ok") || !strings.Contains(cell, ">202<") ||
		!strings.Contains(cell, "Last delivery: forward, delivered with status 202") {
		t.Errorf("the delivered request shows %q", cell)
	}
	if cell := cells(page, third); !strings.Contains(cell, "badge-bad") || !strings.Contains(cell, ">failed<") ||
		!strings.Contains(cell, "Last delivery: replay, failed,") {
		t.Errorf("the failed request shows %q", cell)
	}

	// The live list sends the rows after the one it continues from, with
	// their deliveries.
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, "GET", e.base+"/projects/"+pid+"/endpoints/"+eid+"/events?after="+first, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rows := map[string]string{}
	lines := bufio.NewScanner(resp.Body)
	var id, event, total string
	var data strings.Builder
	for len(rows) < 2 && lines.Scan() {
		line := lines.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data.WriteString(strings.TrimPrefix(line, "data: ") + "\n")
		case line == "":
			// An event without an id (the total) is not a row.
			if id != "" {
				rows[id] = data.String()
			}
			if event == "total" {
				total = data.String()
			}
			id, event = "", ""
			data.Reset()
		}
	}
	// The endpoint's whole count comes before the rows it counts.
	if !strings.Contains(total, `"count":"3 requests"`) {
		t.Errorf("total event before the rows: %q, want the endpoint's 3 requests", total)
	}
	if cell := cells(rows[second], second); !strings.Contains(cell, ">202<") {
		t.Errorf("the live row of the delivered request shows %q", cell)
	}
	if cell := cells(rows[third], third); !strings.Contains(cell, ">failed<") {
		t.Errorf("the live row of the failed request shows %q", cell)
	}
}

// The Links tab says when a message had more links than it keeps, and
// refuses a kind that does not exist.
func TestLinksTruncatedAndBadKind(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	var text strings.Builder
	for i := range 1001 {
		fmt.Fprintf(&text, "https://example.com/p/%d\n", i)
	}
	e.sendMail(t, e.boot.Inbox, "a@example.com", []string{"b@example.com"},
		"From: a@example.com\nTo: b@example.com\nSubject: Many links\n\n"+text.String())
	list, err := e.st.Messages(t.Context(), e.boot.Inbox.ID, store.MessageFilter{}, store.Page{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("messages: %v %v", list, err)
	}
	page := "/projects/" + e.boot.Project.ID + "/messages/" + list.Items[0].ID
	links := c.get(page + "?tab=links")
	if text := html.UnescapeString(links.body); links.StatusCode != http.StatusOK || !strings.Contains(text, `Links<span class="tab-count" aria-hidden="true"> (1000+)</span>`) ||
		!strings.Contains(text, "more links than the 1000 kept") {
		t.Errorf("the links tab of a message with 1001 links: %d\n%s", links.StatusCode, links.body)
	}
	if bad := c.get(page + "?tab=links&kind=nope"); bad.StatusCode != http.StatusBadRequest || !strings.Contains(bad.body, "no link kind") {
		t.Errorf("kind=nope: %d %s", bad.StatusCode, bad.body)
	}
}

// Replay edits the store's replay refuses are named on the page, and
// nothing is sent; a body's CRLF line breaks survive the textarea, which
// only knows "\n".
func TestReplayFormEdits(t *testing.T) {
	e := start(t)
	targetBase, arrived := replayTarget(t)
	if _, err := e.st.UpdateEndpoint(t.Context(), e.boot.Endpoint.ID, store.EndpointUpdate{Target: &targetBase}); err != nil {
		t.Fatal(err)
	}
	body := "\r\nline one\r\nline two\r\n"
	id := postWebhook(t, e, e.boot.Endpoint.ID, "/hook", http.Header{"Content-Type": {"text/plain"}, "X-Sig": {"abc"}}, body)
	c := e.client(t)
	token := c.signIn(e)
	page := "/projects/" + e.boot.Project.ID + "/requests/" + id
	form := func(path, headers, body string) url.Values {
		return url.Values{"csrf": {token}, "method": {"POST"}, "path": {path}, "query": {""}, "headers": {headers}, "body": {body}}
	}
	headers := "Accept-Encoding: gzip\r\nContent-Type: text/plain\r\nUser-Agent: Go-http-client/1.1\r\nX-Sig: abc\r\n"
	if shown := c.get(page).body; !strings.Contains(shown, ">\n"+html.EscapeString(body)+"</textarea>") {
		t.Errorf("the body's textarea does not hold the body with its leading newline:\n%s", shown)
	}

	bad := c.post(page+"/replay", form("no-slash", headers+"Host: elsewhere\r\n", body))
	text := html.UnescapeString(bad.body)
	if bad.StatusCode != http.StatusBadRequest || !strings.Contains(text, "Path: must start with /") ||
		!strings.Contains(text, "Header Host: follows the target URL; change the target to change it.") || !strings.Contains(bad.body, `id="r-path" name="path" class="mono" value="no-slash" required aria-invalid="true"`) {
		t.Errorf("bad edits: %d\n%s", bad.StatusCode, bad.body)
	}
	if malformed := c.post(page+"/replay", form("/hook", "oops\r\n", body)); malformed.StatusCode != http.StatusBadRequest ||
		!strings.Contains(html.UnescapeString(malformed.body), `Headers: header line 1 ("oops") must look like Name: value.`) {
		t.Errorf("a malformed header line: %d\n%s", malformed.StatusCode, malformed.body)
	}
	// A malformed header line and another bad edit are told together.
	both := c.post(page+"/replay", form("no-slash", "oops\r\n", body))
	if text := html.UnescapeString(both.body); both.StatusCode != http.StatusBadRequest ||
		!strings.Contains(text, `Headers: header line 1 ("oops") must look like Name: value.`) || !strings.Contains(text, "Path: must start with /") {
		t.Errorf("a malformed header line and a bad path: %d\n%s", both.StatusCode, both.body)
	}
	select {
	case a := <-arrived:
		t.Fatalf("refused edits sent %+v", a)
	default:
	}

	// The form as shown, sent back by a browser with CRLF line breaks,
	// replays the captured body byte for byte; an edited one keeps CRLF.
	for _, tc := range []struct{ posted, want string }{
		{"\r\nline one\r\nline two\r\n", body},
		{"\r\nline one\r\nline 2\r\n", "\r\nline one\r\nline 2\r\n"},
	} {
		if resp := c.post(page+"/replay", form("/hook", headers, tc.posted)); resp.StatusCode != http.StatusOK {
			t.Fatalf("replay: %d %s", resp.StatusCode, resp.body)
		}
		if got := <-arrived; string(got.body) != tc.want || got.header.Get("X-Sig") != "abc" {
			t.Errorf("posted %q: the target got %q %v, want %q", tc.posted, got.body, got.header, tc.want)
		}
	}
}
