package emailapi_test

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
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

// byteArray writes data as resend-go sends an attachment's Content: its
// Attachment.MarshalJSON turns the []byte into a []int (BytesToIntArray),
// so the JSON is an array of numbers, not base64.
func byteArray(data []byte) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, c := range data {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(c)))
	}
	b.WriteByte(']')
	return b.String()
}

// TestResendByteArrayContent sends attachments as resend-go v2 sends
// them: content as an array of byte values, and the deprecated
// InlineContentId as inline_content_id.
func TestResendByteArrayContent(t *testing.T) {
	e := newEnv(t)
	r := e.resend(`{"from":"a@example.com","to":"b@example.com","subject":"s","html":"<img src=\"cid:logo\">",
		"attachments":[{"filename":"a.bin","content":` + byteArray([]byte{0, 1, 2, 255}) + `},
			{"filename":"logo.png","content":[ 137 , 80,78,71 ],"inline_content_id":"logo"},
			{"filename":"empty.txt","content":[]}]}`)
	m := e.only()
	wantJSON(t, r, 200, `{"id":"`+m.ID+`"}`)
	if len(m.Attachments) != 3 {
		t.Fatalf("attachments %+v", m.Attachments)
	}
	byName := map[string]int{}
	for i, a := range m.Attachments {
		byName[a.Filename] = i
	}
	if got := e.attachment(m, byName["a.bin"]); !bytes.Equal(got, []byte{0, 1, 2, 255}) {
		t.Errorf("a.bin holds %v", got)
	}
	if i := byName["logo.png"]; !bytes.Equal(e.attachment(m, i), []byte("\x89PNG")) || m.Attachments[i].ContentID != "logo" {
		t.Errorf("logo.png %+v holds %q", m.Attachments[i], e.attachment(m, i))
	}
}

// TestResendByteArrayBody sends an attachment as numbers that make the
// body larger than base64 would (over 10 MiB × 4/3 + 1 MiB), its message
// within the plan's 10 MiB: it is stored. One whose message is over the
// plan's limit is still refused.
func TestResendByteArrayBody(t *testing.T) {
	e := newEnv(t)
	send := func(n int) response {
		return e.resend(`{"from":"a@example.com","to":"b@example.com","subject":"s","text":"t",` +
			`"attachments":[{"filename":"big.bin","content":[` + strings.Repeat("255,", n-1) + `255]}]}`)
	}
	if r := send(4 << 20); r.status != 200 {
		t.Fatalf("a 4 MiB attachment in a 16 MiB body: %d %s", r.status, r.body)
	}
	if m := e.only(); len(m.Attachments) != 1 || m.Attachments[0].Size != 4<<20 {
		t.Errorf("attachments %+v", m.Attachments)
	}
	r := send(8 << 20) // 8 MiB, over 10 MiB in base64
	wantJSON(t, r, 413, `{"statusCode":413,"name":"validation_error","message":"message exceeds the 10485760-byte limit of the free plan"}`)
}

func TestResendByteArrayRefusals(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ name, attachment, field string }{
		{"over 255", `{"filename":"f","content":[0,1,2,256]}`, "attachments[0].content[3]"},
		{"negative", `{"filename":"f","content":[-1]}`, "attachments[0].content[0]"},
		{"fraction", `{"filename":"f","content":[1,2.5]}`, "attachments[0].content[1]"},
		{"a string", `{"filename":"f","content":[1,"2"]}`, "attachments[0].content[1]"},
		{"null", `{"filename":"f","content":[null]}`, "attachments[0].content[0]"},
		{"an object", `{"filename":"f","content":{"a":1}}`, "attachments[0].content"},
		{"ids differ", `{"filename":"f","content":[1],"content_id":"a","inline_content_id":"b"}`, "attachments[0].inline_content_id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.resend(`{"from":"a@example.com","to":"b@example.com","subject":"s","text":"t","attachments":[` + c.attachment + `]}`)
			wantField(t, r, 422, c.field)
		})
	}
	// A batch refuses attachments, in whichever form.
	r := e.post("/emails/batch", map[string]string{"Authorization": "Bearer " + e.password()},
		[]byte(`[{"from":"a@example.com","to":"b@example.com","subject":"s","text":"t","attachments":[{"filename":"f","content":[1,2]}]}]`))
	wantField(t, r, 422, "Attachments are not supported in batch emails")
	if n := len(e.messages()); n != 0 {
		t.Errorf("refused requests stored %d messages", n)
	}
}
