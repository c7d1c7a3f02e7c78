package web_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// bounceHTML is a bounce, sent with the null envelope sender, whose only
// body is HTML.
const bounceHTML = "From: Mail Delivery System <MAILER-DAEMON@mx.example.com>\nTo: alice@example.com\n" +
	"Subject: Undelivered Mail Returned to Sender\nMIME-Version: 1.0\nContent-Type: text/html; charset=utf-8\n\n" +
	"<html><head><style>p { color: red }</style></head><body><h1>Delivery failed</h1>" +
	"<p>Your message to <b>nobody@example.net</b> could not be delivered.</p><ul><li>550 5.1.1 User unknown</li></ul></body></html>\n"

// noFrom is a message without a From header (testdata/nofrom.eml), with
// its lines as sendMail takes them.
func noFrom(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("testdata/nofrom.eml")
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(raw), "\r\n", "\n")
}

// The Text tab of a message with only an HTML body shows the HTML's
// text, saying so; a message with a text part shows that, as it is.
func TestTextTabOfHTMLOnlyMessage(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	m := e.onlyMessage(t, "", bounceHTML)
	page := c.get("/projects/" + e.boot.Project.ID + "/messages/" + m.ID + "?tab=text").body
	text := regexp.MustCompile(`(?s)<pre class="body-text">(.*?)</pre>`).FindStringSubmatch(page)
	if text == nil {
		t.Fatalf("no text shown:\n%s", page)
	}
	for _, want := range []string{"Delivery failed", "nobody@example.net", "could not be delivered.", "550 5.1.1 User unknown"} {
		if !strings.Contains(text[1], want) {
			t.Errorf("the text %q lacks %q", text[1], want)
		}
	}
	if strings.Contains(text[1], "&lt;") || strings.Contains(text[1], "color: red") {
		t.Errorf("the text shows markup or style: %q", text[1])
	}
	if !strings.Contains(page, "This message has no text part: this is the text of its HTML part.") ||
		strings.Contains(page, "This message has no text part.</p>") {
		t.Errorf("the text is not said to be the HTML's")
	}

	m = e.onlyMessage(t, "app@example.com", "From: app@example.com\nTo: bob@example.com\nSubject: plain\n\nJust text.\n")
	page = c.get("/projects/" + e.boot.Project.ID + "/messages/" + m.ID + "?tab=text").body
	if !strings.Contains(page, `<pre class="body-text">Just text.`) || strings.Contains(page, "text of its HTML part") {
		t.Errorf("a text part's tab:\n%s", page)
	}
}

// The null sender of a bounce is shown as mail servers write it, "<>".
func TestNullEnvelopeSender(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	m := e.onlyMessage(t, "", bounceHTML)
	page := c.get("/projects/" + e.boot.Project.ID + "/messages/" + m.ID).body
	if !strings.Contains(page, `<span class="mono small">&lt;&gt; → bob@example.com</span>`) {
		t.Errorf("the envelope of a bounce:\n%s", regexp.MustCompile(`(?s)<dt>Envelope</dt>.*?</dd>`).FindString(page))
	}
}

// A message without From is listed by its envelope sender, marked as
// the envelope's; "(no sender)" only when there is neither.
func TestListsEnvelopeSenderWithoutFrom(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	e.onlyMessage(t, "", noFrom(t))
	e.onlyMessage(t, "app@example.com", noFrom(t))
	list := c.get("/projects/" + e.boot.Project.ID + "/inboxes/" + e.boot.Inbox.ID).body
	from := regexp.MustCompile(`<span class="c-from[^"]*"[^>]*>[^<]*</span>`).FindAllString(list, -1)
	want := []string{
		`<span class="c-from envelope" title="Envelope sender: the message has no From">app@example.com</span>`,
		`<span class="c-from" title="">(no sender)</span>`,
	}
	if strings.Join(from, "\n") != strings.Join(want, "\n") {
		t.Errorf("senders listed:\n%s\nwant\n%s", strings.Join(from, "\n"), strings.Join(want, "\n"))
	}
}

// In a browser: the list, a bounce's envelope and the Text tab of an
// HTML-only message, as a reader sees them.
func TestBrowserSendersAndTextOfHTML(t *testing.T) {
	e := start(t)
	b := newBrowser(t, e, desktop)
	b.signIn()
	shots := screenshotDir(t)
	e.onlyMessage(t, "app@example.com", noFrom(t))
	m := e.onlyMessage(t, "", bounceHTML)
	b.open("/projects/" + e.boot.Project.ID + "/inboxes/" + e.boot.Inbox.ID)
	b.waitFor(`document.querySelectorAll("a.row").length === 2`)
	if got := eval[string](b, `[...document.querySelectorAll("a.row .c-from")].map(s => s.textContent + (s.classList.contains("envelope") ? " (envelope, " + getComputedStyle(s).fontStyle + ")" : "")).join("; ")`); got != "Mail Delivery System; app@example.com (envelope, italic)" {
		t.Errorf("senders listed: %q", got)
	}
	shoot(t, b, shots, "senders", "list")

	b.open("/projects/" + e.boot.Project.ID + "/messages/" + m.ID)
	if got := run(b, textOf(`dl.meta .mono`)); got != "<> → bob@example.com" {
		t.Errorf("envelope %q", got)
	}
	b.clickAndLoad("tab", "Text")
	if got := run(b, textOf(`.tab-panel .note`)); got != "This message has no text part: this is the text of its HTML part." {
		t.Errorf("the Text tab's note: %q", got)
	}
	if got := run(b, textOf(`pre.body-text`)); !strings.Contains(got, "could not be delivered") {
		t.Errorf("the Text tab shows %q", got)
	}
	shoot(t, b, shots, "senders", "text-from-html")
	b.checkClean()
}
