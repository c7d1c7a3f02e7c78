package web_test

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/capturedev/capture/store"
)

// axeSource reads axe-core, which `npm ci` in testdata/axe installs (the
// version is pinned by its package-lock.json). Without it the test skips,
// and says so, except under CI, where it must be there.
func axeSource(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("testdata/axe/node_modules/axe-core/axe.min.js")
	if err != nil {
		msg := "the accessibility test needs axe-core (`npm ci` in server/web/testdata/axe): " + err.Error()
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip("SKIP: " + msg)
	}
	return string(src)
}

type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target  []string `json:"target"`
		Summary string   `json:"summary"`
	} `json:"nodes"`
}

// axe runs axe-core on the open page and returns its serious and critical
// violations. The message's HTML frame is left out: it is captured
// content, not the interface.
func (b *browser) axe(src string) []axeViolation {
	b.t.Helper()
	if !eval[bool](b, `typeof window.axe === "object"`) {
		eval[bool](b, src+"\n;true")
	}
	// target-size (WCAG 2.2's 24 px targets) is off by default in axe-core.
	return eval[[]axeViolation](b, `axe.run(document, {iframes: false, resultTypes: ["violations"],
		rules: {"target-size": {enabled: true}}}).then((r) =>
		r.violations.filter((v) => v.impact === "serious" || v.impact === "critical").map((v) => ({
			id: v.id, impact: v.impact, help: v.help,
			nodes: v.nodes.map((n) => ({target: n.target.map(String), summary: n.failureSummary})),
		})))`)
}

// unreachableScrolls lists the elements of the open page that scroll but
// cannot be scrolled from the keyboard: neither focusable (with a name to
// say what took the focus) nor holding anything focusable. axe-core checks
// this only for elements with elements inside, not for a <pre> of text.
func (b *browser) unreachableScrolls() []string {
	b.t.Helper()
	return eval[[]string](b, `[...document.querySelectorAll("body *")].filter((el) => {
		const s = getComputedStyle(el);
		const scrolls = (/auto|scroll/.test(s.overflowX) && el.scrollWidth > el.clientWidth + 1) ||
			(/auto|scroll/.test(s.overflowY) && el.scrollHeight > el.clientHeight + 1);
		if (!scrolls) return false;
		if (el.tabIndex >= 0) return !(el.getAttribute("aria-label") || el.getAttribute("aria-labelledby"));
		return !el.querySelector("a[href], button, input, select, textarea, [tabindex]:not([tabindex='-1'])");
	}).map((el) => el.tagName.toLowerCase() + [...el.classList].map((c) => "." + c).join(""))`)
}

// accessibleName is the name assistive technology gives the first element
// matching css, as Chromium computes it.
func (b *browser) accessibleName(css string) string {
	b.t.Helper()
	return run(b, chromedp.QueryAfter(chromedp.CSS(css), func(ctx context.Context, t *chromedp.Target, nodes []*chromedp.Node) (string, error) {
		relatives := false
		res, err := cdp.Call(ctx, t, accessibility.GetPartialAXTree, accessibility.GetPartialAXTreeParams{
			NodeID: nodes[0].NodeID, FetchRelatives: &relatives})
		if err != nil {
			return "", err
		}
		if len(res.Nodes) == 0 || res.Nodes[0].Name == nil {
			return "", nil
		}
		var name string
		if err := json.Unmarshal([]byte(res.Nodes[0].Name.Value), &name); err != nil {
			return "", err
		}
		return name, nil
	}))
}

// TestBrowserAxe runs axe-core on the main pages at 1280 and 390 px, light
// and dark, and fails on every serious or critical violation. With
// CAPTURE_SCREENSHOTS=DIR it also saves a screenshot of each page.
func TestBrowserAxe(t *testing.T) {
	src := axeSource(t)
	e := start(t)
	pages, replay := a11yPages(t, e)
	dir := screenshotDir(t)
	modes := []struct {
		name string
		vp   viewport
	}{
		{"axe-1280-light", viewport{width: 1280, height: 800}},
		{"axe-1280-dark", viewport{width: 1280, height: 800, dark: true}},
		{"axe-390-light", viewport{width: 390, height: 844, mobile: true}},
		{"axe-390-dark", viewport{width: 390, height: 844, mobile: true, dark: true}},
	}
	b := newBrowser(t, e, desktop)
	check := func(mode, name string) {
		t.Helper()
		for _, v := range b.axe(src) {
			for _, n := range v.Nodes {
				t.Errorf("%s %s: %s (%s) at %s: %s", mode, name, v.ID, v.Impact, strings.Join(n.Target, " "),
					strings.ReplaceAll(strings.TrimSpace(n.Summary), "\n", " / "))
			}
		}
		for _, el := range b.unreachableScrolls() {
			t.Errorf("%s %s: %s scrolls but the keyboard cannot reach it, or it has no name", mode, name, el)
		}
		shoot(t, b, dir, mode, name)
	}
	// The sign-in page before a password is set, then with its form.
	for _, m := range modes {
		b.setViewport(m.vp)
		b.open("/login")
		check(m.name, "login-no-password")
	}
	if err := e.st.SetPassword(t.Context(), "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	for _, m := range modes {
		b.setViewport(m.vp)
		b.open("/login")
		check(m.name, "login")
		b.signIn()
		for _, p := range pages {
			if got, want := b.openStatus(p.path), cmp.Or(p.status, http.StatusOK); got != want {
				t.Errorf("%s %s answered %d, want %d", m.name, p.name, got, want)
			}
			if p.wait != "" {
				b.waitFor(p.wait)
			}
			check(m.name, p.name)
		}
		// A replay's answer is the page that answers the form.
		b.open(replay)
		b.clickAndLoad("button", "Replay")
		check(m.name, "request-replayed")
		b.clickAndLoad("button", "Sign out")
	}
	b.checkClean()
}

