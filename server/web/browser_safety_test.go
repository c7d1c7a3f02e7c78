package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// xssMessage carries script in every part a page shows: subject, names and
// addresses, a header, the text and HTML bodies, links and an attachment's
// name. Each payload would open an alert if it ran.
const xssMessage = `From: "<img src=x onerror=alert('from')>" <evil@example.com>
To: "<script>alert('to')</script>" <victim@example.com>
Cc: "\"><svg onload=alert('cc')>" <cc@example.com>
Subject: <script>alert('subject')</script> "><img src=x onerror=alert('subject-img')>
X-Evil: "><svg/onload=alert('header')>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary=B1

--B1
Content-Type: multipart/alternative; boundary=B2

--B2
Content-Type: text/plain; charset=utf-8

<script>alert('text')</script> "><img src=x onerror=alert('text-img')>
javascript:alert('text-link') https://example.com/"><script>alert('url')</script>
--B2
Content-Type: text/html; charset=utf-8

<p>Click <a href="javascript:alert('html-link')">here</a> or <a href="https://example.com/?q=%22%3E%3Cscript%3E">"><img src=x onerror=alert('anchor')></a></p>
<img src=x onerror="document.body.setAttribute('data-ran', 'img'); alert('html-img')">
<script>document.body.setAttribute('data-ran', 'script'); alert('html-script')</script>
<iframe src="javascript:alert('frame')"></iframe>
--B2--
--B1
Content-Type: text/html; name="\"><img src=x onerror=alert('att')>.html"
Content-Disposition: attachment; filename="\"><img src=x onerror=alert('att')>.html"

<script>alert('attachment')</script>
--B1--
`

// inert checks the page: only the interface's own script, no event
// handler attributes, no javascript: links, nothing injected.
func (b *browser) inert(where string) {
	b.t.Helper()
	problems := eval[[]string](b, `(() => {
		const out = [];
		for (const s of document.scripts) if (!/^\/static\/app\.[0-9a-f]+\.js$/.test(new URL(s.src || "x:", location.href).pathname)) out.push("script: " + s.outerHTML);
		for (const el of document.querySelectorAll("*")) for (const a of el.attributes) if (a.name.startsWith("on")) out.push("handler: " + el.outerHTML.slice(0, 120));
		for (const a of document.querySelectorAll("a[href], iframe[src], img[src]")) {
			const u = a.getAttribute("href") ?? a.getAttribute("src");
			if (/^\s*javascript:/i.test(u)) out.push("javascript url: " + a.outerHTML.slice(0, 120));
		}
		for (const el of document.querySelectorAll("svg, img")) if (!el.closest(".logo, .c-att")) out.push("element: " + el.outerHTML.slice(0, 120));
		return out;
	})()`)
	for _, p := range problems {
		b.t.Errorf("%s: %s", where, p)
	}
}

func TestBrowserXSSCorpusIsInert(t *testing.T) {
	e := start(t)
	b := newBrowser(t, e, desktop)
	b.signIn()
	pid := e.boot.Project.ID
	e.sendMail(t, e.boot.Inbox, "evil@example.com", []string{"victim@example.com"}, xssMessage)
	postWebhook(t, e, e.boot.Endpoint.ID,
		`/%3Cscript%3Ealert('path')%3C%2Fscript%3E?q=%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert('query')%3E`,
		http.Header{"Content-Type": {"text/html"}, "X-Evil": {`"><svg onload=alert('request-header')>`}},
		`<script>alert('body')</script>"><img src=x onerror=alert('body-img')>`)

	b.open("/projects/" + pid + "/inboxes/" + e.boot.Inbox.ID)
	b.inert("message list")
	if got := run(b, textOf(`a.row .subj`)); !strings.Contains(got, `<script>alert('subject')</script>`) {
		t.Errorf("the subject is not shown as text: %q", got)
	}
	b.clickCSSAndLoad(`a.row`)
	if got := run(b, textOf(`h1`)); !strings.HasPrefix(got, `<script>alert('subject')</script>`) {
		t.Errorf("the message heading: %q", got)
	}
	for _, tab := range []string{"HTML", "Text", "Source", "Headers", "Links", "Codes", "Attachments"} {
		b.clickAndLoad("tab", tab)
		b.inert(tab + " tab")
	}
	if got := run(b, textOf(`table td`)); !strings.Contains(got, `><img src=x onerror=alert('att')>.html`) {
		t.Errorf("the attachment name is not shown as text: %q", got)
	}
	// The HTML body's own script and handlers did not run in its frame.
	b.clickAndLoad("tab", "HTML")
	if ran := b.frameEval(`document.body.getAttribute("data-ran")`); ran != "" {
		t.Errorf("the HTML body's %s ran in its frame", ran)
	}

	b.open("/projects/" + pid + "/endpoints/" + e.boot.Endpoint.ID)
	b.inert("request list")
	b.clickCSSAndLoad(`a.row`)
	b.inert("request")
	if got := run(b, textOf(`#query-head + table td`)); got != `"><img src=x onerror=alert('query')>` {
		t.Errorf("the query parameter is not shown as text: %q", got)
	}
	if got := run(b, textOf(`pre.body-text`)); !strings.HasPrefix(got, `<script>alert('body')</script>`) {
		t.Errorf("the request body is not shown as text: %q", got)
	}
	b.checkClean()
}

