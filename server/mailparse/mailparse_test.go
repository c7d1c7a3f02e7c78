package mailparse

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

const corpusDir = "../../testdata/eml"

func ptr(s string) *string { return &s }

func readEML(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(corpusDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// want lists what a corpus message must decode to. Fields left nil or empty
// are still compared unless noted: a corpus file must not grow surprises.
type want struct {
	from             *Address
	to, cc, replyTo  []Address
	subject          string
	date             string // RFC 3339 with the message's own offset; "" for none
	messageID        string
	headers          []Header // compared exactly, in order; nil skips the check
	text, html       *string
	htmlContains     []string // instead of html when the body is long
	attachments      []Attachment
	links            []Link
	codes            []Code
	snippet          string
	warningsContains []string // each must be a substring of one warning, in order
}

func TestParseCorpus(t *testing.T) {
	tests := []struct {
		file string
		want want
	}{
		{
			file: "alternative-qp.eml",
			want: want{
				from:      &Address{"Example Shop", "noreply@shop.example"},
				to:        []Address{{"Alice Martin", "alice@example.com"}, {"", "bob@example.com"}},
				cc:        []Address{{"Support, Team", "support@shop.example"}},
				replyTo:   []Address{{"", "help@shop.example"}},
				subject:   "Confirm your email address",
				date:      "2024-05-14T11:30:00+02:00",
				messageID: "20240514093000.1234@shop.example",
				headers: []Header{
					{"Return-Path", []string{"<noreply@shop.example>"}},
					{"Received", []string{"from app.internal (localhost [127.0.0.1]) by capture.local with ESMTP id 1234 for <alice@example.com>; Tue, 14 May 2024 09:30:00 +0000"}},
					{"From", []string{`"Example Shop" <noreply@shop.example>`}},
					{"To", []string{"Alice Martin <alice@example.com>, bob@example.com"}},
					{"Cc", []string{`"Support, Team" <support@shop.example>`}},
					{"Reply-To", []string{"help@shop.example"}},
					{"Subject", []string{"Confirm your email address"}},
					{"Date", []string{"Tue, 14 May 2024 11:30:00 +0200"}},
					{"Message-Id", []string{"<20240514093000.1234@shop.example>"}},
					{"Mime-Version", []string{"1.0"}},
					{"Content-Type", []string{`multipart/alternative; boundary="alt-boundary-1"`}},
				},
				text: ptr("Hi Alice,\n\nPlease confirm your address: https://shop.example/confirm?token=abc123&user=42\n\n" +
					"Track your order at https://shop.example/orders/42.\n\nThanks — the Shop team"),
				htmlContains: []string{
					`<a href="https://shop.example/confirm?token=abc123&amp;user=42">confirm   your` + "\n address</a>",
					`<a href="https://shop.example/unsubscribe?list=news&amp;id=7">Unsubscribe</a> — `,
				},
				links: []Link{
					{"https://shop.example/confirm?token=abc123&user=42", ptr("confirm your address"), "https://shop.example", KindVerify},
					{"https://shop.example/unsubscribe?list=news&id=7", ptr("Unsubscribe"), "https://shop.example", KindUnsubscribe},
					{"https://shop.example/orders/42", nil, "https://shop.example", KindOther},
				},
				snippet: "Hi Alice, Please confirm your address: https://shop.example/confirm?token=abc123&user=42 " +
					"Track your order at https://shop.example/orders/42. Thanks — the Shop team",
			},
		},
		{
			file: "related-attachments.eml",
			want: want{
				from:      &Address{"Reports", "reports@app.example"},
				to:        []Address{{"", "ops@example.com"}},
				subject:   "Monthly report",
				date:      "2024-05-01T08:00:00-04:00",
				messageID: "report-2024-05@app.example",
				text:      ptr("Your report for April is attached."),
				html: ptr(`<html><body><img src="cid:logo.png@app.example" alt="Logo"><p>Your report for <b>April</b> is attached.</p>` +
					`<a href="https://app.example/reports/2024-04"><img src="cid:logo.png@app.example"></a></body></html>`),
				attachments: []Attachment{
					{
						Filename: "logo.png", ContentType: "image/png", ContentID: "logo.png@app.example", Inline: true,
						Data: mustHex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201ffa65d8b1a0000000049454e44ae426082"),
					},
					{
						ContentType: "image/gif", ContentID: "spacer@app.example", Inline: true,
						Data: []byte("GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"),
					},
					{
						Filename: "report-2024-04.pdf", ContentType: "application/pdf",
						Data: []byte("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n"),
					},
					{
						// RFC 2231 file name; the ISO-8859-1 bytes are kept as sent.
						Filename: "données.csv", ContentType: "text/csv",
						Data: []byte("caf\xe9;1"),
					},
				},
				links: []Link{
					{"https://app.example/reports/2024-04", nil, "https://app.example", KindOther},
				},
				snippet: "Your report for April is attached.",
			},
		},
		{
			file: "latin1-qp.eml",
			want: want{
				from:    &Address{"François Café", "francois@example.fr"},
				to:      []Address{{"", "client@example.com"}},
				subject: "Reçu de commande",
				date:    "2024-05-03T10:00:00+02:00",
				text:    ptr("Bonjour,\n\nVotre crème brûlée est confirmée. Prix : 12,50 € § fin.\n"),
				snippet: "Bonjour, Votre crème brûlée est confirmée. Prix : 12,50 € § fin.",
			},
		},
		{
			file: "windows1252-html.eml",
			want: want{
				from:    &Address{"", "deals@deals.example"},
				to:      []Address{{"", "shopper@example.com"}},
				subject: "Deal of the day",
				htmlContains: []string{
					"<p>“Quoted” price: € 42 – it’s a deal.</p>",
					"See the\n   “deal”</a>",
				},
				links: []Link{
					{"https://deals.example/item?id=1&ref=mail", ptr("See the “deal”"), "https://deals.example", KindOther},
				},
				// No text part: the snippet is the visible HTML text, without
				// title, script or the invisible preview padding.
				snippet: "Today only “Quoted” price: € 42 – it’s a deal. See the “deal”",
			},
		},
		{
			file: "rfc2047-utf8.eml",
			want: want{
				from:      &Address{"Jürgen Müller", "juergen@example.de"},
				to:        []Address{{"Zoë", "zoe@example.com"}},
				subject:   "Café ☕ order ✅ confirmed",
				date:      "2024-05-02T16:05:00+02:00",
				messageID: "abc.def@example.de",
				headers: []Header{
					{"From", []string{"Jürgen Müller <juergen@example.de>"}},
					{"To", []string{"Zoë <zoe@example.com>"}},
					{"Subject", []string{"Café ☕ order ✅ confirmed"}},
					{"X-Mailer", []string{"📧 Mailer"}},
					{"Date", []string{"Thu, 2 May 2024 16:05:00 +0200 (CEST)"}},
					{"Message-Id", []string{"<abc.def@example.de>"}},
					{"Mime-Version", []string{"1.0"}},
					{"Content-Type", []string{"text/plain; charset=utf-8"}},
					{"Content-Transfer-Encoding", []string{"base64"}},
				},
				text: ptr("Grüße aus München!\nVisit https://example.de/über?q=1, or (https://en.wikipedia.org/wiki/Foo_(bar)).\n"),
				links: []Link{
					{"https://example.de/%C3%BCber?q=1", nil, "https://example.de", KindOther},
					{"https://en.wikipedia.org/wiki/Foo_(bar)", nil, "https://en.wikipedia.org", KindOther},
				},
				snippet: "Grüße aus München! Visit https://example.de/über?q=1, or (https://en.wikipedia.org/wiki/Foo_(bar)).",
			},
		},
		{
			file: "rfc2047-latin1.eml",
			want: want{
				from:    &Address{"Éloïse Dubois", "eloise@example.fr"},
				to:      []Address{{"", "reservations@example.com"}},
				cc:      []Address{{"“Quotes” Inc", "q@example.com"}},
				subject: "Réservation confirmée",
				date:    "2024-05-04T12:00:00Z",
				headers: []Header{
					{"From", []string{"Éloïse Dubois <eloise@example.fr>"}},
					{"To", []string{"reservations@example.com"}},
					{"Cc", []string{"“Quotes” Inc <q@example.com>"}},
					{"Subject", []string{"Réservation confirmée"}},
					{"X-Other", []string{"À bientôt"}},
					{"X-Unknown", []string{"abc"}},
					{"Date", []string{"Sat, 04 May 2024 12:00:00 GMT"}},
					{"Mime-Version", []string{"1.0"}},
					{"Content-Type", []string{"text/plain; charset=ISO-8859-15"}},
					{"Content-Transfer-Encoding", []string{"8bit"}},
				},
				text:             ptr("Prix : 10 € (Latin-9).\n"),
				snippet:          "Prix : 10 € (Latin-9).",
				warningsContains: []string{`header X-Unknown: unknown charset "x-klingon"`},
			},
		},
		{
			file: "charsets-mixed.eml",
			want: want{
				from:    &Address{"", "intl@example.com"},
				to:      []Address{{"", "you@example.com"}},
				subject: "Привет мир",
				text:    ptr("Dziękuję, żółw\nПривет, мир"),
				snippet: "Dziękuję, żółw Привет, мир",
			},
		},
		{
			file: "base-href.eml",
			want: want{
				from:         &Address{"", "app@app.example.com"},
				to:           []Address{{"", "user@example.com"}},
				subject:      "Account links",
				htmlContains: []string{`<base href="https://app.example.com/account/">`},
				links: []Link{
					{"https://app.example.com/account/settings", ptr("Settings"), "https://app.example.com", KindOther},
					{"https://app.example.com/help?topic=billing&lang=en", ptr("Help & support"), "https://app.example.com", KindOther},
					{"https://app.example.com/legal/terms", ptr("Terms"), "https://app.example.com", KindOther},
					{"https://cdn.example.org/file.pdf", ptr("PDF"), "https://cdn.example.org", KindOther},
					{"https://other.example:8443/path", ptr("Other"), "https://other.example:8443", KindOther},
					{"HTTPS://Mixed.Example.COM/Path", ptr("Mixed"), "HTTPS://Mixed.Example.COM", KindOther},
					{"https://app.example.com/x", nil, "https://app.example.com", KindOther},
					{"https://app.example.com/account/map/1", nil, "https://app.example.com", KindOther},
				},
				snippet: "Settings Help & support Terms PDF Other Mixed Mail JS Duplicate Empty",
			},
		},
		{
			file: "text-punctuation.eml",
			want: want{
				from:    &Address{"", "text@example.com"},
				to:      []Address{{"", "user@example.com"}},
				subject: "Plain links",
				text: ptr(`See https://example.com/a. And https://example.com/b, then (https://example.com/c) and <https://example.com/d>.
Quoted "https://example.com/e" and 'https://example.com/f'.
Bracketed [https://example.com/g] and https://en.wikipedia.org/wiki/Foo_(bar).
Question? https://example.com/h?x=1&y=2! Done: https://example.com/i;
Not links: ftp://example.com/nope xhttp://nope.example and http:// alone.
Port http://localhost:8080/path/ and HTTPS://EXAMPLE.com/Upper and https://example.com/a again.
`),
				links: []Link{
					{"https://example.com/a", nil, "https://example.com", KindOther},
					{"https://example.com/b", nil, "https://example.com", KindOther},
					{"https://example.com/c", nil, "https://example.com", KindOther},
					{"https://example.com/d", nil, "https://example.com", KindOther},
					{"https://example.com/e", nil, "https://example.com", KindOther},
					{"https://example.com/f", nil, "https://example.com", KindOther},
					{"https://example.com/g", nil, "https://example.com", KindOther},
					{"https://en.wikipedia.org/wiki/Foo_(bar)", nil, "https://en.wikipedia.org", KindOther},
					{"https://example.com/h?x=1&y=2", nil, "https://example.com", KindOther},
					{"https://example.com/i", nil, "https://example.com", KindOther},
					{"http://localhost:8080/path/", nil, "http://localhost:8080", KindOther},
					{"HTTPS://EXAMPLE.com/Upper", nil, "HTTPS://EXAMPLE.com", KindOther},
				},
				snippet: `See https://example.com/a. And https://example.com/b, then (https://example.com/c) and <https://example.com/d>. ` +
					`Quoted "https://example.com/e" and 'https://example.com/f'. Bracketed [https://example.c`,
			},
		},
		{
			file: "broken-boundary.eml",
			want: want{
				from:    &Address{"", "broken@example.com"},
				to:      []Address{{"", "user@example.com"}},
				subject: "Broken boundary",
				text: ptr("--actual-boundary\nContent-Type: text/plain\n\n" +
					"Body behind the wrong boundary https://example.com/broken\n--actual-boundary--\n"),
				links: []Link{{"https://example.com/broken", nil, "https://example.com", KindOther}},
				snippet: "--actual-boundary Content-Type: text/plain Body behind the wrong boundary " +
					"https://example.com/broken --actual-boundary--",
				warningsContains: []string{`no part found for MIME boundary "expected-boundary"`},
			},
		},
		{
			file: "unclosed-boundary.eml",
			want: want{
				from:             &Address{"", "unclosed@example.com"},
				to:               []Address{{"", "user@example.com"}},
				subject:          "Unclosed boundary",
				text:             ptr("Plain part"),
				html:             ptr(`<p>HTML <a href="https://example.com/unclosed">part</a></p>` + "\n"),
				links:            []Link{{"https://example.com/unclosed", ptr("part"), "https://example.com", KindOther}},
				snippet:          "Plain part",
				warningsContains: []string{`Boundary "b1" was not closed correctly`},
			},
		},
		{
			file: "8bit-headers.eml",
			want: want{
				from:    &Address{"Renée Lefèvre", "renee@example.com"},
				to:      []Address{{"", "user@example.com"}},
				subject: "Café crème",
				headers: []Header{
					{"From", []string{`"Renée Lefèvre" <renee@example.com>`}},
					{"To", []string{"user@example.com"}},
					{"Subject", []string{"Café crème"}},
					{"X-Utf8", []string{"日本語"}},
					{"Content-Type", []string{"text/plain"}},
				},
				text:    ptr("Body.\n"),
				snippet: "Body.",
				warningsContains: []string{
					"header From has 8-bit bytes that are not UTF-8",
					"header Subject has 8-bit bytes that are not UTF-8",
				},
			},
		},
		{
			file: "no-headers.eml",
			want: want{
				text:             ptr("Hello there,\nthis message has no headers at all.\nhttps://example.com/no-headers\n"),
				links:            []Link{{"https://example.com/no-headers", nil, "https://example.com", KindOther}},
				snippet:          "Hello there, this message has no headers at all. https://example.com/no-headers",
				warningsContains: []string{"message has no header section"},
			},
		},
		{
			file: "nul-bytes.eml",
			want: want{
				from:    &Address{"", "nul@example.com"},
				to:      []Address{{"", "user@example.com"}},
				subject: "before\x00after",
				text:    ptr("Hello\x00World https://example.com/nul\x00path\n"),
				links:   []Link{{"https://example.com/nul", nil, "https://example.com", KindOther}},
				snippet: "HelloWorld https://example.com/nulpath",
			},
		},
		{
			file: "multipart-2k.eml",
			want: want{
				from:      &Address{"App Example", "no-reply@app.example"},
				to:        []Address{{"New User", "new.user@example.com"}},
				subject:   "Welcome to App — verify your email",
				date:      "2024-05-13T09:15:42+02:00",
				messageID: "welcome.7f3a9c@app.example",
				text: ptr("Welcome to App, New User!\n\nVerify your email address to finish setting up your account:\n" +
					"https://app.example/verify?token=6b1f0c2e9d8a7b6c5d4e3f2a1b0c9d8e&user=1842\n\n" +
					"This link expires in 24 hours. If you did not sign up, ignore this email.\n\n— The App team\nhttps://app.example/help"),
				htmlContains: []string{`href="https://app.example/verify?token=6b1f0c2e9d8a7b6c5d4e3f2a1b0c9d8e&amp;user=1842">Verify email</a>`},
				links: []Link{
					{"https://app.example/verify?token=6b1f0c2e9d8a7b6c5d4e3f2a1b0c9d8e&user=1842", ptr("Verify email"), "https://app.example", KindVerify},
					{"https://app.example/help", ptr("Help centre"), "https://app.example", KindOther},
					{"https://app.example/settings/notifications?utm_source=email&utm_medium=welcome", ptr("Notification settings"), "https://app.example", KindUnsubscribe},
					// From the List-Unsubscribe header; its mailto: is not a link.
					{"https://app.example/unsubscribe?u=1842", nil, "https://app.example", KindUnsubscribe},
				},
				snippet: "Welcome to App, New User! Verify your email address to finish setting up your account: " +
					"https://app.example/verify?token=6b1f0c2e9d8a7b6c5d4e3f2a1b0c9d8e&user=1842 This link expires in 24 hours. If you",
			},
		},
	}

	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			m := Parse(readEML(t, tt.file))
			w := tt.want
			eq(t, "From", m.From, w.from)
			eq(t, "To", m.To, w.to)
			eq(t, "Cc", m.Cc, w.cc)
			eq(t, "ReplyTo", m.ReplyTo, w.replyTo)
			eq(t, "Subject", m.Subject, w.subject)
			eq(t, "MessageID", m.MessageID, w.messageID)
			gotDate := ""
			if m.Date != nil {
				gotDate = m.Date.Format(time.RFC3339)
			}
			eq(t, "Date", gotDate, w.date)
			if w.headers != nil {
				eq(t, "Headers", m.Headers, w.headers)
			}
			eq(t, "Text", m.Text, w.text)
			if w.htmlContains != nil {
				if m.HTML == nil {
					t.Errorf("HTML = nil, want a body containing %q", w.htmlContains)
				}
				for _, s := range w.htmlContains {
					if m.HTML != nil && !strings.Contains(*m.HTML, s) {
						t.Errorf("HTML does not contain %q:\n%s", s, *m.HTML)
					}
				}
			} else {
				eq(t, "HTML", m.HTML, w.html)
			}
			eq(t, "Attachments", m.Attachments, w.attachments)
			eq(t, "Links", m.Links, w.links)
			eq(t, "LinksTruncated", m.LinksTruncated, false)
			eq(t, "Codes", m.Codes, w.codes)
			eq(t, "Snippet", m.Snippet, w.snippet)
			if len(m.Warnings) != len(w.warningsContains) {
				t.Errorf("Warnings = %q, want %d matching %q", m.Warnings, len(w.warningsContains), w.warningsContains)
			} else {
				for i, s := range w.warningsContains {
					if !strings.Contains(m.Warnings[i], s) {
						t.Errorf("Warnings[%d] = %q, want it to contain %q", i, m.Warnings[i], s)
					}
				}
			}
		})
	}
}

