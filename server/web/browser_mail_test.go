package web_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/capturedev/capture/store"
)

// imageProbe is a web server that reports each request for its image, to
// show when a message's remote image is loaded.
func imageProbe(t *testing.T) (string, <-chan string) {
	t.Helper()
	hits := make(chan string, 16)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- r.URL.Path
		w.Header().Set("Content-Type", "image/gif")
		w.Write([]byte("GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"))
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String(), hits
}

func TestBrowserLiveMessageHTMLSandboxAndAttachment(t *testing.T) {
	e := start(t)
	probe, hits := imageProbe(t)
	b := newBrowser(t, e, desktop)
	b.signIn()
	pid := e.boot.Project.ID
	b.open("/projects/" + pid + "/inboxes/" + e.boot.Inbox.ID)
	b.waitFor(`!document.querySelector("[data-live-status]").hidden`)

	html := `<!doctype html><html><body><h1 id="greeting">Hello from HTML</h1>` +
		`<img src="` + probe + `/pixel.gif" alt="pixel">` +
		`<script>document.body.setAttribute("data-ran", "yes")</script></body></html>`
	pdf := "%PDF-1.4 pretend\x00\x01binary"
	raw := "From: Shop <shop@example.com>\nTo: Alice <alice@example.com>\nSubject: Your receipt\nMIME-Version: 1.0\n" +
		"Content-Type: multipart/mixed; boundary=B1\n\n--B1\nContent-Type: text/html; charset=utf-8\n\n" + html +
		"\n--B1\nContent-Type: application/pdf; name=receipt.pdf\nContent-Disposition: attachment; filename=receipt.pdf\n" +
		"Content-Transfer-Encoding: base64\n\n" + b64(pdf) + "\n--B1--\n"
	e.sendMail(t, e.boot.Inbox, "shop@example.com", []string{"alice@example.com"}, raw)

	// It appears without a reload, counted in the sidebar too.
	b.waitFor(`document.querySelector("a.row .subj")?.textContent === "Your receipt"`)
	if got := eval[string](b, `document.querySelector(".side a[aria-current=page] .count").textContent`); got != "1" {
		t.Errorf("sidebar count after a live message: %q, want 1", got)
	}
	if got := run(b, textOf(`a.row .c-from`)); got != "Shop" {
		t.Errorf("from column %q", got)
	}
	b.clickCSSAndLoad(`a.row`)

	// The parts are tabs: the open one selected, the panel named by it,
	// arrow keys moving between them.
	if !b.has("tab", "HTML") || eval[string](b, `document.getElementById("tab-html").getAttribute("aria-selected")`) != "true" ||
		eval[string](b, `document.querySelector("[role=tabpanel]").getAttribute("aria-labelledby")`) != "tab-html" {
		t.Error("the HTML part is not the selected tab of the panel")
	}
	// The tab list is one stop in the Tab order, at the selected tab.
	if got := eval[string](b, `[...document.querySelectorAll("[role=tab]")].filter(t => t.tabIndex >= 0).map(t => t.id).join()`); got != "tab-html" {
		t.Errorf("tabs in the Tab order: %q, want only tab-html", got)
	}
	b.do(chromedp.Focus(chromedp.CSS(`#tab-html`)), chromedp.KeyEvent(kb.ArrowRight))
	if got := eval[string](b, `document.activeElement.id`); got != "tab-text" {
		t.Errorf("ArrowRight from HTML focused %q, want tab-text", got)
	}
	if got := eval[string](b, `[...document.querySelectorAll("[role=tab]")].filter(t => t.tabIndex >= 0).map(t => t.id).join()`); got != "tab-text" {
		t.Errorf("after ArrowRight the tabs in the Tab order are %q, want only tab-text", got)
	}
	b.do(chromedp.KeyEvent(kb.ArrowLeft), chromedp.KeyEvent(kb.ArrowLeft))
	if got := eval[string](b, `document.activeElement.id`); got != "tab-attachments" {
		t.Errorf("ArrowLeft twice from Text focused %q, want tab-attachments (it wraps)", got)
	}

	// The HTML tab shows the body in a sandboxed frame, without its script
	// and without the remote image until asked.
	sandbox := run(b, chromedp.AttributeValue(chromedp.CSS(`iframe.mail-html`), "sandbox"))
	if !sandbox.Exists || strings.Contains(sandbox.Value, "allow-scripts") || strings.Contains(sandbox.Value, "allow-same-origin") {
		t.Fatalf("iframe sandbox attribute %+v", sandbox)
	}
	frame := b.frameText(`#greeting`)
	if frame != "Hello from HTML" {
		t.Errorf("frame shows %q", frame)
	}
	if ran := b.frameEval(`document.body.getAttribute("data-ran")`); ran != "" {
		t.Errorf("the message's script ran: data-ran=%q", ran)
	}
	select {
	case p := <-hits:
		t.Fatalf("remote image %s loaded before Load images", p)
	default:
	}
	b.click("button", "Load images")
	select {
	case p := <-hits:
		if p != "/pixel.gif" {
			t.Errorf("probe got %s", p)
		}
	case <-time.After(stepTimeout):
		t.Fatal("Load images did not load the remote image")
	}

	// The attachment downloads as a file.
	b.clickAndLoad("tab", "Attachments")
	name, data := b.download("link", "Download receipt.pdf")
	if name != "receipt.pdf" || !bytes.Equal(data, []byte(pdf)) {
		t.Errorf("downloaded %q: %q", name, data)
	}

	// Delete asks first, then removes the message and goes back to the list.
	b.clickAndLoad("button", "Delete")
	if !b.asked("Delete this message?") {
		t.Error("Delete did not ask first")
	}
	if got := run(b, textOf(`[role=status]`)); !strings.Contains(got, "Deleted the message") {
		t.Errorf("after Delete: %q", got)
	}
	if left, _ := e.st.Messages(t.Context(), e.boot.Inbox.ID, store.MessageFilter{}, store.Page{}); len(left.Items) != 0 {
		t.Errorf("%d messages left after Delete", len(left.Items))
	}
	b.checkClean()
}

