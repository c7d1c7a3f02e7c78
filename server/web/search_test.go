package web_test

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/store"
)

var (
	rowID    = regexp.MustCompile(`data-id="(req_[^"]+)"`)
	anyRowID = regexp.MustCompile(`data-id="((?:msg|req)_[^"]+)"`)
	pageRel  = regexp.MustCompile(`href="([^"]+)" rel="(prev|next)"`)
	liveAt   = regexp.MustCompile(`data-live="([^"]+)"`)
)

// Keyset paging and the live stream keep the search: every page of a
// search holds only matches, and the pages together hold each match once.
func TestSearchPagesKeepTheQuery(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	ep := e.boot.Endpoint.ID
	matches := map[string]bool{}
	// 55 matches, more than a page, with 12 others among them.
	for i := range 55 + 12 {
		tenant := "needle-" + strconv.Itoa(i)
		if i%5 == 0 && i < 60 {
			tenant = "other-" + strconv.Itoa(i)
		}
		id, err := e.st.InsertRequest(t.Context(), &store.NewRequest{EndpointID: ep, ReceivedAt: time.Now(), Method: "POST",
			Path: "/hooks", RemoteAddr: "127.0.0.1:5000", Headers: []store.Header{{Name: "X-Tenant", Values: []string{tenant}}}})
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(tenant, "needle") {
			matches[id] = true
		}
	}
	rows := func(page string) []string {
		var ids []string
		for _, m := range rowID.FindAllStringSubmatch(page, -1) {
			ids = append(ids, m[1])
		}
		return ids
	}
	links := func(page string) map[string]string {
		out := map[string]string{}
		for _, m := range pageRel.FindAllStringSubmatch(page, -1) {
			out[m[2]] = html.UnescapeString(m[1])
		}
		return out
	}

	first := c.get("/projects/" + e.boot.Project.ID + "/endpoints/" + ep + "?q=needle")
	live := liveAt.FindStringSubmatch(first.body)
	if first.StatusCode != http.StatusOK || live == nil || !strings.Contains(html.UnescapeString(live[1]), "q=needle") {
		t.Fatalf("the first page: %d, live stream %v", first.StatusCode, live)
	}
	seen := map[string]bool{}
	page := first
	for n := 0; ; n++ {
		for _, id := range rows(page.body) {
			if !matches[id] || seen[id] {
				t.Errorf("page %d lists %s (a match: %v, seen before: %v)", n, id, matches[id], seen[id])
			}
			seen[id] = true
		}
		older := links(page.body)["next"]
		if older == "" {
			break
		}
		if !strings.Contains(older, "q=needle") || !strings.Contains(older, "before=") {
			t.Fatalf("the Older link %q lost the search", older)
		}
		page = c.get(older)
		// The Newer link of an older page keeps the search too.
		if newer := links(page.body)["prev"]; !strings.Contains(newer, "q=needle") {
			t.Errorf("the Newer link %q lost the search", newer)
		}
	}
	if len(seen) != len(matches) {
		t.Errorf("the pages list %d of the %d matches", len(seen), len(matches))
	}
}

// A search that cannot run is bad input: the page says why next to the
// search box, with the rest of the page (navigation, filters) in place,
// and the live stream of that search is refused rather than retried.
func TestBadSearchOnThePage(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	pid := e.boot.Project.ID
	for _, list := range []string{"/inboxes/" + e.boot.Inbox.ID, "/endpoints/" + e.boot.Endpoint.ID} {
		page := c.get("/projects/" + pid + list + "?q=%22unclosed&to=bob")
		text := html.UnescapeString(page.body)
		if page.StatusCode != http.StatusBadRequest ||
			!strings.Contains(text, `<p class="alert filter-error" id="search-error" role="alert">This search cannot run: a quotation mark is not closed`) ||
			!strings.Contains(text, `value=""unclosed"`) || !strings.Contains(page.body, `aria-describedby="search-error"`) ||
			!strings.Contains(page.body, `aria-label="Inboxes and endpoints"`) || strings.Contains(page.body, "data-live=") {
			t.Errorf("%s with a bad search: %d\n%s", list, page.StatusCode, page.body)
		}
		events := c.get("/projects/" + pid + list + "/events?q=%22unclosed")
		if events.StatusCode != http.StatusBadRequest || events.Header.Get("Content-Type") == "text/event-stream" {
			t.Errorf("%s events with a bad search: %d %s", list, events.StatusCode, events.Header.Get("Content-Type"))
		}
	}
	// Spaces alone are no search.
	if page := c.get("/projects/" + pid + "/inboxes/" + e.boot.Inbox.ID + "?q=+++"); page.StatusCode != http.StatusOK {
		t.Errorf("a blank search: %d", page.StatusCode)
	}
}