// eq compares with reflect.DeepEqual and prints both sides as JSON, which
// shows pointers' targets and byte slices readably.
func eq[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	g, _ := json.MarshalIndent(got, "", "  ")
	w, _ := json.MarshalIndent(want, "", "  ")
	t.Errorf("%s mismatch\n got: %s\nwant: %s", what, g, w)
}

func TestParseGarbageKeepsBytesAsText(t *testing.T) {
	m := Parse(readEML(t, "garbage.eml"))
	if m.Text == nil || !utf8.ValidString(*m.Text) || m.Snippet == "" {
		t.Fatalf("garbage: Text=%v Snippet=%q", m.Text != nil, m.Snippet)
	}
	if len(m.Warnings) == 0 {
		t.Error("garbage: no warnings")
	}
}

func TestParseHeaders(t *testing.T) {
	raw := "received: from a\r\n" +
		"Subject: first\r\n" +
		"RECEIVED: from b\r\n" +
		"  by c\r\n" +
		"x-custom-header: =?utf-8?q?caf=C3=A9?= and =?iso-8859-1?b?6Q==?=\r\n" +
		"Subject : second\r\n" +
		": starts with a colon\r\n" +
		"bad name: skipped\r\n" +
		"To: a@example.com\r\n" +
		"To: \"B\" <b@example.com>\r\n" +
		"Date: not a date\r\n" +
		"Message-ID: no-brackets@example.com\r\n" +
		"\r\n" +
		"body\r\n"
	m := Parse([]byte(raw))
	eq(t, "Headers", m.Headers, []Header{
		{"Received", []string{"from a", "from b by c"}},
		{"Subject", []string{"first", "second"}},
		{"X-Custom-Header", []string{"café and é"}},
		{"To", []string{"a@example.com", `"B" <b@example.com>`}},
		{"Date", []string{"not a date"}},
		{"Message-Id", []string{"no-brackets@example.com"}},
	})
	eq(t, "Subject", m.Subject, "first")
	eq(t, "To", m.To, []Address{{"", "a@example.com"}, {"B", "b@example.com"}})
	eq(t, "MessageID", m.MessageID, "no-brackets@example.com")
	if m.Date != nil {
		t.Errorf("Date = %v, want nil", m.Date)
	}
	if !containsWarning(m.Warnings, `Date header "not a date" could not be parsed`) {
		t.Errorf("Warnings = %q, want the bad date reported", m.Warnings)
	}
	eq(t, "Text", m.Text, ptr("body\n"))
}