// An image the message carries itself (a cid: reference to a part of
// it, as a logo in a multipart/related body) shows at once, before "Load
// images", which is for images from elsewhere: also when it is
// referenced many times, when its part is labelled
// application/octet-stream, when the reference keeps the Content-ID's
// angle brackets, and when the message's own <base href> points
// elsewhere.
func TestBrowserInlineImage(t *testing.T) {
	e := start(t)
	probe, hits := imageProbe(t)
	b := newBrowser(t, e, desktop)
	b.signIn()
	logo, signature := pngOf(t, 3, 2), pngOf(t, 5, 1)
	raw := "From: Shop <shop@example.com>\nTo: alice@example.com\nSubject: With a logo\nMIME-Version: 1.0\n" +
		"Content-Type: multipart/related; boundary=R\n\n--R\nContent-Type: text/html; charset=utf-8\n\n" +
		`<!doctype html><base href="http://127.0.0.1:9/elsewhere/">` +
		`<p><img id="logo" src="cid:logo.1@shop.example" alt="Shop">` +
		`<img id="dark" src="cid:logo.1@shop.example-dark" alt="Shop, dark">` +
		`<img id="angle" src="cid:%3Clogo.1@shop.example%3E" alt="Shop, in brackets">` +
		`<img id="sig" src="cid:sig@shop.example" alt="Signature">` +
		`<img id="remote" src="` + probe + `/pixel.gif" alt="pixel"></p>` +
		`<p class="many">` + strings.Repeat(`<img src="cid:logo.1@shop.example" alt="">`, 150) + `</p>` +
		"\n--R\nContent-Type: image/png\nContent-ID: <logo.1@shop.example>\nContent-Disposition: inline; filename=logo.png\n" +
		"Content-Transfer-Encoding: base64\n\n" + base64.StdEncoding.EncodeToString(logo) +
		"\n--R\nContent-Type: application/octet-stream; name=\"signature.png\"\nContent-ID: <sig@shop.example>\n" +
		"Content-Disposition: inline; filename=\"signature.png\"\n" +
		"Content-Transfer-Encoding: base64\n\n" + base64.StdEncoding.EncodeToString(signature) + "\n--R--\n"
	e.sendMail(t, e.boot.Inbox, "shop@example.com", []string{"alice@example.com"}, raw)
	list, err := e.st.Messages(t.Context(), e.boot.Inbox.ID, store.MessageFilter{}, store.Page{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("messages: %v %v", list.Items, err)
	}
	b.open("/projects/" + e.boot.Project.ID + "/messages/" + list.Items[0].ID)
	if !b.has("button", "Load images") {
		t.Fatal("no Load images button: remote images are not blocked")
	}
	// Images load at once, but not synchronously.
	const widths = `[...document.querySelectorAll("#logo, #angle, #sig, .many img")].map(i => i.naturalWidth).join(" ")`
	want := "3 3 5" + strings.Repeat(" 3", 150)
	got := ""
	for deadline := time.Now().Add(stepTimeout); got != want && time.Now().Before(deadline); {
		got = b.frameEval(widths)
	}
	if got != want {
		t.Errorf("inline image widths in the frame:\n%s\nwant\n%s", got, want)
	}
	// A reference that only begins like the part's is another one.
	if src := b.frameEval(`document.getElementById("dark").getAttribute("src")`); src != "cid:logo.1@shop.example-dark" {
		t.Errorf("a reference to no part became %.40q", src)
	}
	shoot(t, b, screenshotDir(t), "inline", "html")
	select {
	case p := <-hits:
		t.Fatalf("remote image %s loaded with the inline ones, before Load images", p)
	default:
	}
	b.checkClean()
}

// pngOf is a w×h PNG.
func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	var out bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		img.Set(x, 0, color.RGBA{R: 255, A: 255})
	}
	if err := png.Encode(&out, img); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// otpMessage carries a verification code, written in groups, and a link
