package emailapi_test

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"testing"
)

type formFile struct{ field, filename, contentType, data string }

// multipartForm writes fields (name, value pairs) and files as
// multipart/form-data.
func multipartForm(t *testing.T, fields [][2]string, files []formFile) (string, []byte) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for _, f := range fields {
		w.WriteField(f[0], f[1])
	}
	for _, f := range files {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="`+f.field+`"; filename="`+f.filename+`"`)
		if f.contentType != "" {
			h.Set("Content-Type", f.contentType)
		}
		part, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		part.Write([]byte(f.data))
	}
	w.Close()
	return w.FormDataContentType(), b.Bytes()
}

func (e *env) mailgun(user, password, contentType string, body []byte) response {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.base+"/v3/mg.example.com/messages", bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	return do(e.t, req)
}

func TestMailgunMultipart(t *testing.T) {
	e := newEnv(t)
	ct, body := multipartForm(t, [][2]string{
		{"from", "Äpp <app@example.com>"},
		{"to", "Alice <alice@example.com>"},
		{"to", "bob@example.com, erin@example.com"},
		{"cc", "carol@example.com"},
		{"bcc", "dave@example.com"},
		{"subject", "Your order"},
		{"text", "Thanks for your order"},
		{"html", `<p>Thanks <img src="cid:logo.png"></p>`},
		{"h:Reply-To", "Help <help@example.com>"},
		{"h:X-Order", "o-1"},
		{"v:user", "42"},
		{"o:tag", "orders"},
		{"o:tag", "receipts"},
		{"o:deliverytime", "Tue, 01 Dec 2026 10:00:00 +0100"},
		{"o:tracking-clicks", "htmlonly"},
		{"o:testmode", "yes"},
	}, []formFile{
		{"attachment", "receipt.pdf", "application/pdf", "%PDF-1.4 \x00\xff"},
		{"inline", "logo.png", "image/png", "\x89PNG"},
	})
	r := e.mailgun("api", e.password(), ct, body)
	m := e.only()
	wantJSON(t, r, 200, `{"id":"<`+m.ID+`@mg.example.com>","message":"Queued. Thank you."}`)
	if !bytes.Contains(r.body, []byte(`"id":"<`+m.ID+`@mg.example.com>"`)) {
		t.Errorf("the id is escaped: %s", r.body)
	}
	if m.Subject != "Your order" || m.From.Name != "Äpp" ||
		!slices.Equal(addresses(m.To), []string{"alice@example.com", "bob@example.com", "erin@example.com"}) ||
		!slices.Equal(addresses(m.Cc), []string{"carol@example.com"}) ||
		!slices.Equal(addresses(m.ReplyTo), []string{"help@example.com"}) ||
		!slices.Equal(m.EnvelopeTo, []string{"alice@example.com", "bob@example.com", "erin@example.com", "carol@example.com", "dave@example.com"}) {
		t.Errorf("message %+v reply-to %v envelope %v", m.MessageSummary, m.ReplyTo, m.EnvelopeTo)
	}
	if *m.Text != "Thanks for your order" || *m.HTML != `<p>Thanks <img src="cid:logo.png"></p>` {
		t.Errorf("bodies %q %q", *m.Text, *m.HTML)
	}
	if len(m.Attachments) != 2 || m.Attachments[0].ContentID != "logo.png" || !m.Attachments[0].Inline ||
		m.Attachments[1].ContentType != "application/pdf" || string(e.attachment(m, 1)) != "%PDF-1.4 \x00\xff" {
		t.Errorf("attachments %+v", m.Attachments)
	}
	for name, want := range map[string][]string{
		"X-Order":            {"o-1"},
		"X-Capture-Tag":      {"orders", "receipts"},
		"X-Capture-Metadata": {`{"user":"42"}`},
		"X-Capture-Send-At":  {"2026-12-01T09:00:00Z"},
		"X-Capture-Tracking": {`{"o:tracking-clicks":"htmlonly"}`},
		"X-Capture-Option":   {"o:testmode=yes"},
		"X-Capture-Domain":   {"mg.example.com"},
	} {
		if got := header(m, name); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

func TestMailgunURLEncoded(t *testing.T) {
	e := newEnv(t)
	form := url.Values{"from": {"app@example.com"}, "to": {"a@example.com"}, "subject": {"Hi"}, "html": {"<b>hi</b>"},
		"template": {"welcome"}, "t:variables": {`{"name":"A"}`}}
	r := e.mailgun("api", e.password(), "application/x-www-form-urlencoded", []byte(form.Encode()))
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	m := e.only()
	if *m.HTML != "<b>hi</b>" || m.Text != nil || !slices.Equal(header(m, "X-Capture-Template"), []string{"welcome"}) ||
		!slices.Equal(header(m, "X-Capture-Template-Data"), []string{`{"name":"A"}`}) {
		t.Errorf("message %+v headers %v", m.MessageSummary, m.Headers)
	}
}

// TestMailgunBatchSending: with recipient-variables, each To recipient
// gets a message of its own with its variables substituted.
func TestMailgunBatchSending(t *testing.T) {
	e := newEnv(t)
	form := url.Values{"from": {"app@example.com"}, "to": {"a@example.com", "B <b@example.com>"},
		"subject": {"Hi %recipient.name%"}, "text": {"Your id is %recipient.id%."},
		"recipient-variables": {`{"a@example.com":{"name":"Ann","id":1},"b@example.com":{"name":"Ben","id":2}}`}}
	r := e.mailgun("api", e.password(), "application/x-www-form-urlencoded", []byte(form.Encode()))
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	ms := e.messages()
	if len(ms) != 2 {
		t.Fatalf("%d messages", len(ms))
	}
	for i, want := range []struct{ to, subject, text string }{
		{"a@example.com", "Hi Ann", "Your id is 1."}, {"b@example.com", "Hi Ben", "Your id is 2."},
	} {
		if m := ms[i]; !slices.Equal(m.EnvelopeTo, []string{want.to}) || m.Subject != want.subject || *m.Text != want.text {
			t.Errorf("message %d: %v %q %q", i, m.EnvelopeTo, m.Subject, *m.Text)
		}
	}
}

func TestMailgunRefusals(t *testing.T) {
	e := newEnv(t)
	valid := url.Values{"from": {"app@example.com"}, "to": {"a@example.com"}, "subject": {"s"}, "text": {"t"}}
	for _, c := range []struct{ name, user, password string }{
		{"no credential", "", ""},
		{"wrong key", "api", "nope"},
		{"wrong user", "user", "PASSWORD"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pw := strings.ReplaceAll(c.password, "PASSWORD", e.password())
			r := e.mailgun(c.user, pw, "application/x-www-form-urlencoded", []byte(valid.Encode()))
			if r.status != 401 || string(r.body) != "Forbidden" {
				t.Errorf("got %d %q", r.status, r.body)
			}
		})
	}
	with := func(k, v string) []byte {
		f := url.Values{}
		for key, vs := range valid {
			f[key] = vs
		}
		if v == "" {
			f.Del(k)
		} else {
			f.Set(k, v)
		}
		return []byte(f.Encode())
	}
	for _, c := range []struct {
		name, contentType string
		body              []byte
		message           string
	}{
		{"not a form", "application/json", []byte(`{}`), "multipart/form-data"},
		{"no from", "", with("from", ""), "'from' parameter is missing"},
		{"bad from", "", with("from", "nobody"), "'from' parameter is not a valid address"},
		{"no to", "", with("to", ""), "'to' parameter is missing"},
		{"bad cc", "", with("cc", "x@"), "'cc' parameter is not a valid address"},
		{"no subject", "", with("subject", ""), "'subject' parameter is missing"},
		{"no body", "", with("text", ""), "Need at least one of 'text', 'html' or 'template'"},
		{"attachment as text", "", with("attachment", "abc"), "'attachment' parameter must be a file"},
		{"bad delivery time", "", with("o:deliverytime", "tomorrow"), "o:deliverytime"},
		{"bad recipient variables", "", with("recipient-variables", "[1]"), "recipient-variables"},
		{"reserved header", "", with("h:Content-Type", "text/plain"), "h:Content-Type"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ct := c.contentType
			if ct == "" {
				ct = "application/x-www-form-urlencoded"
			}
			r := e.mailgun("api", e.password(), ct, c.body)
			v, _ := r.json(t).(map[string]any)
			if r.status != 400 || len(v) != 1 || !strings.Contains(v["message"].(string), c.message) {
				t.Errorf("got %d %s, want 400 with %q", r.status, r.body, c.message)
			}
		})
	}
	if n := len(e.messages()); n != 0 {
		t.Errorf("refused requests stored %d messages", n)
	}
}

// TestMailgunTemplateVariablesHeader sends a template's data as
// mailgun-go's AddTemplateVariable does: JSON in h:X-Mailgun-Variables
// (addMessageVariables), no t:variables. It is the template data, and the
// header is kept; t:variables, when given too, wins.
func TestMailgunTemplateVariablesHeader(t *testing.T) {
	e := newEnv(t)
	ct, body := multipartForm(t, [][2]string{
		{"from", "app@example.com"}, {"to", "a@example.com"}, {"subject", "Hi"},
		{"template", "welcome"}, {"h:X-Mailgun-Variables", `{"name": "Ann", "n": 1}`},
	}, nil)
	if r := e.mailgun("api", e.password(), ct, body); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	m := e.only()
	for name, want := range map[string][]string{
		"X-Capture-Template":      {"welcome"},
		"X-Capture-Template-Data": {`{"name":"Ann","n":1}`},
		"X-Mailgun-Variables":     {`{"name": "Ann", "n": 1}`},
	} {
		if got := header(m, name); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}

	// Held to what t:variables is, as the template's data: not JSON is
	// a 400 naming it, and nothing is stored.
	bad := url.Values{"from": {"app@example.com"}, "to": {"c@example.com"}, "subject": {"Hi"}, "template": {"welcome"},
		"h:X-Mailgun-Variables": {`{name: Ann}`}}
	if r := e.mailgun("api", e.password(), "application/x-www-form-urlencoded", []byte(bad.Encode())); r.status != 400 ||
		!strings.Contains(string(r.body), "h:X-Mailgun-Variables") {
		t.Errorf("template data in h:X-Mailgun-Variables that is not JSON: %d %s, want 400 naming it", r.status, r.body)
	}
	if n := len(e.messages()); n != 1 {
		t.Errorf("%d messages after a refused send, want 1", n)
	}

	form := url.Values{"from": {"app@example.com"}, "to": {"b@example.com"}, "subject": {"Hi"}, "template": {"welcome"},
		"h:X-Mailgun-Variables": {`{"from":"header"}`}, "t:variables": {`{"from":"t"}`}}
	if r := e.mailgun("api", e.password(), "application/x-www-form-urlencoded", []byte(form.Encode())); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	ms := e.messages()
	if len(ms) != 2 {
		t.Fatalf("%d messages", len(ms))
	}
	if got := header(ms[1], "X-Capture-Template-Data"); !slices.Equal(got, []string{`{"from":"t"}`}) {
		t.Errorf("with t:variables too: X-Capture-Template-Data %q", got)
	}
}