func TestParseAddresses(t *testing.T) {
	tests := []struct {
		name, header string
		want         []Address
		warn         bool
	}{
		{"plain", "a@example.com", []Address{{"", "a@example.com"}}, false},
		{"group", "undisclosed-recipients:;", nil, false},
		{"group with members", "team: a@example.com, b@example.com;", []Address{{"", "a@example.com"}, {"", "b@example.com"}}, false},
		{"encoded name", "=?utf-8?b?w4lsb8Ovc2U=?= <e@example.fr>", []Address{{"Éloïse", "e@example.fr"}}, false},
		{"quoted comma", `"Doe, Jane" <jane@example.com>, x@example.com`, []Address{{"Doe, Jane", "jane@example.com"}, {"", "x@example.com"}}, false},
		{"no at sign", "Admin <admin>", []Address{{"Admin", "admin"}}, true},
		{"unquoted dots", "J. R. Doe <jr@example.com>; other@example.com", []Address{{"J. R. Doe", "jr@example.com"}, {"", "other@example.com"}}, true},
		{"nothing usable", "John Doe", nil, true},
		{"empty", "", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Parse([]byte("To: " + tt.header + "\r\nSubject: x\r\n\r\nbody\r\n"))
			eq(t, "To", m.To, tt.want)
			if got := containsWarning(m.Warnings, "To header"); got != tt.warn {
				t.Errorf("To warning = %v, want %v (warnings %q)", got, tt.warn, m.Warnings)
			}
		})
	}
}

