package web_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/capturedev/capture/store"
)

// search types words into the list's search box and sends the form.
func (b *browser) search(words string) {
	b.t.Helper()
	b.typeInto("searchbox", "Search", words)
	b.pressAndLoad(kb.Enter)
}

// texts reads the text of every element matching css, in page order.
func (b *browser) texts(css string) []string {
	b.t.Helper()
	return eval[[]string](b, `[...document.querySelectorAll(`+strconvQuote(css)+`)].map(el => el.textContent)`)
}

// waitLive waits until the list's event stream is open.
func (b *browser) waitLive() {
	b.t.Helper()
	b.waitFor(`!document.querySelector("[data-live-status]").hidden`)
}

func sameSet(got, want []string) bool {
	got, want = slices.Clone(got), slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	return reflect.DeepEqual(got, want)
}

// htmlMail is a message whose only body is HTML, with an attachment when
// filename is not "".
func htmlMail(from, to, subject, html, filename string) string {
	head := "From: " + from + "\nTo: " + to + "\nSubject: " + subject + "\nMIME-Version: 1.0\n"
	if filename == "" {
		return head + "Content-Type: text/html; charset=utf-8\n\n" + html + "\n"
	}
	return head + "Content-Type: multipart/mixed; boundary=B1\n\n--B1\nContent-Type: text/html; charset=utf-8\n\n" + html +
		"\n--B1\nContent-Type: application/pdf\nContent-Disposition: attachment; filename=\"" + filename + "\"\n" +
		"Content-Transfer-Encoding: base64\n\n" + b64("%PDF-1.4 report") + "\n--B1--\n"
}