// a11yPages fills the data dir as populate does, adds what the main pages
// show only in some states (a text-only message, an endpoint without a
// target or requests), and returns the pages to check and a request to
// replay.
func a11yPages(t *testing.T, e *env) ([]screenPage, string) {
	t.Helper()
	ctx := t.Context()
	screens := populate(t, e)
	pid := e.boot.Project.ID
	base := "/projects/" + pid
	e.sendMail(t, e.boot.Inbox, "a@example.com", []string{"b@example.com"},
		"From: Plain <plain@example.com>\nTo: b@example.com\nSubject: Plain text only\n\nHello there\n")
	msgs, err := e.st.Messages(ctx, e.boot.Inbox.ID, store.MessageFilter{}, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	plain := base + "/messages/" + msgs.Items[0].ID
	resp, err := http.Post("http://"+e.srv.CaptureAddr().String()+"/"+e.boot.Endpoint.ID+"/hooks?x=1", "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	reqs, err := e.st.Requests(ctx, e.boot.Endpoint.ID, store.RequestFilter{}, store.Page{})
	if err != nil || len(reqs.Items) != 1 {
		t.Fatalf("requests: %v %v", reqs, err)
	}
	empty, err := e.st.CreateEndpoint(ctx, pid, "github", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"projects", "keys", "inboxes", "endpoints", "endpoint-settings", "messages", "messages-search",
		"messages-empty", "message-html", "message-links", "message-codes", "message-attachments",
		"requests", "request-json", "request-binary"}
	var pages []screenPage
	for _, p := range screens.pages {
		if slices.Contains(want, p.name) {
			pages = append(pages, p)
		}
	}
	if len(pages) != len(want) {
		t.Fatalf("populate has %d of the %d pages wanted", len(pages), len(want))
	}
	welcome := ""
	for _, p := range screens.pages {
		if p.name == "message-html" {
			welcome = p.path
		}
	}
	return append(pages,
		screenPage{name: "message-plain", path: plain},
		screenPage{name: "message-plain-html", path: plain + "?tab=html"},
		screenPage{name: "message-html-text", path: welcome + "?tab=text"},
		screenPage{name: "request-no-target", path: base + "/requests/" + reqs.Items[0].ID},
		screenPage{name: "requests-empty", path: base + "/endpoints/" + empty.ID},
	), screens.replay
}

// The names the lists, tabs and project switcher give assistive
// technology: words kept apart, counts out of the tab names, every tab of
// a message there, new captures announced.
func TestBrowserAccessibleNames(t *testing.T) {
	e := start(t)
	b := newBrowser(t, e, desktop)
	b.signIn()
	pid := e.boot.Project.ID
	inbox := "/projects/" + pid + "/inboxes/" + e.boot.Inbox.ID
	b.open(inbox)
	b.waitFor(`!document.querySelector("[data-live-status]").hidden`)

	// The project switcher's name holds what it shows.
	if got := b.accessibleName("details.project-menu summary"); got != "Project: default free" {
		t.Errorf("project switcher named %q, want %q", got, "Project: default free")
	}

	// A new capture is announced politely, by the list's count alone.
	status := `document.querySelector(".list-count[role=status]")`
	if got := eval[string](b, status+`?.textContent.trim() ?? "no status"`); got != "0 messages" {
		t.Errorf("list count status before: %q, want 0 messages", got)
	}
	e.sendMail(t, e.boot.Inbox, "a@example.com", []string{"b@example.com"},
		"From: Plain <plain@example.com>\nTo: b@example.com\nSubject: Plain text only\n\nHello there\n")
	b.waitFor(`document.querySelector("a.row") !== null`)
	if got := eval[string](b, status+`?.textContent.trim() ?? "no status"`); got != "1 message" {
		t.Errorf("list count status after a live message: %q, want 1 message", got)
	}
	if eval[bool](b, `document.querySelector("ul.rows").closest("[aria-live], [role=status], [role=log]") !== null`) {
		t.Error("the rows are inside a live region: every row's content would be read out")
	}

	// A row's name keeps the subject and the snippet apart, in the list
	// as sent live and as rendered by the server.
	for _, how := range []string{"live", "reloaded"} {
		name := b.accessibleName("a.row")
		if !strings.Contains(name, "Plain text only Hello there") {
			t.Errorf("%s message row named %q: subject and snippet run together", how, name)
		}
		b.open(inbox)
	}
	// So does the sidebar's link: the inbox's name, then its count.
	if got := b.accessibleName(".side a[aria-current=page]"); got != "default 1" {
		t.Errorf("sidebar link named %q, want %q", got, "default 1")
	}

	// A request row keeps its columns apart too.
	resp, err := http.Post("http://"+e.srv.CaptureAddr().String()+"/"+e.boot.Endpoint.ID+"/hooks?x=1", "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	b.open("/projects/" + pid + "/endpoints/" + e.boot.Endpoint.ID)
	if got := b.accessibleName("a.row"); !strings.HasPrefix(got, "POST /hooks?x=1 application/json ") {
		t.Errorf("request row named %q", got)
	}

	// Every part of a message is a tab, named without its count, even a
	// part the message does not have, which says so.
	b.open(inbox)
	b.clickCSSAndLoad("a.row")
	var names []string
	for _, id := range []string{"html", "text", "source", "headers", "links", "codes", "attachments"} {
		names = append(names, b.accessibleName("#tab-"+id))
	}
	if want := []string{"HTML", "Text", "Source", "Headers", "Links", "Codes", "Attachments"}; !slices.Equal(names, want) {
		t.Errorf("tabs named %q, want %q", names, want)
	}
	if got := run(b, textOf("#tab-links")); got != "Links (0)" {
		t.Errorf("the Links tab shows %q, want its count: Links (0)", got)
	}
	if !b.has("tab", "Links") {
		t.Error("no tab named exactly Links")
	}
	b.clickAndLoad("tab", "HTML")
	if got := run(b, textOf("[role=tabpanel]")); got != "This message has no HTML part." {
		t.Errorf("the HTML tab of a text-only message shows %q", got)
	}
	if b.has("button", "Load images") || eval[bool](b, `document.querySelector("iframe") !== null`) {
		t.Error("the HTML tab of a text-only message offers a frame or images")
	}

	// A message with only an HTML part shows the HTML's text in its Text
	// tab, saying so.
	e.sendMail(t, e.boot.Inbox, "a@example.com", []string{"b@example.com"},
		"From: a@example.com\nTo: b@example.com\nSubject: HTML only\nMIME-Version: 1.0\nContent-Type: text/html\n\n<p>Hi</p>\n")
	b.open(inbox)
	b.clickCSSAndLoad("a.row")
	if got := eval[string](b, `document.querySelector("[role=tab][aria-selected=true]").id`); got != "tab-html" {
		t.Errorf("an HTML message opens at %q, want tab-html", got)
	}
	b.clickAndLoad("tab", "Text")
	if got := run(b, textOf("[role=tabpanel]")); got != "This message has no text part: this is the text of its HTML part.\n\nHi" {
		t.Errorf("the Text tab of an HTML-only message shows %q", got)
	}
	b.checkClean()
}

// The project menu closes once the keyboard's focus moves on past it, or
// a tap lands outside it: on a phone its open list covers most of the
// controls the focus reaches next.
func TestBrowserProjectMenuClosesWhenLeft(t *testing.T) {
	e := start(t)
	b := newBrowser(t, e, viewport{width: 390, height: 844, mobile: true})
	b.signIn()
	b.open("/projects/" + e.boot.Project.ID + "/inboxes/" + e.boot.Inbox.ID)
	const menu = `document.querySelector("details.project-menu")`

	eval[bool](b, menu+`.querySelector("summary").focus(), true`)
	b.do(chromedp.KeyEvent(kb.Enter))
	b.waitFor(menu + `.open`)
	// Through the menu's links and on to the next control.
	for range 8 {
		if !eval[bool](b, menu+`.contains(document.activeElement)`) {
			break
		}
		b.do(chromedp.KeyEvent(kb.Tab))
	}
	if eval[bool](b, menu+`.contains(document.activeElement)`) {
		t.Fatal("Tab never left the project menu")
	}
	if eval[bool](b, menu+`.open`) {
		t.Error("the project menu stays open once the focus has left it")
	}
	// What has the focus is what a tap at its middle reaches: nothing
	// covers it.
	if !eval[bool](b, `(() => { const r = document.activeElement.getBoundingClientRect();
		const at = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
		return at !== null && (document.activeElement === at || document.activeElement.contains(at)); })()`) {
		t.Error("the focused control is covered")
	}

	b.do(chromedp.Click(chromedp.CSS(`details.project-menu summary`)))
	b.waitFor(menu + `.open`)
	b.do(chromedp.MouseClickXY(200, 800))
	b.waitFor(`!` + menu + `.open`)

	// A tap on one of its own links still follows it.
	b.do(chromedp.Click(chromedp.CSS(`details.project-menu summary`)))
	b.waitFor(menu + `.open`)
	b.clickCSSAndLoad(`details.project-menu a[href="/projects"]`)
	if got := b.location(); !strings.HasSuffix(got, "/projects") {
		t.Errorf("the menu's link led to %s", got)
	}
}