func TestParseDates(t *testing.T) {
	tests := []struct{ header, want string }{
		{"Mon, 13 May 2024 09:15:42 +0200", "2024-05-13T09:15:42+02:00"},
		{"13 May 2024 09:15:42 -0000", "2024-05-13T09:15:42Z"},
		{"Mon, 13 May 2024 09:15:42 +0000 (UTC)", "2024-05-13T09:15:42Z"},
		{"2024-05-13T09:15:42Z", "2024-05-13T09:15:42Z"},
		{"Mon May 13 09:15:42 UTC 2024", "2024-05-13T09:15:42Z"},
		{"yesterday", ""},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			m := Parse([]byte("Date: " + tt.header + "\r\n\r\nx"))
			got := ""
			if m.Date != nil {
				got = m.Date.Format(time.RFC3339)
			}
			eq(t, "Date", got, tt.want)
		})
	}
}

func TestParseInlineParts(t *testing.T) {
	raw := crlf(`From: a@example.com
Content-Type: multipart/mixed; boundary=m

--m
Content-Type: text/html

<img src="cid:chart%401">
--m
Content-Type: image/png
Content-ID: <chart@1>
Content-Disposition: attachment; filename="chart.png"

png
--m
Content-Type: image/png
Content-ID: <unused@1>
Content-Disposition: attachment; filename="unused.png"

png
--m
Content-Type: application/pdf; name="C:\Users\me\Desktop\invoice.pdf"
Content-Disposition: inline

pdf
--m--
`)
	m := Parse(raw)
	eq(t, "Attachments", m.Attachments, []Attachment{
		// Referenced from the HTML, so shown inline whatever its disposition.
		{Filename: "chart.png", ContentType: "image/png", ContentID: "chart@1", Inline: true, Data: []byte("png")},
		{Filename: "unused.png", ContentType: "image/png", ContentID: "unused@1", Data: []byte("png")},
		{Filename: "invoice.pdf", ContentType: "application/pdf", Inline: true, Data: []byte("pdf")},
	})
	eq(t, "Text", m.Text, nil)
	eq(t, "Snippet", m.Snippet, "")
}