// The message list's search box searches the whole message (SPEC §16),
// beside the from, to and subject filters; a search that cannot run says
// why on the page; a new message appears live only when it matches.
func TestBrowserSearchMessages(t *testing.T) {
	e := start(t)
	in := e.boot.Inbox
	for _, m := range []struct{ from, to, subject, html, file string }{
		{"Shop <shop@store.test>", "Alice <alice@example.com>", "Your voucher",
			`<p>Redeem code <b>ZEBRACODE77</b> at checkout.</p><style>.hidden-word { color: red }</style>`, ""},
		{"Reports <reports@numbers.test>", "Bob <bob@example.com>", "Monthly numbers",
			"<p>See the attached file.</p>", "quarterly-report-2024.pdf"},
		{"Shop <shop@store.test>", "Bob <bob@example.com>", "Your receipt", "<p>Thanks for shopping at Acme.</p>", ""},
		{"Shop <shop@store.test>", "Alice <alice@example.com>", "Weekly digest", "<p>Acme news of the week.</p>", ""},
	} {
		e.sendMail(t, in, "app@example.org", []string{"dev@example.com"}, htmlMail(m.from, m.to, m.subject, m.html, m.file))
	}
	b := newBrowser(t, e, desktop)
	b.signIn()
	list := "/projects/" + e.boot.Project.ID + "/inboxes/" + in.ID
	b.open(list)
	subjects := func() []string { return b.texts("a.row .subj") }

	// A part of a word that is only in the HTML body, whatever its case;
	// never the markup around it.
	b.search("zebracode")
	if got := subjects(); !reflect.DeepEqual(got, []string{"Your voucher"}) {
		t.Errorf("zebracode finds %v", got)
	}
	if got := b.value("searchbox", "Search"); got != "zebracode" {
		t.Errorf("the search box shows %q after the search", got)
	}
	b.search("hidden-word")
	if got := subjects(); len(got) != 0 {
		t.Errorf("a word of the HTML's style finds %v", got)
	}
	// (The list's count, or on a searched page its new matches, is a
	// status too, but one that speaks only when the live list changes it.)
	if got := b.texts(`[role="status"]:not([hidden]):not(.list-count):not([data-arrivals])`); len(got) != 1 || !strings.Contains(got[0], "No message matches this search.") {
		t.Errorf("the page announces %q after a search that finds nothing", got)
	}
	// An attachment's file name.
	b.search("quarterly-report")
	if got := subjects(); !reflect.DeepEqual(got, []string{"Monthly numbers"}) {
		t.Errorf("quarterly-report finds %v", got)
	}

	// The search combines with each filter of the row.
	b.search("acme")
	if got := subjects(); !sameSet(got, []string{"Your receipt", "Weekly digest"}) {
		t.Errorf("acme finds %v", got)
	}
	// What a search found is announced, as the rows are not.
	if got := b.texts(`[role="status"]:not([hidden])`); !slices.Contains(got, "2 messages match.") {
		t.Errorf("the page announces %q after acme", got)
	}
	b.fill("To", "alice")
	b.pressAndLoad(kb.Enter)
	if got := subjects(); !reflect.DeepEqual(got, []string{"Weekly digest"}) {
		t.Errorf("acme to alice finds %v", got)
	}
	b.fill("To", "")
	b.fill("Subject", "receipt")
	b.pressAndLoad(kb.Enter)
	if got := subjects(); !reflect.DeepEqual(got, []string{"Your receipt"}) {
		t.Errorf("acme with subject receipt finds %v", got)
	}
	q, _ := url.ParseQuery(strings.SplitN(b.location(), "?", 2)[1])
	if want := (url.Values{"q": {"acme"}, "subject": {"receipt"}}); !reflect.DeepEqual(q, want) {
		t.Errorf("the address holds %v, want %v", q, want)
	}

	// An unclosed quote: the page says why, next to the search box, and
	// the rest of it works.
	b.clickAndLoad("link", "Clear")
	b.search(`"zebra code`)
	alert := run(b, textOf(`#search-error`))
	if !strings.Contains(alert, "quotation mark is not closed") {
		t.Errorf("a bad search says %q", alert)
	}
	if invalid := run(b, chromedp.AttributeValue(chromedp.CSS(`#search`), "aria-invalid")); invalid.Value != "true" {
		t.Errorf("the search box is not marked invalid: %+v", invalid)
	}
	if n := len(subjects()); n != 0 {
		t.Errorf("a bad search lists %d rows", n)
	}
	b.search(`"redeem code"`)
	if got := subjects(); !reflect.DeepEqual(got, []string{"Your voucher"}) {
		t.Errorf("after a bad search, a phrase finds %v", got)
	}
	if b.has("alert", "") || eval[bool](b, `document.querySelector("#search-error") !== null`) {
		t.Error("the bad search's message stays after a good search")
	}

	// While searching, a new message that matches appears without a
	// reload; one that does not never does. The one that does not is sent
	// first, so once the match is shown the other would have been too.
	b.search("acme")
	b.waitLive()
	e.sendMail(t, in, "app@example.org", []string{"dev@example.com"},
		htmlMail("Other <news@other.test>", "Carol <carol@example.com>", "Not for us", "<p>Nothing to find here.</p>", ""))
	e.sendMail(t, in, "app@example.org", []string{"dev@example.com"},
		htmlMail("Shop <shop@store.test>", "Carol <carol@example.com>", "Your order shipped", "<p>Acme sent your parcel.</p>", ""))
	b.waitFor(`document.querySelector("a.row .subj")?.textContent === "Your order shipped"`)
	if got := subjects(); !reflect.DeepEqual(got, []string{"Your order shipped", "Weekly digest", "Your receipt"}) {
		t.Errorf("after the live arrivals, acme lists %v", got)
	}
	// The count shown is the inbox's, with both arrivals, here and in
	// the sidebar; its status adds, for a screen reader, how many new
	// ones matched.
	if got := b.texts(".list-count"); !reflect.DeepEqual(got, []string{"6 messages, 1 new match"}) {
		t.Errorf("after two arrivals, one matching, the searched page counts %q", got)
	}
	if got := b.texts(".side a[aria-current=page] .count"); !reflect.DeepEqual(got, []string{"6"}) {
		t.Errorf("after two arrivals, one matching, the sidebar counts %q", got)
	}
	// Only the matches are announced: the count, which every arrival
	// moves, stays out of the live region on a searched page.
	if got := b.texts(".list-count[role=status], .list-count [role=status]"); !reflect.DeepEqual(got, []string{", 1 new match"}) {
		t.Errorf("the searched page's live region says %q, want only the new match", got)
	}
	b.checkClean()
}

