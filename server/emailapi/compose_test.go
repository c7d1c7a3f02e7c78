package emailapi

import (
	"bufio"
	"bytes"
	"net/mail"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/capturedev/capture/server/mailparse"
)

// roundTrip composes a message and parses it back the way a capture is
// parsed, checking that what the request said is what the message says.
func roundTrip(t *testing.T, name, subject, headerValue, text, filename string, data []byte) {
	t.Helper()
	e := &email{
		From:        mail.Address{Name: name, Address: "app@example.com"},
		To:          []mail.Address{{Name: name, Address: "to@example.com"}},
		Bcc:         []mail.Address{{Address: "hidden@example.com"}},
		Subject:     subject,
		Bodies:      []alternative{{ContentType: "text/plain", Content: text}, {ContentType: "text/html", Content: "<p>" + text + "</p>"}},
		Attachments: []attachment{{Filename: filename, ContentType: "application/octet-stream", Data: data}},
		Headers:     []header{{"X-Value", headerValue}},
	}
	e.capture("Metadata", headerValue)
	raw := e.compose("test", time.Unix(0, 0))
	for i, line := range bytes.Split(raw, []byte("\r\n")) {
		if len(line) > 998 {
			t.Fatalf("line %d is %d bytes long", i, len(line))
		}
	}
	p := mailparse.Parse(raw)
	if len(p.Warnings) > 0 {
		t.Fatalf("warnings %q parsing\n%s", p.Warnings, raw)
	}
	if p.Subject != subject {
		t.Errorf("subject %q reads back as %q\n%s", subject, p.Subject, raw)
	}
	if p.From == nil || p.From.Name != name || p.From.Address != "app@example.com" {
		t.Errorf("from name %q reads back as %+v\n%s", name, p.From, raw)
	}
	checked := []string{"X-Value", "X-Capture-Metadata"}
	if headerValue == "" {
		checked = checked[:1] // capture records no empty values
	}
	for _, h := range checked {
		if got := headerValues(p, h); len(got) != 1 || got[0] != headerValue {
			t.Errorf("%s %q reads back as %q\n%s", h, headerValue, got, raw)
		}
	}
	if len(headerValues(p, "Bcc")) != 0 {
		t.Error("Bcc in the headers")
	}
	wantText := strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
	if p.Text == nil || *p.Text != wantText {
		t.Errorf("text %q reads back as %v", text, p.Text)
	}
	if len(p.Attachments) != 1 || !bytes.Equal(p.Attachments[0].Data, data) || p.Attachments[0].Filename != filename {
		t.Errorf("attachment %q (%d bytes) reads back as %+v", filename, len(data), p.Attachments)
	}
}

func headerValues(p *mailparse.Message, name string) []string {
	for _, h := range p.Headers {
		if strings.EqualFold(h.Name, name) {
			return h.Values
		}
	}
	return nil
}

func TestComposeRoundTrip(t *testing.T) {
	long := strings.Repeat("word ", 60)
	for _, c := range []struct{ name, subject, value, text, filename string }{
		{"App", "Hello", "plain", "Hi\nthere", "a.txt"},
		{"Äpp Séndér", "Grüße — ✓ 日本語のテキスト", "naïve", "Ünïcode\r\nlines", "résumé.pdf"},
		{`Quote "me", please`, long, long, strings.Repeat("x", 2000), "with space.bin"},
		{"", strings.Repeat("y", 1500), strings.Repeat("z", 1200), "", strings.Repeat("f", 300) + ".bin"},
		{"Ctl", "line\r\nInjected: header", "a\nb: c", "trailing space \n", "n"},
		{"Emoji 😀", strings.Repeat("😀", 100), "=?utf-8?q?not_encoded?=", ".", "😀.png"},
		{"Back\\slash ΐ", "  padded  ", "\ttabbed", "x", strings.Repeat(`"`, 400) + strings.Repeat("ü", 200) + ".txt"},
	} {
		t.Run(c.subject[:min(len(c.subject), 10)], func(t *testing.T) {
			roundTrip(t, c.name, c.subject, c.value, c.text, c.filename, []byte("\x00\x01binary\xff"))
		})
	}
}