func TestParseBodyCharsets(t *testing.T) {
	tests := []struct {
		name, header string
		body         []byte
		text, warn   string
	}{
		{"utf-8 declared", "text/plain; charset=utf-8", []byte("h\xc3\xa9"), "hé", ""},
		{"undeclared utf-8", "text/plain", []byte("h\xc3\xa9"), "hé", ""},
		{"us-ascii stating utf-8", "text/plain; charset=us-ascii", []byte("h\xc3\xa9"), "hé", ""},
		{"undeclared legacy", "text/plain", []byte("h\xe9 \x80"), "hé €", "read as windows-1252"},
		{"iso-8859-1 is windows-1252", "text/plain; charset=iso-8859-1", []byte("\x93q\x94 \xe9"), "“q” é", ""},
		{"windows-1251", "text/plain; charset=windows-1251", []byte("\xcf\xf0\xe8\xe2\xe5\xf2"), "Привет", ""},
		{"iso-8859-2", "text/plain; charset=iso-8859-2", []byte("\xbf\xf3\xb3w"), "żółw", ""},
		{"lying utf-8", "text/plain; charset=utf-8", []byte("h\xe9!"), "h\uFFFD!", "bad bytes replaced"},
		{"unknown charset", "text/plain; charset=x-martian", []byte("abc"), "abc", "x-martian"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := append([]byte("Content-Type: "+tt.header+"\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"), tt.body...)
			m := Parse(raw)
			eq(t, "Text", m.Text, &tt.text)
			if tt.warn == "" {
				eq(t, "Warnings", m.Warnings, nil)
			} else if !containsWarning(m.Warnings, tt.warn) {
				t.Errorf("Warnings = %q, want one containing %q", m.Warnings, tt.warn)
			}
		})
	}
}

func TestParseHTMLWithoutCharsetUsesMeta(t *testing.T) {
	raw := []byte("Content-Type: text/html\r\n\r\n<meta charset=\"windows-1251\"><p>\xcf\xf0\xe8\xe2\xe5\xf2</p>")
	m := Parse(raw)
	eq(t, "Snippet", m.Snippet, "Привет")
}