// The request list's search box searches paths, queries, header values
// and bodies beside the method and path filters, and a row's delivery
// cell follows the deliveries recorded after it arrived, without a reload.
func TestBrowserSearchRequestsAndLiveDeliveries(t *testing.T) {
	e := start(t)
	targetBase, arrived := replayTarget(t)
	target := targetBase + "/app"
	ep := e.boot.Endpoint
	if _, err := e.st.UpdateEndpoint(t.Context(), ep.ID, store.EndpointUpdate{Target: &target}); err != nil {
		t.Fatal(err)
	}
	blue := postWebhook(t, e, ep.ID, "/hooks/orders", http.Header{"X-Tenant": {"acme-blue-42"}, "Content-Type": {"application/json"}}, `{"order":1}`)
	postWebhook(t, e, ep.ID, "/hooks/orders", http.Header{"X-Tenant": {"acme-red-7"}, "Content-Type": {"application/json"}}, `{"order":2}`)
	putBlue := sendWebhook(t, e, "PUT", ep.ID, "/hooks/profile", http.Header{"X-Tenant": {"acme-blue-42"}}, "name=blue")

	b := newBrowser(t, e, desktop)
	b.signIn()
	b.open("/projects/" + e.boot.Project.ID + "/endpoints/" + ep.ID)
	ids := func() []string {
		return eval[[]string](b, `[...document.querySelectorAll("a.row")].map(a => a.dataset.id)`)
	}

	// A part of a header value.
	b.search("blue-42")
	if got := ids(); !reflect.DeepEqual(got, []string{putBlue, blue}) {
		t.Errorf("blue-42 finds %v, want %v", got, []string{putBlue, blue})
	}
	// With the method filter beside it.
	b.do(chromedp.SetValue(label("combobox", "Method"), "POST", byRole("combobox", "Method")))
	b.clickAndLoad("button", "Filter")
	if got := ids(); !reflect.DeepEqual(got, []string{blue}) {
		t.Errorf("blue-42 with POST finds %v", got)
	}
	// A bad search says why, on the page.
	b.search(`tenant "blue`)
	if alert := run(b, textOf(`#search-error`)); !strings.Contains(alert, "quotation mark is not closed") {
		t.Errorf("a bad search says %q", alert)
	}

	// Searching and filtering by method, with the stream open: a new
	// request that matches both appears, one that matches only one never
	// does (they are sent first).
	b.search("blue-42")
	if got := b.location(); !strings.HasSuffix(got, "?q=blue-42&method=POST") {
		t.Fatalf("the search left the method filter: %s", got)
	}
	b.waitLive()
	postWebhook(t, e, ep.ID, "/hooks/orders", http.Header{"X-Tenant": {"acme-green-1"}}, "{}")
	sendWebhook(t, e, "PUT", ep.ID, "/hooks/orders", http.Header{"X-Tenant": {"acme-blue-42"}}, "{}")
	newBlue := postWebhook(t, e, ep.ID, "/hooks/refunds", http.Header{"X-Tenant": {"acme-blue-42"}}, "{}")
	b.waitFor(`document.querySelector("a.row")?.dataset.id === "` + newBlue + `"`)
	if got := ids(); !reflect.DeepEqual(got, []string{newBlue, blue}) {
		t.Errorf("after the live arrivals, blue-42 lists %v", got)
	}
	// The counts, in the sidebar and the heading, are the endpoint's,
	// all three arrivals in them.
	if got := b.texts(".list-count [data-count], .side a[aria-current=page] .count"); !reflect.DeepEqual(got, []string{"6", "6 requests"}) {
		t.Errorf("after three arrivals, one matching, the counts are %q", got)
	}

	// Deliveries recorded elsewhere change the rows' cells in place: a
	// forwarding client's through the read API, then a replay sent from
	// another tab. The page is never reloaded (its marker stays).
	eval[bool](b, `window.stillThisPage = true`)
	mark := func(id string) string {
		return `document.querySelector('[data-id="` + id + `"] .c-dlv [aria-hidden]')?.textContent`
	}
	words := func(id string) string {
		return eval[string](b, `document.querySelector('[data-id="`+id+`"] .c-dlv .sr-only')?.textContent ?? ""`)
	}
	if got := eval[string](b, mark(blue)+` ?? ""`); got != "" {
		t.Fatalf("the delivery cell shows %q before any delivery", got)
	}
	recordDelivery(t, e, blue, 502)
	b.waitFor(mark(blue) + ` === "502"`)
	if got := words(blue); !strings.HasPrefix(got, "Last delivery: forward, failed with status 502") {
		t.Errorf("the row delivered with a 502 says %q", got)
	}

	tabCtx, closeTab := chromedp.NewContext(b.ctx)
	if err := chromedp.Do(tabCtx); err != nil {
		t.Fatal(err)
	}
	tab := &browser{t: t, e: e, ctx: tabCtx}
	tab.open("/projects/" + e.boot.Project.ID + "/requests/" + newBlue)
	tab.clickAndLoad("button", "Replay")
	closeTab()
	if got := <-arrived; got.method != "POST" || got.uri != "/app/hooks/refunds" {
		t.Errorf("the replay sent %s %s", got.method, got.uri)
	}
	b.waitFor(mark(newBlue) + ` === "202"`)
	if got := words(newBlue); !strings.HasPrefix(got, "Last delivery: replay, delivered with status 202") {
		t.Errorf("the replayed row says %q", got)
	}
	if got := words(blue); !strings.HasPrefix(got, "Last delivery: forward, failed with status 502") {
		t.Errorf("after the replay of another row, the first says %q", got)
	}
	if !eval[bool](b, `window.stillThisPage === true`) {
		t.Error("the page reloaded")
	}
	shoot(t, b, os.Getenv("CAPTURE_SCREENSHOTS"), "desktop-light", "30-requests-delivery-live")
	b.setViewport(viewport{width: 390, height: 844, mobile: true, dark: true})
	shoot(t, b, os.Getenv("CAPTURE_SCREENSHOTS"), "phone-dark", "30-requests-delivery-live")
	b.checkClean()
}