// of each of three kinds.
const otpMessage = `From: Acme <no-reply@acme.test>
To: dev@example.com
Subject: Confirm your account
MIME-Version: 1.0
Content-Type: multipart/alternative; boundary=B

--B
Content-Type: text/plain; charset=utf-8

Your verification code is 482-913. It expires in 10 minutes.
Confirm your address: https://acme.test/verify?token=abc123
--B
Content-Type: text/html; charset=utf-8

<p>Your verification code is <b>482-913</b>. It expires in 10 minutes.</p>
<p><a href="https://acme.test/verify?token=abc123">Confirm your address</a></p>
<p><a href="https://acme.test/unsubscribe?u=1">Unsubscribe</a> or visit <a href="https://acme.test/">Acme</a>.</p>
--B--
`

// A message sent over SMTP shows the code found in it, ready to copy, and
// each link's kind, with a filter by kind.
func TestBrowserCodesAndLinkKinds(t *testing.T) {
	e := start(t)
	e.sendMail(t, e.boot.Inbox, "no-reply@acme.test", []string{"dev@example.com"}, otpMessage)
	list, err := e.st.Messages(t.Context(), e.boot.Inbox.ID, store.MessageFilter{}, store.Page{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("messages: %v %v", list, err)
	}
	m, err := e.st.Message(t.Context(), e.boot.Project.ID, list.Items[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, e, desktop)
	b.signIn()
	b.open("/projects/" + e.boot.Project.ID + "/messages/" + m.ID)

	b.clickAndLoad("tab", "Codes")
	if code := run(b, textOf(`.otp`)); code != "482913" {
		t.Errorf("the code shown is %q", code)
	}
	if marked := run(b, textOf(`.code-context mark`)); marked != "482-913" {
		t.Errorf("the context marks %q", marked)
	}
	b.click("button", "Copy")
	b.waitFor(`document.querySelector(".code-item .copied").textContent === "Copied"`)
	if got := b.clipboard(); got != "482913" {
		t.Errorf("Copy copied %q", got)
	}

	b.clickAndLoad("tab", "Links")
	if got := run(b, textOf("#tab-links")); got != fmt.Sprintf("Links (%d)", len(m.Links)) {
		t.Errorf("the Links tab shows %q, want its count of %d", got, len(m.Links))
	}
	kinds := map[string]string{}
	for _, row := range eval[[][]string](b, `[...document.querySelectorAll("table.links tbody tr")].map(tr => [tr.cells[0].textContent.trim(), tr.cells[1].textContent.trim()])`) {
		kinds[row[0]] = row[1]
	}
	want := map[string]string{"https://acme.test/verify?token=abc123": "verify",
		"https://acme.test/unsubscribe?u=1": "unsubscribe", "https://acme.test/": "other"}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("the links and their kinds: %v, want %v", kinds, want)
	}
	b.clickAndLoad("link", "verify 1", b.scope("navigation", "Link kinds"))
	if rows := eval[[]string](b, `[...document.querySelectorAll("table.links tbody tr td.url")].map(td => td.textContent.trim())`); !reflect.DeepEqual(rows, []string{"https://acme.test/verify?token=abc123"}) {
		t.Errorf("filtered by verify: %v", rows)
	}
	if current := strings.Join(strings.Fields(run(b, textOf(`.chips [aria-current]`))), " "); current != "verify 1" {
		t.Errorf("the current kind is %q", current)
	}
	shoot(t, b, os.Getenv("CAPTURE_SCREENSHOTS"), "desktop-light", "20-message-links-verify")
	b.checkClean()
}

// A list in a tab that is not looked at gives up its stream (a browser
// holds at most six connections to a server), and catches up, from the
// last message it showed, when it is looked at again.
func TestBrowserLiveListPausesWhileHidden(t *testing.T) {
	e := start(t)
	b := newBrowser(t, e, desktop)
	b.signIn()
	b.open("/projects/" + e.boot.Project.ID + "/inboxes/" + e.boot.Inbox.ID)
	b.waitFor(`!document.querySelector("[data-live-status]").hidden`)
	mail := func(subject string) {
		e.sendMail(t, e.boot.Inbox, "a@example.com", []string{"b@example.com"}, "Subject: "+subject+"\n\nbody\n")
	}
	mail("first")
	b.waitFor(`[...document.querySelectorAll("a.row .subj")].some(s => s.textContent === "first")`)

	setHidden := func(hidden bool) {
		eval[bool](b, `Object.defineProperty(document, "hidden", {value: `+strconv.FormatBool(hidden)+`, configurable: true}),
			document.dispatchEvent(new Event("visibilitychange")), true`)
	}
	setHidden(true)
	b.waitFor(`document.querySelector("[data-live-status]").hidden`)
	mail("second")
	mail("third")
	setHidden(false)
	b.waitFor(`[...document.querySelectorAll("a.row .subj")].map(s => s.textContent).join() === "third,second,first"`)
	b.waitFor(`!document.querySelector("[data-live-status]").hidden`)
}

// A tab opened from the keyboard (Enter or Space) loads its part with the
// focus on the tab, not at the top of the page; so does Load images, whose
// button goes away.
func TestBrowserTabsKeepTheFocus(t *testing.T) {
	e := start(t)
	b := newBrowser(t, e, desktop)
	b.signIn()
	e.sendMail(t, e.boot.Inbox, "a@example.com", []string{"b@example.com"},
		"Subject: tabs\nMIME-Version: 1.0\nContent-Type: text/html\n\n<p>hi <img src=\"http://192.0.2.1/x.png\" alt=\"x\"></p>\n")
	list, err := e.st.Messages(t.Context(), e.boot.Inbox.ID, store.MessageFilter{}, store.Page{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("messages: %v %v", list.Items, err)
	}
	b.open("/projects/" + e.boot.Project.ID + "/messages/" + list.Items[0].ID)
	b.do(chromedp.Focus(chromedp.CSS(`#tab-html`)), chromedp.KeyEvent(kb.ArrowRight), chromedp.KeyEvent(kb.ArrowRight), chromedp.KeyEvent(kb.ArrowRight))
	b.do(chromedp.KeyEvent(kb.Enter))
	b.waitFor(`location.search.includes("tab=headers") && document.activeElement.id === "tab-headers"`)
	b.do(chromedp.KeyEvent(kb.ArrowLeft), chromedp.KeyEvent(" "))
	b.waitFor(`location.search.includes("tab=source") && document.activeElement.id === "tab-source"`)

	b.do(chromedp.KeyEvent(kb.Home), chromedp.KeyEvent(kb.Enter))
	b.waitFor(`location.search.includes("tab=html") && document.activeElement.id === "tab-html"`)
	b.click("button", "Load images")
	b.waitFor(`document.activeElement.id === "tab-html" && location.search.includes("images=1")`)
}