func TestParseSnippet(t *testing.T) {
	long := strings.Repeat("é", 150) + "  \t\n  " + strings.Repeat("ж", 150)
	m := Parse([]byte("Content-Type: text/plain; charset=utf-8\r\n\r\n" + long))
	want := strings.Repeat("é", 150) + " " + strings.Repeat("ж", 49)
	eq(t, "Snippet", m.Snippet, want)

	// A whitespace-only text part gives way to the HTML.
	raw := crlf(`Content-Type: multipart/alternative; boundary=b

--b
Content-Type: text/plain

   
--b
Content-Type: text/html

<p>From&nbsp;the <b>HTML</b></p><p>body</p>
--b--
`)
	m = Parse(raw)
	eq(t, "Snippet", m.Snippet, "From the HTML body")
}

// Joiners inside an emoji sequence or a word stay, so the snippet shows
// what the body does; joiners that pad a preview next to spaces go, and a
// snippet cut at its length never ends in one.
func TestParseSnippetKeepsJoiners(t *testing.T) {
	const family, persian = "👨\u200d👩\u200d👧", "می\u200cخواهم"
	for _, ctype := range []string{"text/plain", "text/html"} {
		m := Parse([]byte("Content-Type: " + ctype + "; charset=utf-8\r\n\r\n" +
			family + " family " + persian + " \u200c \u200c\u200d \u200cend\u200c"))
		eq(t, ctype+" snippet", m.Snippet, family+" family "+persian+" end")
	}
	cut := strings.Repeat("a", snippetRunes-2) + " " + family
	m := Parse([]byte("Content-Type: text/plain; charset=utf-8\r\n\r\n" + cut))
	eq(t, "cut snippet", m.Snippet, strings.Repeat("a", snippetRunes-2)+" 👨")
}

// TestParseHostileInput feeds inputs that have broken mail parsers: it wants
// no panic, a usable result and bounded warnings.
func TestParseHostileInput(t *testing.T) {
	deep := bytes.NewBuffer(nested(500))

	var manyParts bytes.Buffer
	manyParts.WriteString("Content-Type: multipart/mixed; boundary=p\r\n\r\n")
	for range 2000 {
		manyParts.WriteString("--p\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!notbase64***\r\n")
	}
	manyParts.WriteString("--p--\r\n")

	var manyHeaders bytes.Buffer
	for i := range 20000 {
		manyHeaders.WriteString("X-H" + strconv.Itoa(i%3000) + ": v\r\n")
	}
	manyHeaders.WriteString("\r\nbody")

	tests := []struct {
		name  string
		raw   []byte
		check func(t *testing.T, m *Message)
	}{
		{"empty", nil, func(t *testing.T, m *Message) {
			if m.Text != nil || m.HTML != nil || len(m.Headers) != 0 {
				t.Errorf("empty input decoded to %+v", m)
			}
		}},
		{"only CRLF", []byte("\r\n"), nil},
		{"empty header section", []byte("\r\nbody https://example.com/b"), func(t *testing.T, m *Message) {
			eq(t, "Text", m.Text, ptr("body https://example.com/b"))
			eq(t, "Warnings", m.Warnings, nil)
		}},
		{"header without body", []byte("Subject: hi"), func(t *testing.T, m *Message) {
			eq(t, "Subject", m.Subject, "hi")
		}},
		{"enormous header line", append(append([]byte("Subject: "), bytes.Repeat([]byte("a"), 1<<20)...), "\r\n\r\nbody"...), func(t *testing.T, m *Message) {
			if len(m.Subject) != 1<<20 {
				t.Errorf("len(Subject) = %d", len(m.Subject))
			}
			eq(t, "Text", m.Text, ptr("body"))
		}},
		{"enormous folded header", append([]byte("Subject: a"), append(bytes.Repeat([]byte("\r\n b"), 100000), "\r\n\r\nbody"...)...), func(t *testing.T, m *Message) {
			if len(m.Subject) != 1+2*100000 {
				t.Errorf("len(Subject) = %d", len(m.Subject))
			}
		}},
		{"many headers", manyHeaders.Bytes(), func(t *testing.T, m *Message) {
			if len(m.Headers) != 3000 || len(m.Headers[0].Values) != 7 {
				t.Errorf("got %d headers", len(m.Headers))
			}
		}},
		{"deep nesting", deep.Bytes(), func(t *testing.T, m *Message) {
			eq(t, "Links", m.Links, []Link{{"https://example.com/deep", nil, "https://example.com", KindOther}})
			if !containsWarning(m.Warnings, "nested deeper than") {
				t.Errorf("Warnings = %q", m.Warnings)
			}
		}},
		{"nesting at the limit", nested(maxMIMEDepth), func(t *testing.T, m *Message) {
			eq(t, "Text", m.Text, ptr("deep https://example.com/deep"))
			eq(t, "Warnings", m.Warnings, nil)
		}},
		{"nesting past the limit", nested(maxMIMEDepth + 1), func(t *testing.T, m *Message) {
			if m.Text == nil || !strings.Contains(*m.Text, "deep https://example.com/deep") {
				t.Errorf("Text = %v", m.Text)
			}
		}},
		// enmime reads these folds as part of the Content-Type, so the
		// nesting must be counted through them too.
		{"nesting behind a blank continuation line", nestedFolded(maxMIMEDepth+1, "\r\n \r\n "), deeperThanLimit},
		{"nesting behind an unindented continuation", nestedFolded(maxMIMEDepth+1, "\r\n"), deeperThanLimit},
		{"nesting behind a dropped header line", nestedFolded(maxMIMEDepth+1, "\r\n:junk\r\n "), deeperThanLimit},
		{"nesting behind a bare CR line", nestedFolded(maxMIMEDepth+1, "\r\n\r\r\n "), deeperThanLimit},
		{"nesting behind a boundary folded with \\v", nestedVTab(maxMIMEDepth + 1), deeperThanLimit},
		{"parts after a line ending in a close delimiter", manyParts2("x--p--\r\n", "--p\r\n"), moreThanPartLimit},
		{"parts behind delimiters followed by \\v", manyParts2("", "--p\v\r\n"), moreThanPartLimit},
		{"sibling multiparts are not nesting", siblings(3 * maxMIMEDepth), func(t *testing.T, m *Message) {
			eq(t, "Warnings", m.Warnings, nil)
			if m.Text == nil || strings.Count(*m.Text, "leaf") != 3*maxMIMEDepth {
				t.Errorf("Text = %v", m.Text)
			}
		}},
		{"many bad parts", manyParts.Bytes(), func(t *testing.T, m *Message) {
			if len(m.Warnings) > maxWarnings+1 {
				t.Errorf("%d warnings", len(m.Warnings))
			}
		}},
		{"boundary without parts", []byte("Content-Type: multipart/mixed; boundary=x\r\n\r\n"), nil},
		{"multipart without boundary", []byte("Content-Type: multipart/mixed\r\n\r\nplain"), func(t *testing.T, m *Message) {
			eq(t, "Text", m.Text, ptr("plain"))
		}},
		{"unparseable content type", []byte("Content-Type: ;;;===\"\r\n\r\nstill here"), func(t *testing.T, m *Message) {
			eq(t, "Text", m.Text, ptr("still here"))
		}},
		{"corrupt base64 text", []byte("Content-Type: text/plain\r\nContent-Transfer-Encoding: base64\r\n\r\naGVsbG8=*&^%"), nil},
		{"unknown transfer encoding", []byte("Content-Transfer-Encoding: x-uue\r\n\r\nabc"), func(t *testing.T, m *Message) {
			eq(t, "Text", m.Text, ptr("abc"))
		}},
		{"mbox separator", []byte("From sender@example.com Mon Jan  1 00:00:00 2024\r\nSubject: mbox\r\n\r\nbody"), func(t *testing.T, m *Message) {
			eq(t, "Subject", m.Subject, "mbox")
		}},
		{"bad encoded word", []byte("Subject: =?utf-8?b?####?= =?utf-8?q?=ZZ?= =?utf-8?x?a?=\r\n\r\n"), nil},
		{"LF only", []byte("Subject: lf\nContent-Type: text/plain\n\nline1\nline2\n"), func(t *testing.T, m *Message) {
			eq(t, "Text", m.Text, ptr("line1\nline2\n"))
		}},
		{"invalid UTF-8 in snippet source", []byte("Content-Type: text/plain; charset=utf-8\r\n\r\n\xff\xfe\xfd"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Parse(tt.raw)
			checkInvariants(t, m)
			if tt.check != nil {
				tt.check(t, m)
			}
		})
	}
}