// recordDelivery records a delivery of the request through the read API,
// as a forwarding client does.
func recordDelivery(t *testing.T, e *env, requestID string, status int) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"target_url": "http://localhost:3000/hooks", "response_status": status, "duration_ms": 4})
	req, err := http.NewRequest("POST", e.base+"/api/v1/requests/"+requestID+"/deliveries", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.boot.Secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("record a delivery: %d %s", resp.StatusCode, got)
	}
}

// The method filter shows the filter applied, whatever the method and
// however it was spelled, and keeps it when the form is sent again; any
// method captured can be filtered from the page.
func TestBrowserMethodFilterShowsWhatIsApplied(t *testing.T) {
	e := start(t)
	ep := e.boot.Endpoint
	purge := sendWebhook(t, e, "PURGE", ep.ID, "/cache/home", nil, "")
	post := postWebhook(t, e, ep.ID, "/cache/orders", http.Header{"Content-Type": {"application/json"}}, `{"order":1}`)
	sendWebhook(t, e, "GET", ep.ID, "/health", nil, "")

	b := newBrowser(t, e, desktop)
	b.signIn()
	list := "/projects/" + e.boot.Project.ID + "/endpoints/" + ep.ID
	ids := func() []string {
		return eval[[]string](b, `[...document.querySelectorAll("a.row")].map(a => a.dataset.id)`)
	}
	method := func() string { return b.value("combobox", "Method") }

	// Unfiltered, the choices offer the methods of the requests shown.
	b.open(list)
	if got := eval[[]string](b, `[...document.querySelectorAll("#f-method")].flatMap(f => [...(f.list ?? f).options].map(o => o.value))`); !slices.Contains(got, "PURGE") || !slices.Contains(got, "POST") {
		t.Errorf("the method filter offers %v", got)
	}

	// A method outside the usual ones, from the address: shown, and kept
	// by a search sent from the page.
	b.open(list + "?method=PURGE")
	if got := method(); got != "PURGE" {
		t.Errorf("?method=PURGE shows the method filter as %q", got)
	}
	b.search("cache")
	if got := b.location(); !strings.HasSuffix(got, "?q=cache&method=PURGE") {
		t.Errorf("a search sent the address %s", got)
	}
	if got := ids(); !reflect.DeepEqual(got, []string{purge}) {
		t.Errorf("cache with PURGE lists %v, want %v", got, []string{purge})
	}

	// The store matches methods whatever their case; the page says so.
	b.open(list + "?method=post")
	if got := method(); got != "POST" {
		t.Errorf("?method=post shows the method filter as %q", got)
	}
	if got := ids(); !reflect.DeepEqual(got, []string{post}) {
		t.Errorf("?method=post lists %v", got)
	}
	b.search("cache")
	if got := ids(); !reflect.DeepEqual(got, []string{post}) {
		t.Errorf("cache with post lists %v (at %s)", got, b.location())
	}

	// A method no request has: the empty list says why, beside the filter.
	b.open(list + "?method=FOO")
	if got := method(); got != "FOO" {
		t.Errorf("?method=FOO shows the method filter as %q", got)
	}
	if !eval[bool](b, `document.querySelector("#f-method").closest(".filter").classList.contains("set")`) {
		t.Error("the applied method filter is not marked as set")
	}

	// Any method can be typed into the filter.
	b.clickAndLoad("link", "Clear")
	b.typeInto("combobox", "Method", "purge")
	b.clickAndLoad("button", "Filter")
	if got := ids(); !reflect.DeepEqual(got, []string{purge}) {
		t.Errorf("purge typed into the filter lists %v", got)
	}
	if got := method(); got != "PURGE" {
		t.Errorf("after filtering, the method filter shows %q", got)
	}
	b.checkClean()
}