// The web's search box is the read API's q: for the same query, with the
// same filters beside it, both list the same captures in the same order,
// and refuse the same queries.
func TestWebSearchIsTheAPIsSearch(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	in, ep := e.boot.Inbox, e.boot.Endpoint
	for _, m := range []struct{ from, to, subject, html, file string }{
		{"Shop <shop@store.test>", "Alice <alice@example.com>", "Your order shipped", "<p>Your Acme parcel left the depot.</p>", ""},
		{"Café Crème <bonjour@creme.test>", "Bob <bob@example.com>", "Réservation confirmée", "<p>À bientôt, code XYZABC123.</p>", ""},
		{"Reports <reports@numbers.test>", "Alice <alice@example.com>", "Monthly numbers", "<p>See the attached order report.</p>", "acme-report-2024.pdf"},
		{"Shop <shop@store.test>", "Bob <bob@example.com>", "Order on hold", "<p>Acme needs your order details.</p>", ""},
	} {
		e.sendMail(t, in, "app@example.org", []string{"dev@example.com"}, htmlMail(m.from, m.to, m.subject, m.html, m.file))
	}
	for _, r := range []struct{ method, path, tenant, body string }{
		{"POST", "/hooks/orders?shop=acme", "acme-blue", `{"event":"order.created","total":42}`},
		{"POST", "/hooks/refunds", "café-rouge", `{"event":"refund.issued","reason":"damaged parcel"}`},
		{"PUT", "/hooks/orders", "acme-red", "name=order+update"},
		{"POST", "/billing/invoices", "other", `{"event":"invoice.paid","order":"XYZABC123"}`},
	} {
		sendWebhook(t, e, r.method, ep.ID, r.path, http.Header{"X-Tenant": {r.tenant}}, r.body)
	}

	// api lists through the read API: the ids in order, or the error code.
	api := func(path string) ([]string, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", e.base+"/api/v1"+path, nil)
		req.Header.Set("Authorization", "Bearer "+e.boot.Secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Items []struct{ ID string }
			Error struct{ Code string }
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var ids []string
		for _, it := range body.Items {
			ids = append(ids, it.ID)
		}
		return ids, body.Error.Code
	}
	web := func(path string) ([]string, int) {
		t.Helper()
		page := c.get("/projects/" + e.boot.Project.ID + path)
		var ids []string
		for _, m := range anyRowID.FindAllStringSubmatch(page.body, -1) {
			ids = append(ids, m[1])
		}
		return ids, page.StatusCode
	}
	queries := []string{"acme", "ACME", "order", "order acme", `"your order"`, `"order shipped"`, "cafe", "creme",
		"reservation", "abc12", "acme-report", "refund.issued", "blue", "shop=acme", "nothing-like-this", `"unclosed`, "!!!"}
	lists := []struct{ web, api, filter string }{
		{"/inboxes/" + in.ID, "/inboxes/" + in.ID + "/messages", ""},
		{"/inboxes/" + in.ID, "/inboxes/" + in.ID + "/messages", "&to=alice"},
		{"/inboxes/" + in.ID, "/inboxes/" + in.ID + "/messages", "&subject=order"},
		{"/endpoints/" + ep.ID, "/endpoints/" + ep.ID + "/requests", ""},
		{"/endpoints/" + ep.ID, "/endpoints/" + ep.ID + "/requests", "&method=POST"},
		{"/endpoints/" + ep.ID, "/endpoints/" + ep.ID + "/requests", "&path=/hooks"},
	}
	found := 0
	for _, l := range lists {
		for _, q := range queries {
			query := "?q=" + url.QueryEscape(q) + l.filter
			want, code := api(l.api + query)
			got, status := web(l.web + query)
			switch {
			case code != "":
				if code != "invalid_parameter" || status != http.StatusBadRequest {
					t.Errorf("%s%s: the API refuses it with %q, the page answers %d", l.api, query, code, status)
				}
			case status != http.StatusOK || !slices.Equal(got, want):
				t.Errorf("%s%s: the page lists %v (%d), the API %v", l.web, query, got, status, want)
			}
			found += len(want)
		}
	}
	t.Logf("the queries found %d captures", found)
	if found == 0 {
		t.Fatal("no query found anything: the comparison shows nothing")
	}
}

// "Received after" (since=) keeps the captures received after it, on both
// lists and in their live streams; a time without a zone is refused with
// the reason beside the field and no list, as the read API refuses it.
func TestSinceFilter(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	now := time.Now()
	old, err := e.st.InsertRequest(t.Context(), &store.NewRequest{EndpointID: e.boot.Endpoint.ID, ReceivedAt: now.Add(-2 * time.Hour),
		Method: "POST", Path: "/old", RemoteAddr: "127.0.0.1:5000"})
	if err != nil {
		t.Fatal(err)
	}
	recent, err := e.st.InsertRequest(t.Context(), &store.NewRequest{EndpointID: e.boot.Endpoint.ID, ReceivedAt: now,
		Method: "POST", Path: "/recent", RemoteAddr: "127.0.0.1:5000"})
	if err != nil {
		t.Fatal(err)
	}
	oldMsg, err := e.st.InsertMessage(t.Context(), &store.NewMessage{InboxID: e.boot.Inbox.ID, ReceivedAt: now.Add(-2 * time.Hour),
		EnvelopeFrom: "a@example.com", EnvelopeTo: []string{"b@example.com"}, Subject: "old", Raw: []byte("Subject: old\r\n\r\nold\r\n")})
	if err != nil {
		t.Fatal(err)
	}
	newMsg, err := e.st.InsertMessage(t.Context(), &store.NewMessage{InboxID: e.boot.Inbox.ID, ReceivedAt: now,
		EnvelopeFrom: "a@example.com", EnvelopeTo: []string{"b@example.com"}, Subject: "new", Raw: []byte("Subject: new\r\n\r\nnew\r\n")})
	if err != nil {
		t.Fatal(err)
	}
	since := url.QueryEscape(now.Add(-time.Hour).UTC().Format(time.RFC3339))
	for _, tt := range []struct{ list, in, out string }{
		{"/endpoints/" + e.boot.Endpoint.ID, recent, old},
		{"/inboxes/" + e.boot.Inbox.ID, newMsg, oldMsg},
	} {
		base := "/projects/" + e.boot.Project.ID + tt.list
		p := c.get(base + "?since=" + since)
		var ids []string
		for _, m := range anyRowID.FindAllStringSubmatch(p.body, -1) {
			ids = append(ids, m[1])
		}
		live := liveAt.FindStringSubmatch(p.body)
		if p.StatusCode != http.StatusOK || !slices.Equal(ids, []string{tt.in}) || live == nil ||
			!strings.Contains(html.UnescapeString(live[1]), "since=") || !strings.Contains(p.body, `id="f-since"`) {
			t.Errorf("%s since an hour ago: %d, rows %v, live %v; want only %s, and since kept live", tt.list, p.StatusCode, ids, live, tt.in)
		}
		bad := c.get(base + "?since=2026-01-02T15:04:05")
		if bad.StatusCode != http.StatusBadRequest || !strings.Contains(bad.body, "Received after must be a time with its zone") ||
			anyRowID.MatchString(bad.body) || !strings.Contains(bad.body, `aria-describedby="since-error"`) {
			t.Errorf("%s with a naive since: %d, want 400 with the reason and no rows", tt.list, bad.StatusCode)
		}
	}
}