// checkInvariants holds for every input; the fuzz test relies on it too.
func checkInvariants(t *testing.T, m *Message) {
	t.Helper()
	if m == nil {
		t.Fatal("Parse returned nil")
	}
	if !utf8.ValidString(m.Snippet) {
		t.Errorf("Snippet is not valid UTF-8: %q", m.Snippet)
	}
	if n := utf8.RuneCountInString(m.Snippet); n > snippetRunes {
		t.Errorf("Snippet has %d runes", n)
	}
	if len(m.Warnings) > maxWarnings+1 {
		t.Errorf("%d warnings", len(m.Warnings))
	}
	for _, w := range m.Warnings {
		if !utf8.ValidString(w) {
			t.Errorf("warning not valid UTF-8: %q", w)
		}
	}
	for _, h := range m.Headers {
		for _, v := range h.Values {
			if !utf8.ValidString(v) {
				t.Errorf("header %s value not valid UTF-8: %q", h.Name, v)
			}
		}
	}
	checkLinks(t, m.Links)
	checkCodes(t, m.Codes)
}

func checkLinks(t *testing.T, links []Link) {
	t.Helper()
	if len(links) > maxLinks {
		t.Errorf("%d links", len(links))
	}
	for _, l := range links {
		if !slices.Contains([]string{KindVerify, KindReset, KindLogin, KindUnsubscribe, KindOther}, l.Kind) {
			t.Errorf("link %q: kind %q", l.URL, l.Kind)
		}
	}
	seen := map[string]bool{}
	for _, l := range links {
		u, err := url.Parse(l.URL)
		if err != nil {
			t.Errorf("link %q does not parse: %v", l.URL, err)
			continue
		}
		scheme := strings.ToLower(u.Scheme)
		if (scheme != "http" && scheme != "https") || u.Host == "" || !u.IsAbs() {
			t.Errorf("link %q is not an absolute http(s) URL", l.URL)
		}
		// The origin is the URL's scheme, host and port, spelled as the URL
		// spells them.
		o, err := url.Parse(l.Origin)
		_, stated, _ := strings.Cut(l.Origin, "://")
		if err != nil || o.Scheme != scheme || !strings.EqualFold(o.Host, u.Host) || o.User != nil || o.Path != "" || o.RawQuery != "" ||
			!strings.HasPrefix(l.URL, l.Origin[:len(scheme)]) || !strings.Contains(l.URL, stated) {
			t.Errorf("link %q: Origin = %q, want %s://%s as written", l.URL, l.Origin, scheme, u.Host)
		}
		if seen[l.URL] {
			t.Errorf("link %q listed twice", l.URL)
		}
		seen[l.URL] = true
		if l.Text != nil && (*l.Text == "" || strings.TrimSpace(*l.Text) != *l.Text) {
			t.Errorf("link %q: Text = %q", l.URL, *l.Text)
		}
	}
}