func FuzzCompose(f *testing.F) {
	f.Add("Äpp", "Grüße ✓", "value", "text\nmore", "file.txt", []byte{0, 1, 2})
	f.Add("", strings.Repeat("y", 1500), "a\r\nb", "", "x", []byte{})
	f.Fuzz(func(t *testing.T, name, subject, value, text, filename string, data []byte) {
		// What a JSON request can carry: valid UTF-8 (encoding/json
		// replaces the rest).
		for _, s := range []string{name, subject, value, text, filename} {
			if !utf8.ValidString(s) {
				return
			}
		}
		// Readers keep the base name of a file name, trimmed.
		if filename == "" || strings.TrimSpace(filename) != filename || strings.ContainsAny(filename, `/\`) {
			return
		}
		roundTrip(t, name, subject, value, text, filename, data)
	})
}

func TestFoldedLinesUnfoldToTheValue(t *testing.T) {
	value := strings.Repeat("a b  c ", 40)
	var b bytes.Buffer
	writeFolded(&b, "X-Long", value)
	sc := bufio.NewScanner(&b)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) < 3 {
		t.Fatalf("not folded: %q", lines)
	}
	for _, l := range lines {
		if len(l) > foldAt {
			t.Errorf("line of %d: %q", len(l), l)
		}
	}
	if got := strings.TrimPrefix(strings.Join(lines, ""), "X-Long: "); got != value {
		t.Errorf("unfolds to %q", got)
	}
}

// TestCaptureFieldsAreCaptures: a sender's own X-Capture-Provider, or a
// field capture records an option in, never stands beside capture's
// value; its other headers, X-Capture-* or not, are kept.
func TestCaptureFieldsAreCaptures(t *testing.T) {
	e := &email{
		From:    mail.Address{Address: "app@example.com"},
		To:      []mail.Address{{Address: "to@example.com"}},
		Subject: "Hi",
		Bodies:  []alternative{{ContentType: "text/plain", Content: "Hi"}},
		Headers: []header{{"x-capture-provider", "evil"}, {"X-Capture-Tag", "forged"}, {"X-Capture-Own", "kept"}, {"X-App", "kept"}},
	}
	e.capture("Tag", "signup")
	p := mailparse.Parse(e.compose("sendgrid", time.Unix(0, 0)))
	for name, want := range map[string]string{"X-Capture-Provider": "sendgrid", "X-Capture-Tag": "signup", "X-Capture-Own": "kept", "X-App": "kept"} {
		if got := headerValues(p, name); len(got) != 1 || got[0] != want {
			t.Errorf("%s = %q, want only %q", name, got, want)
		}
	}
}

// TestMessageIDDomain: a Message-ID's right side is always ASCII: an
// ASCII domain as it is, an internationalized one in its IDNA form, and
// anything else the fallback domain.
func TestMessageIDDomain(t *testing.T) {
	for in, want := range map[string]string{
		"example.com":    "example.com",
		"MG.Example.com": "MG.Example.com",
		"bücher.de":      "xn--bcher-kva.de",
		"BÜCHER.de":      "xn--bcher-kva.de",
		"[192.0.2.1]":    "[192.0.2.1]",
		"a b":            fallbackDomain,
		"bü..de":         fallbackDomain,
		"a<b>.de":        fallbackDomain,
		"":               fallbackDomain,
	} {
		if got := messageIDDomain(in); got != want {
			t.Errorf("messageIDDomain(%q) = %q, want %q", in, got, want)
		}
	}
	if id := newMessageID("info@bücher.de"); !strings.HasSuffix(id, "@xn--bcher-kva.de>") {
		t.Errorf("newMessageID: %s", id)
	}
}