func TestBrowserCSRFlessPostRefused(t *testing.T) {
	e := start(t)
	b := newBrowser(t, e, desktop)
	b.signIn()
	pid := e.boot.Project.ID
	if _, err := e.st.RevokeKey(t.Context(), e.boot.Key.ID); err != nil {
		t.Fatal(err)
	}
	b.open("/projects/" + pid + "/keys")
	// The page's own origin, with the session cookie, but no token.
	status := eval[int](b, `fetch("/projects/`+pid+`/keys", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "x=1"}).then(r => r.status)`)
	if status != http.StatusForbidden {
		t.Errorf("POST without a CSRF token: %d", status)
	}
	keys, _ := e.st.Keys(t.Context(), pid)
	for _, k := range keys {
		if k.RevokedAt == nil {
			t.Errorf("a key was created without a CSRF token: %s", k.ID)
		}
	}
	// The read API does not take the session cookie either.
	if status := eval[int](b, `fetch("/api/v1/me").then(r => r.status)`); status != http.StatusUnauthorized {
		t.Errorf("read API with the session cookie: %d", status)
	}
}

func TestBrowserKeyboard(t *testing.T) {
	e := start(t)
	b := newBrowser(t, e, desktop)
	b.signIn()
	for _, subject := range []string{"Welcome aboard", "Reset your password", "Your code is 123456"} {
		e.sendMail(t, e.boot.Inbox, "app@example.com", []string{"dev@example.com"},
			"From: app@example.com\nTo: dev@example.com\nSubject: "+subject+"\n\nbody\n")
	}
	b.open("/projects/" + e.boot.Project.ID + "/inboxes/" + e.boot.Inbox.ID)
	b.typeKey("/", "Slash", 191)
	if id := eval[string](b, `document.activeElement.id`); id != "search" {
		t.Fatalf("/ focused %q, want the search box", id)
	}
	b.pressAndLoad("reset" + kb.Enter)
	if n := eval[int](b, `document.querySelectorAll("a.row").length`); n != 1 {
		t.Fatalf("search for reset shows %d rows on %s", n, b.location())
	}
	b.do(chromedp.KeyEvent(kb.Escape))
	b.typeKey("j", "KeyJ", 74)
	if focused := eval[string](b, `document.activeElement.className`); !strings.Contains(focused, "row") {
		t.Fatalf("j focused %q", focused)
	}
	b.pressAndLoad(kb.Enter)
	if got := run(b, textOf(`h1`)); got != "Reset your password" {
		t.Errorf("Enter opened %q", got)
	}
	// Focus is visible: the focused row has an outline.
	b.open("/projects/" + e.boot.Project.ID + "/inboxes/" + e.boot.Inbox.ID)
	b.typeKey("j", "KeyJ", 74)
	if outline := eval[string](b, `getComputedStyle(document.activeElement).outlineStyle`); outline == "none" {
		t.Errorf("the focused row shows no outline")
	}
	b.checkClean()
}