func containsWarning(ws []string, sub string) bool {
	for _, w := range ws {
		if strings.Contains(w, sub) {
			return true
		}
	}
	return false
}

func crlf(s string) []byte {
	return []byte(strings.ReplaceAll(s, "\n", "\r\n"))
}

// nested builds a message whose multiparts nest depth levels deep.
func nested(depth int) []byte { return nestedFolded(depth, "\r\n ") }

// nestedFolded is nested with fold between each part's media type and its
// boundary parameter.
func nestedFolded(depth int, fold string) []byte {
	var b bytes.Buffer
	b.WriteString("Content-Type: multipart/mixed; boundary=b0\r\n\r\n")
	for i := 1; i < depth; i++ {
		b.WriteString("--b" + strconv.Itoa(i-1) + "\r\nContent-Type: multipart/mixed;" + fold + "boundary=\"b" + strconv.Itoa(i) + "\"\r\n\r\n")
	}
	b.WriteString("--b" + strconv.Itoa(depth-1) + "\r\nContent-Type: text/plain\r\n\r\ndeep https://example.com/deep\r\n")
	for i := depth - 1; i >= 0; i-- {
		b.WriteString("--b" + strconv.Itoa(i) + "--\r\n")
	}
	return b.Bytes()
}

// nestedVTab nests multiparts whose quoted boundaries are folded before
// a \v, which enmime keeps in the boundary ("bN \vz").
func nestedVTab(depth int) []byte {
	var b bytes.Buffer
	b.WriteString("Content-Type: multipart/mixed; boundary=\"b0\r\n \vz\"\r\n\r\n")
	for i := 1; i < depth; i++ {
		b.WriteString("--b" + strconv.Itoa(i-1) + " \vz\r\nContent-Type: multipart/mixed; boundary=\"b" + strconv.Itoa(i) + "\r\n \vz\"\r\n\r\n")
	}
	b.WriteString("--b" + strconv.Itoa(depth-1) + " \vz\r\nContent-Type: text/plain\r\n\r\ndeep\r\n")
	for i := depth - 1; i >= 0; i-- {
		b.WriteString("--b" + strconv.Itoa(i) + " \vz--\r\n")
	}
	return b.Bytes()
}

// manyParts2 is a multipart of more parts than the limit, each opened by
// delim, after a first part whose body is first.
func manyParts2(first, delim string) []byte {
	var b bytes.Buffer
	b.WriteString("Content-Type: multipart/mixed; boundary=p\r\n\r\n--p\r\nContent-Type: text/plain\r\n\r\n" + first)
	for range maxMIMEParts + 10 {
		b.WriteString(delim + "Content-Type: text/plain\r\n\r\nx\r\n")
	}
	b.WriteString("--p--\r\n")
	return b.Bytes()
}

func moreThanPartLimit(t *testing.T, m *Message) {
	t.Helper()
	if !containsWarning(m.Warnings, "MIME parts") {
		t.Errorf("Warnings = %q", m.Warnings)
	}
}

func deeperThanLimit(t *testing.T, m *Message) {
	t.Helper()
	if !containsWarning(m.Warnings, "nested deeper than") {
		t.Errorf("Warnings = %q", m.Warnings)
	}
}

// siblings builds n two-level multiparts side by side in one mixed.
func siblings(n int) []byte {
	var b bytes.Buffer
	b.WriteString("Content-Type: multipart/mixed; boundary=top\r\n\r\n")
	for i := range n {
		s := "s" + strconv.Itoa(i)
		b.WriteString("--top\r\nContent-Type: multipart/alternative; boundary=" + s + "\r\n\r\n")
		b.WriteString("--" + s + "\r\nContent-Type: text/plain\r\n\r\nleaf\r\n--" + s + "--\r\n")
	}
	b.WriteString("--top--\r\n")
	return b.Bytes()
}

// RFC 2231 file names in a legacy charset, whole or in segments, on
// Content-Disposition or Content-Type, are read in their charset.
func TestAttachmentNamesInLegacyCharsets(t *testing.T) {
	for _, tt := range []struct{ header, want string }{
		{"Content-Disposition: attachment; filename*=iso-8859-1''R%E9sum%E9.txt", "Résumé.txt"},
		{"Content-Disposition: attachment; filename*=windows-1251''%CF%F0%E8%E2%E5%F2.txt", "Привет.txt"},
		{"Content-Disposition: attachment; filename*0*=iso-8859-1''R%E9sum; filename*1*=%E9%20final.txt", "Résumé final.txt"},
		{"Content-Disposition: attachment; filename*0*=iso-8859-1''R%E9sum; filename*1=\"e final.txt\"", "Résume final.txt"},
		{"Content-Disposition: attachment\nContent-Type: text/plain; name*0*=iso-8859-1''R%E9sum; name*1*=%E9.txt", "Résumé.txt"},
		{"Content-Disposition: attachment; filename*=utf-8''R%C3%A9sum%C3%A9.txt", "Résumé.txt"},
		{`Content-Disposition: attachment; filename="plain; name.txt"`, "plain; name.txt"},
	} {
		raw := "From: a@example.com\nTo: b@example.com\nSubject: names\nMIME-Version: 1.0\n" +
			"Content-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: text/plain\n\nbody\n--B\n" +
			tt.header + "\n\nattached\n--B--\n"
		m := Parse([]byte(raw))
		if len(m.Attachments) != 1 || m.Attachments[0].Filename != tt.want {
			t.Errorf("%s: %+v, want %q", tt.header, m.Attachments, tt.want)
		}
	}
}
