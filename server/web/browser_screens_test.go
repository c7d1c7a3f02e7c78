package web_test

import (
	"cmp"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/capturedev/capture/store"
)

// TestBrowserEveryPageAtEverySize opens every page at 1280×800 and 360×800 (SPEC §11: usable at 360 px),
// light and dark, and checks that each answers with its status and that
// none scrolls sideways or breaks its own policy. With
// CAPTURE_SCREENSHOTS=DIR it also saves a screenshot of each.
func TestBrowserEveryPageAtEverySize(t *testing.T) {
	e := start(t)
	pages := populate(t, e)
	dir := screenshotDir(t)
	modes := []struct {
		name string
		vp   viewport
	}{
		{"desktop-light", viewport{width: 1280, height: 800}},
		{"desktop-dark", viewport{width: 1280, height: 800, dark: true}},
		{"phone-light", viewport{width: 360, height: 800, mobile: true}},
		{"phone-dark", viewport{width: 360, height: 800, mobile: true, dark: true}},
	}
	b := newBrowser(t, e, desktop)
	for _, m := range modes {
		b.setViewport(m.vp)
		b.open("/login")
		shoot(t, b, dir, m.name, "00-login-no-password")
		b.open("/login")
		shoot(t, b, dir, m.name, "01-login")
		b.signIn()
		for i, p := range pages.pages {
			if got, want := b.openStatus(p.path), cmp.Or(p.status, http.StatusOK); got != want {
				t.Errorf("%s %s answered %d, want %d", m.name, p.name, got, want)
			}
			if p.wait != "" {
				b.waitFor(p.wait)
			}
			if overflow := eval[int](b, `document.documentElement.scrollWidth - document.documentElement.clientWidth`); overflow > 0 {
				t.Errorf("%s %s scrolls sideways by %d px", m.name, p.name, overflow)
			}
			shoot(t, b, dir, m.name, fmt.Sprintf("%02d-%s", i+2, p.name))
		}
		// A replay's answer is the page that answers the form.
		b.open(pages.replay)
		b.clickAndLoad("button", "Replay")
		if overflow := eval[int](b, `document.documentElement.scrollWidth - document.documentElement.clientWidth`); overflow > 0 {
			t.Errorf("%s the replayed request scrolls sideways by %d px", m.name, overflow)
		}
		shoot(t, b, dir, m.name, fmt.Sprintf("%02d-request-replayed", len(pages.pages)+2))
		// Without the page's script, Delete asks on a page of its own;
		// Cancel goes back with nothing deleted.
		b.open(pages.replay)
		eval[any](b, `document.querySelector("form[data-confirm]").removeAttribute("data-confirm")`)
		b.clickAndLoad("button", "Delete")
		if !b.has("link", "Cancel") {
			t.Errorf("%s: no confirmation page for Delete without the script", m.name)
		}
		shoot(t, b, dir, m.name, fmt.Sprintf("%02d-confirm-without-script", len(pages.pages)+3))
		b.clickAndLoad("link", "Cancel")
		b.clickAndLoad("button", "Sign out")
	}
	b.checkClean()
}

