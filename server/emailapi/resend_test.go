package emailapi_test

import (
	"slices"
	"testing"
)

func (e *env) resend(body string, extra ...string) response {
	e.t.Helper()
	h := map[string]string{"Authorization": "Bearer " + e.password(), "Content-Type": "application/json"}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return e.post("/emails", h, []byte(body))
}

func TestResendMessage(t *testing.T) {
	e := newEnv(t)
	r := e.resend(`{
		"from": "Äpp <app@example.com>",
		"to": ["alice@example.com", "Bob <bob@example.com>"],
		"cc": "carol@example.com",
		"bcc": ["dave@example.com"],
		"reply_to": "help@example.com",
		"subject": "Magic link",
		"text": "Sign in: https://app.example/login?t=9",
		"html": "<a href=\"https://app.example/login?t=9\">Sign in</a>",
		"headers": {"X-Entity-Ref-ID": "123"},
		"attachments": [{"filename": "invoice.pdf", "content": "JVBERi0=" }, {"filename": "logo.png", "content": "iVBO", "content_id": "logo"}],
		"tags": [{"name": "category", "value": "login"}],
		"scheduled_at": "in 1 min"
	}`, "Idempotency-Key", "k-1")
	m := e.only()
	wantJSON(t, r, 200, `{"id":"`+m.ID+`"}`)
	if m.Subject != "Magic link" || m.From.Name != "Äpp" || !slices.Equal(addresses(m.To), []string{"alice@example.com", "bob@example.com"}) ||
		!slices.Equal(addresses(m.Cc), []string{"carol@example.com"}) || !slices.Equal(addresses(m.ReplyTo), []string{"help@example.com"}) ||
		!slices.Equal(m.EnvelopeTo, []string{"alice@example.com", "bob@example.com", "carol@example.com", "dave@example.com"}) {
		t.Errorf("message %+v envelope %v", m.MessageSummary, m.EnvelopeTo)
	}
	if len(m.Attachments) != 2 || m.Attachments[0].ContentID != "logo" || m.Attachments[1].ContentType != "application/pdf" ||
		string(e.attachment(m, 1)) != "%PDF-" {
		t.Errorf("attachments %+v", m.Attachments)
	}
	for name, want := range map[string][]string{
		"X-Entity-Ref-Id":           {"123"},
		"X-Capture-Tag":             {"category=login"},
		"X-Capture-Send-At":         {"in 1 min"},
		"X-Capture-Idempotency-Key": {"k-1"},
	} {
		if got := header(m, name); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

func TestResendRefusals(t *testing.T) {
	e := newEnv(t)
	valid := `{"from":"a@example.com","to":"b@example.com","subject":"s","text":"t"}`
	t.Run("no key", func(t *testing.T) {
		wantJSON(t, e.post("/emails", nil, []byte(valid)), 401,
			`{"statusCode":401,"name":"missing_api_key","message":"Missing API key in the authorization header"}`)
	})
	t.Run("wrong key", func(t *testing.T) {
		wantJSON(t, e.post("/emails", map[string]string{"Authorization": "Bearer re_nope"}, []byte(valid)), 403,
			`{"statusCode":403,"name":"invalid_api_key","message":"API key is invalid"}`)
	})
	for _, c := range []struct {
		name, body string
		status     int
		errName    string
		field      string
	}{
		{"not JSON", `{"from":`, 400, "validation_error", "JSON"},
		{"no from", `{"to":"b@example.com","subject":"s","text":"t"}`, 422, "missing_required_field", "`from`"},
		{"no to", `{"from":"a@example.com","subject":"s","text":"t"}`, 422, "missing_required_field", "`to`"},
		{"no subject", `{"from":"a@example.com","to":"b@example.com","text":"t"}`, 422, "missing_required_field", "`subject`"},
		{"no body", `{"from":"a@example.com","to":"b@example.com","subject":"s"}`, 422, "missing_required_field", "`html`"},
		{"bad from", `{"from":"nope","to":"b@example.com","subject":"s","text":"t"}`, 422, "validation_error", "`from`"},
		{"bad cc", `{"from":"a@example.com","to":"b@example.com","cc":["x"],"subject":"s","text":"t"}`, 422, "validation_error", "`cc`"},
		{"to of the wrong type", `{"from":"a@example.com","to":5,"subject":"s","text":"t"}`, 422, "validation_error", "to"},
		{"attachment by path", `{"from":"a@example.com","to":"b@example.com","subject":"s","text":"t",` +
			`"attachments":[{"filename":"f","path":"https://example.com/f"}]}`, 422, "invalid_attachment", "path"},
		{"empty attachment", `{"from":"a@example.com","to":"b@example.com","subject":"s","text":"t","attachments":[{"filename":"f"}]}`,
			422, "invalid_attachment", "content"},
		{"bad tag", `{"from":"a@example.com","to":"b@example.com","subject":"s","text":"t","tags":[{"name":"a b","value":"c"}]}`,
			422, "validation_error", "ASCII letters"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.resend(c.body)
			v, _ := r.json(t).(map[string]any)
			if r.status != c.status || v["statusCode"] != float64(c.status) || v["name"] != c.errName {
				t.Errorf("got %d %s, want %d %s", r.status, r.body, c.status, c.errName)
			}
			wantField(t, r, c.status, c.field)
		})
	}
	if n := len(e.messages()); n != 0 {
		t.Errorf("refused requests stored %d messages", n)
	}
}