func shoot(t *testing.T, b *browser, dir, mode, name string) {
	t.Helper()
	if dir == "" {
		return
	}
	png := run(b, chromedp.CaptureScreenshot())
	if err := os.WriteFile(filepath.Join(dir, mode+"-"+name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

type screenPage struct {
	name, path, wait string
	// status is the page's HTTP status when it is not 200.
	status int
}

// screens are the pages to look at, and a request to replay.
type screens struct {
	pages  []screenPage
	replay string
}

// populate fills the data dir the way a day of development does, and
// returns every page of the interface with something on it.
func populate(t *testing.T, e *env) screens {
	t.Helper()
	ctx := t.Context()
	pid := e.boot.Project.ID
	in := e.boot.Inbox
	second, err := e.st.CreateInbox(ctx, pid, "password-reset-tests")
	if err != nil {
		t.Fatal(err)
	}
	empty, err := e.st.CreateInbox(ctx, pid, "newsletters")
	if err != nil {
		t.Fatal(err)
	}
	targetBase, _ := replayTarget(t)
	target := targetBase + "/webhooks"
	stripe, err := e.st.CreateEndpoint(ctx, pid, "stripe", &target)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.CreateProject(ctx, "staging", "pro"); err != nil {
		t.Fatal(err)
	}

	senders := []struct{ from, to, subject, text string }{
		{`"Acme Shop" <orders@acme.test>`, "alice@example.com", "Your order #10234 has shipped", "Your parcel is on its way. Track it at https://acme.test/track/10234"},
		{`"Acme" <no-reply@acme.test>`, "bob@example.com", "Confirm your email address", "Welcome! Confirm your address: https://acme.test/confirm?token=abc123"},
		{`security@acme.test`, "carol@example.com", "Your sign-in code is 482913", "Use 482913 to sign in. It expires in 10 minutes."},
		{`"Billing" <billing@acme.test>`, "alice@example.com, finance@example.com", "Invoice INV-2044 for November", "Your invoice is attached."},
	}
	for _, s := range senders {
		e.sendMail(t, in, "app@acme.test", []string{"dev@example.com"},
			"From: "+s.from+"\nTo: "+s.to+"\nSubject: "+s.subject+"\nDate: "+time.Now().Format(time.RFC1123Z)+"\n\n"+s.text+"\n")
	}
	e.sendMail(t, second, "app@acme.test", []string{"dave@example.com"},
		"From: \"Acme\" <no-reply@acme.test>\nTo: dave@example.com\nSubject: Reset your password\n\nReset it here: https://acme.test/reset?t=1\n")
	html := `<!doctype html><html><body style="margin:0;background:#f4f4f7;font-family:Helvetica,Arial,sans-serif">
<table width="100%" cellpadding="0" cellspacing="0"><tr><td align="center" style="padding:32px 12px">
<table width="560" cellpadding="0" cellspacing="0" style="background:#fff;border-radius:8px;padding:32px;max-width:100%">
<tr><td><h1 style="font-size:22px;color:#222;margin:0 0 16px">Welcome to Acme, Erin!</h1>
<p style="color:#444;line-height:1.5">Thanks for signing up. Confirm your email address to finish creating your account.</p>
<p style="text-align:center;margin:28px 0"><a href="https://acme.test/verify?token=9f8e7d" style="background:#4f46e5;color:#fff;padding:12px 22px;border-radius:6px;text-decoration:none;font-weight:bold">Confirm my address</a></p>
<img src="https://images.acme.test/banner.png" width="496" height="120" alt="Acme banner" style="display:block;max-width:100%">
<p style="color:#888;font-size:12px;margin-top:28px">You got this because you signed up at acme.test. <a href="https://acme.test/unsubscribe">Unsubscribe</a></p>
</td></tr></table></td></tr></table></body></html>`
	e.sendMail(t, in, "app@acme.test", []string{"erin@example.com"}, mimeWithAttachment("Welcome to Acme, Erin!", html, "Acme_Terms_of_Service_and_Privacy_Policy_2026_11_24_final.pdf", "%PDF-1.4 terms"))

	post := func(path, contentType, body string) {
		resp, err := http.Post("http://"+e.srv.CaptureAddr().String()+"/"+stripe.ID+path, contentType, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	post("/webhooks/stripe", "application/json", `{"id":"evt_1","type":"payment_intent.succeeded","data":{"object":{"amount":4200,"currency":"eur"}}}`)
	post("/webhooks/stripe?attempt=2", "application/json", `{"id":"evt_2","type":"invoice.paid","data":{"object":{"total":9900}}}`)
	post("/upload", "application/octet-stream", "\x00\x01\x02binary\xff\xfe payload")
	reqs, err := e.st.Requests(ctx, stripe.ID, store.RequestFilter{}, store.Page{})
	if err != nil || len(reqs.Items) != 3 {
		t.Fatalf("requests: %v %v", reqs, err)
	}
	status := 200
	if _, err := e.st.AddDelivery(ctx, pid, reqs.Items[2].ID, store.NewDelivery{Kind: store.DeliveryForward,
		TargetURL: "http://localhost:3000/webhooks/stripe", ResponseStatus: &status, Duration: 12 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	refused := "dial tcp 127.0.0.1:3000: connect: connection refused"
	if _, err := e.st.AddDelivery(ctx, pid, reqs.Items[1].ID, store.NewDelivery{Kind: store.DeliveryForward,
		TargetURL: "http://localhost:3000/webhooks/stripe?attempt=2", Error: &refused, Duration: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	msgs, err := e.st.Messages(ctx, in.ID, store.MessageFilter{}, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	welcome := "/projects/" + pid + "/messages/" + msgs.Items[0].ID
	signInCode := "/projects/" + pid + "/messages/" + msgs.Items[2].ID
	base := "/projects/" + pid
	return screens{replay: "/projects/" + pid + "/requests/" + reqs.Items[2].ID, pages: []screenPage{
		{name: "projects", path: "/projects"},
		{name: "keys", path: base + "/keys"},
		{name: "inboxes", path: base + "/inboxes"},
		{name: "endpoints", path: base + "/endpoints"},
		{name: "endpoint-settings", path: base + "/endpoints/" + stripe.ID + "/settings"},
		{name: "messages", path: base + "/inboxes/" + in.ID, wait: `!document.querySelector("[data-live-status]").hidden`},
		{name: "messages-search", path: base + "/inboxes/" + in.ID + "?q=acme&to=alice&subject=order", wait: `!document.querySelector("[data-live-status]").hidden`},
		{name: "messages-bad-search", path: base + "/inboxes/" + in.ID + "?q=%22your+order&from=acme", status: http.StatusBadRequest},
		{name: "messages-no-match", path: base + "/inboxes/" + in.ID + "?q=%22never+sent%22"},
		{name: "messages-empty", path: base + "/inboxes/" + empty.ID},
		{name: "message-html", path: welcome},
		{name: "message-text", path: "/projects/" + pid + "/messages/" + msgs.Items[1].ID + "?tab=text"},
		{name: "message-source", path: welcome + "?tab=source"},
		{name: "message-headers", path: welcome + "?tab=headers"},
		{name: "message-links", path: welcome + "?tab=links"},
		{name: "message-codes", path: signInCode + "?tab=codes"},
		{name: "message-attachments", path: welcome + "?tab=attachments"},
		{name: "requests", path: base + "/endpoints/" + stripe.ID},
		{name: "requests-search", path: base + "/endpoints/" + stripe.ID + "?q=invoice.paid&method=POST&path=/webhooks", wait: `!document.querySelector("[data-live-status]").hidden`},
		{name: "requests-bad-search", path: base + "/endpoints/" + stripe.ID + "?q=%22invoice&method=POST", status: http.StatusBadRequest},
		{name: "request-json", path: "/projects/" + pid + "/requests/" + reqs.Items[2].ID},
		{name: "request-binary", path: "/projects/" + pid + "/requests/" + reqs.Items[0].ID},
		{name: "not-found", path: base + "/messages/msg_nothere", status: http.StatusNotFound},
	}}
}

// On a phone a hex dump keeps its columns (it scrolls within itself), and
// captured text that carries bidi controls cannot reorder the text after
// it in a list row.
func TestBrowserHexDumpAndBidiIsolation(t *testing.T) {
	e := start(t)
	b := newBrowser(t, e, viewport{width: 360, height: 800, mobile: true})
	b.signIn()
	pid := e.boot.Project.ID
	e.sendMail(t, e.boot.Inbox, "a@example.com", []string{"b@example.com"},
		"Subject: \u202eRLO override gnp.exe\nContent-Type: text/plain; charset=utf-8\n\nsnippet after the override\n")
	b.open("/projects/" + pid + "/inboxes/" + e.boot.Inbox.ID)
	if got := eval[string](b, `getComputedStyle(document.querySelector("a.row .snip")).unicodeBidi`); got != "isolate" {
		t.Errorf("a row's snippet is not isolated from the subject's bidi controls: unicode-bidi %q", got)
	}
	resp, err := http.Post("http://"+e.srv.CaptureAddr().String()+"/"+e.boot.Endpoint.ID+"/bin", "application/octet-stream",
		strings.NewReader(strings.Repeat("\x00\x01\x02\xff binary payload ", 8)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	reqs, err := e.st.Requests(t.Context(), e.boot.Endpoint.ID, store.RequestFilter{}, store.Page{})
	if err != nil || len(reqs.Items) != 1 {
		t.Fatalf("requests: %v %v", reqs, err)
	}
	b.open("/projects/" + pid + "/requests/" + reqs.Items[0].ID)
	if got := eval[string](b, `getComputedStyle(document.querySelector("pre.hexdump")).whiteSpace`); got != "pre" {
		t.Errorf("the hex dump wraps its lines: white-space %q", got)
	}
	if overflow := eval[int](b, `document.documentElement.scrollWidth - document.documentElement.clientWidth`); overflow > 0 {
		t.Errorf("the request page scrolls sideways by %d px", overflow)
	}
	// Escape closes the project menu, its button keeping the focus.
	b.do(chromedp.Click(chromedp.CSS(`details.project-menu summary`)))
	b.waitFor(`document.querySelector("details.project-menu").open`)
	b.do(chromedp.KeyEvent(kb.Escape))
	b.waitFor(`!document.querySelector("details.project-menu").open && document.activeElement.matches("details.project-menu summary")`)
}

// screenshotDir is where pages are saved as PNGs (CAPTURE_SCREENSHOTS),
// or "" for none.
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("CAPTURE_SCREENSHOTS")
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The column a list is scanned by, a message's subject or a request's
// path, gets the room the others leave at every desktop width, as they
// are capped and shrink with the window; a phone keeps its two-line rows.
// A cut subject or path is whole in its title. With CAPTURE_SCREENSHOTS
// the lists are saved at each width.
func TestBrowserListsGiveTheRoomToSubjectAndPath(t *testing.T) {
	e := start(t)
	pages := populate(t, e)
	dir := screenshotDir(t)
	long := "/webhooks/stripe/accounts/acct_1PqR2sT3uV4wX5yZ/events/payment_intent.succeeded"
	resp, err := http.Post("http://"+e.srv.CaptureAddr().String()+"/"+idOf(pages, "requests")+long+"?attempt=3",
		"application/x-www-form-urlencoded", strings.NewReader("a=1"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	b := newBrowser(t, e, desktop)
	b.signIn()
	width := func(css string) float64 {
		return eval[float64](b, `document.querySelector(`+strconvQuote(css)+`).getBoundingClientRect().width`)
	}
	for _, w := range []int64{1024, 1280, 1440} {
		b.setViewport(viewport{width: w, height: 800})
		b.open(pages.path("messages"))
		subj, from, to := width("a.row .c-subj"), width("a.row .c-from"), width("a.row .c-to")
		if subj < 1.5*max(from, to) {
			t.Errorf("at %d px the subject is %.0f px wide beside from %.0f and to %.0f", w, subj, from, to)
		}
		shoot(t, b, dir, fmt.Sprintf("width-%d", w), "messages")
		b.open(pages.path("requests"))
		path, typ := width("a.row .c-path"), width("a.row .c-type")
		if path < 2*typ {
			t.Errorf("at %d px the path is %.0f px wide beside the type's %.0f", w, path, typ)
		}
		if overflow := eval[int](b, `document.documentElement.scrollWidth - document.documentElement.clientWidth`); overflow > 0 {
			t.Errorf("at %d px the requests scroll sideways by %d px", w, overflow)
		}
		shoot(t, b, dir, fmt.Sprintf("width-%d", w), "requests")
	}
	if got := eval[string](b, `document.querySelector("a.row .c-path").title`); got != long+"?attempt=3" {
		t.Errorf("the path cell's title is %q", got)
	}
	b.open(pages.path("messages"))
	if got := eval[string](b, `document.querySelector("a.row .c-subj").title`); got != "Welcome to Acme, Erin!" {
		t.Errorf("the subject cell's title is %q", got)
	}

	// A phone keeps its rows of two lines.
	b.setViewport(viewport{width: 390, height: 844, mobile: true})
	b.open(pages.path("requests"))
	if got := eval[string](b, `getComputedStyle(document.querySelector("a.row")).gridTemplateAreas`); got != `"method path path time" "method type size dlv"` {
		t.Errorf("on a phone a request row is laid out as %s", got)
	}
	shoot(t, b, dir, "width-390", "requests")
	b.open(pages.path("messages"))
	shoot(t, b, dir, "width-390", "messages")
	b.checkClean()
}

// path is the address of the screen of this name.
func (s screens) path(name string) string {
	for _, p := range s.pages {
		if p.name == name {
			return p.path
		}
	}
	panic("no screen " + name)
}

// idOf is the id at the end of the screen's address.
func idOf(s screens, name string) string {
	p := s.path(name)
	return p[strings.LastIndex(p, "/")+1:]
}

// A right-to-left plain text body reads right to left, each line in its
// own direction: in a message's Text and Source tabs (where the headers
// above it stay left to right) and in a request's body. The full stop
// after a number ends the line on its left, as an Arabic reader expects.
func TestBrowserRightToLeftBodies(t *testing.T) {
	e := start(t)
	pid := e.boot.Project.ID
	arabic := "مرحبا أحمد،\nرمز التحقق الخاص بك هو 771204."
	e.sendMail(t, e.boot.Inbox, "a@example.com", []string{"b@example.com"},
		"From: a@example.com\nTo: b@example.com\nSubject: رمز التحقق\nContent-Type: text/plain; charset=utf-8\n\n"+arabic+"\nThe code is 771204.\n")
	msgs, err := e.st.Messages(t.Context(), e.boot.Inbox.ID, store.MessageFilter{}, store.Page{})
	if err != nil || len(msgs.Items) != 1 {
		t.Fatalf("messages: %v %v", msgs, err)
	}
	req := sendWebhook(t, e, "POST", e.boot.Endpoint.ID, "/sms", http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, arabic)

	b := newBrowser(t, e, desktop)
	b.signIn()
	dir := screenshotDir(t)
	// stopSide says on which side of its number the full stop after the
	// line's text is drawn, and which side of the box the line keeps to.
	stopSide := func(pre, line string) (string, string) {
		got := eval[[]string](b, `(() => {
			const pre = document.querySelector(`+strconvQuote(pre)+`), line = `+strconvQuote(line)+`;
			const walk = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
			let n;
			while ((n = walk.nextNode()) && !n.data.includes(line)) {}
			if (!n) return ["missing", "missing"];
			const at = n.data.indexOf(line), stop = at + line.length - 1, digit = n.data.indexOf("771204", at);
			const box = (from, to) => { const r = document.createRange(); r.setStart(n, from); r.setEnd(n, to); return r.getBoundingClientRect(); };
			const l = box(at, stop + 1), p = pre.getBoundingClientRect();
			const side = p.right - l.right < l.left - p.left ? "right" : "left";
			if (digit < 0 || digit > stop) return ["no number", side];
			return [box(stop, stop + 1).right <= box(digit, digit + 1).left ? "left" : "right", side];
		})()`)
		return got[0], got[1]
	}
	check := func(where, pre string) {
		t.Helper()
		if stop, side := stopSide(pre, "رمز التحقق الخاص بك هو 771204."); stop != "left" || side != "right" {
			t.Errorf("%s: the Arabic line's full stop is on the %s of its number, the line on the %s", where, stop, side)
		}
		if stop, side := stopSide(pre, "The code is 771204."); stop != "right" || side != "left" {
			t.Errorf("%s: the English line's full stop is on the %s of its number, the line on the %s", where, stop, side)
		}
	}
	msg := "/projects/" + pid + "/messages/" + msgs.Items[0].ID
	b.open(msg + "?tab=text")
	check("message text", "pre.body-text")
	shoot(t, b, dir, "desktop-light", "rtl-message-text")
	b.open(msg + "?tab=source")
	check("message source", "pre.source")
	if _, side := stopSide("pre.source", "Subject: "); side != "left" {
		t.Errorf("message source: the Subject header keeps to the %s", side)
	}
	shoot(t, b, dir, "desktop-light", "rtl-message-source")
	b.open("/projects/" + pid + "/requests/" + req)
	if stop, side := stopSide("pre.body-text", "رمز التحقق الخاص بك هو 771204."); stop != "left" || side != "right" {
		t.Errorf("request body: the Arabic line's full stop is on the %s of its number, the line on the %s", stop, side)
	}
	shoot(t, b, dir, "desktop-light", "rtl-request")
	b.checkClean()
}
