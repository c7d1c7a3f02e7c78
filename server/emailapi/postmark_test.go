package emailapi_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func (e *env) postmark(path, body string) response {
	e.t.Helper()
	return e.post(path, map[string]string{"X-Postmark-Server-Token": e.password(), "Content-Type": "application/json"}, []byte(body))
}

func TestPostmarkMessage(t *testing.T) {
	e := newEnv(t)
	r := e.postmark("/email", `{
		"From": "Äpp <app@example.com>",
		"To": "Alice <alice@example.com>, bob@example.com",
		"Cc": "carol@example.com",
		"Bcc": "dave@example.com",
		"ReplyTo": "help@example.com",
		"Subject": "Reset your password",
		"TextBody": "Reset: https://app.example/reset?t=1",
		"HtmlBody": "<a href=\"https://app.example/reset?t=1\">Reset</a><img src=\"cid:logo.png\">",
		"Tag": "password-reset",
		"Headers": [{"Name": "X-Request", "Value": "r-1"}],
		"TrackOpens": true,
		"TrackLinks": "HtmlOnly",
		"Metadata": {"user": "42"},
		"MessageStream": "outbound",
		"Attachments": [
			{"Name": "readme.txt", "Content": "aGVsbG8=", "ContentType": "text/plain"},
			{"Name": "logo.png", "Content": "iVBORw0KGgo=", "ContentType": "image/png", "ContentID": "cid:logo.png"}
		]
	}`)
	v, _ := r.json(t).(map[string]any)
	if r.status != 200 || v["ErrorCode"] != 0.0 || v["Message"] != "OK" || v["To"] != "Alice <alice@example.com>, bob@example.com" ||
		v["SubmittedAt"] == "" || !strings.HasPrefix(fmt.Sprint(v["MessageID"]), "msg_") {
		t.Fatalf("got %d %s", r.status, r.body)
	}
	m := e.only()
	if m.ID != v["MessageID"] || m.Subject != "Reset your password" || m.From.Name != "Äpp" ||
		!slices.Equal(addresses(m.To), []string{"alice@example.com", "bob@example.com"}) ||
		!slices.Equal(addresses(m.Cc), []string{"carol@example.com"}) || !slices.Equal(addresses(m.ReplyTo), []string{"help@example.com"}) ||
		!slices.Equal(m.EnvelopeTo, []string{"alice@example.com", "bob@example.com", "carol@example.com", "dave@example.com"}) {
		t.Errorf("message %+v", m.MessageSummary)
	}
	if len(m.Links) == 0 || m.Links[0].URL != "https://app.example/reset?t=1" {
		t.Errorf("links %+v", m.Links)
	}
	if len(m.Attachments) != 2 || m.Attachments[0].ContentID != "logo.png" || !m.Attachments[0].Inline ||
		m.Attachments[1].Filename != "readme.txt" || string(e.attachment(m, 1)) != "hello" {
		t.Errorf("attachments %+v", m.Attachments)
	}
	for name, want := range map[string][]string{
		"X-Request":                {"r-1"},
		"X-Capture-Tag":            {"password-reset"},
		"X-Capture-Metadata":       {`{"user":"42"}`},
		"X-Capture-Tracking":       {`{"TrackLinks":"HtmlOnly","TrackOpens":true}`},
		"X-Capture-Message-Stream": {"outbound"},
	} {
		if got := header(m, name); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

// TestPostmarkBatch answers one result per message: the invalid one is
// refused alone, the others stored.
func TestPostmarkBatch(t *testing.T) {
	e := newEnv(t)
	r := e.postmark("/email/batch", `[
		{"From": "app@example.com", "To": "a@example.com", "Subject": "one", "TextBody": "1"},
		{"From": "app@example.com", "To": "not an address", "Subject": "two", "TextBody": "2"},
		{"From": "app@example.com", "To": "c@example.com", "Subject": "three", "HtmlBody": "<p>3</p>"}
	]`)
	results, _ := r.json(t).([]any)
	if r.status != 200 || len(results) != 3 {
		t.Fatalf("got %d %s", r.status, r.body)
	}
	ms := e.messages()
	if len(ms) != 2 || ms[0].Subject != "one" || ms[1].Subject != "three" {
		t.Fatalf("stored %d messages", len(ms))
	}
	first, second, third := results[0].(map[string]any), results[1].(map[string]any), results[2].(map[string]any)
	if first["ErrorCode"] != 0.0 || first["MessageID"] != ms[0].ID || first["To"] != "a@example.com" ||
		third["ErrorCode"] != 0.0 || third["MessageID"] != ms[1].ID {
		t.Errorf("results %s", r.body)
	}
	if second["ErrorCode"] != 300.0 || !strings.Contains(fmt.Sprint(second["Message"]), "'To'") || second["MessageID"] != nil {
		t.Errorf("refused item: %v", second)
	}
}

func TestPostmarkRefusals(t *testing.T) {
	e := newEnv(t)
	valid := `{"From":"a@example.com","To":"b@example.com","Subject":"s","TextBody":"t"}`
	t.Run("no token", func(t *testing.T) {
		r := e.post("/email", nil, []byte(valid))
		wantJSON(t, r, 401, `{"ErrorCode":10,"Message":"No Account or Server API tokens were supplied in the HTTP headers. `+
			`Please add a header for either X-Postmark-Server-Token or X-Postmark-Account-Token."}`)
	})
	t.Run("wrong token", func(t *testing.T) {
		r := e.post("/email/batch", map[string]string{"X-Postmark-Server-Token": "nope"}, []byte("["+valid+"]"))
		wantJSON(t, r, 401, `{"ErrorCode":10,"Message":"The Server Token you provided in the X-Postmark-Server-Token request header `+
			`was invalid. Please verify that you are using a valid token."}`)
	})
	t.Run("too many in a batch", func(t *testing.T) {
		r := e.postmark("/email/batch", "["+strings.Repeat(valid+",", 500)+valid+"]")
		wantField(t, r, 422, "Too many batch messages")
		if v, _ := r.json(t).(map[string]any); v["ErrorCode"] != 410.0 {
			t.Errorf("ErrorCode %v", v["ErrorCode"])
		}
	})
	for _, c := range []struct {
		name, body, field string
		code              float64
	}{
		{"not JSON", `{"From":`, "JSON", 402},
		{"batch not an array", `{}`, "", 0},
		{"wrong type", `{"From":"a@example.com","To":["b@example.com"],"Subject":"s","TextBody":"t"}`, "To", 403},
		{"no From", `{"To":"b@example.com","Subject":"s","TextBody":"t"}`, "'From'", 300},
		{"bad From", `{"From":"nope","To":"b@example.com","Subject":"s","TextBody":"t"}`, "'From'", 300},
		{"no recipients", `{"From":"a@example.com","Subject":"s","TextBody":"t"}`, "Zero recipients", 300},
		{"no body", `{"From":"a@example.com","To":"b@example.com","Subject":"s"}`, "TextBody or HtmlBody", 300},
		{"bad attachment", `{"From":"a@example.com","To":"b@example.com","Subject":"s","TextBody":"t",` +
			`"Attachments":[{"Name":"f","Content":"%%%","ContentType":"text/plain"}]}`, "Attachments[0].Content", 300},
		{"bad TrackLinks", `{"From":"a@example.com","To":"b@example.com","Subject":"s","TextBody":"t","TrackLinks":"Always"}`, "TrackLinks", 300},
		{"reserved header", `{"From":"a@example.com","To":"b@example.com","Subject":"s","TextBody":"t",` +
			`"Headers":[{"Name":"From","Value":"x@example.com"}]}`, "Headers[0].Name", 300},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := "/email"
			if c.code == 0 {
				path = "/email/batch"
			}
			r := e.postmark(path, c.body)
			v, _ := r.json(t).(map[string]any)
			if c.code == 0 {
				if r.status != 422 || v["ErrorCode"] != 403.0 {
					t.Errorf("got %d %s", r.status, r.body)
				}
				return
			}
			wantField(t, r, 422, c.field)
			if v["ErrorCode"] != c.code {
				t.Errorf("ErrorCode %v, want %v", v["ErrorCode"], c.code)
			}
		})
	}
	if n := len(e.messages()); n != 0 {
		t.Errorf("refused requests stored %d messages", n)
	}
}

// TestAttachmentTypeWithoutSubtype sends attachments whose content type
// has no subtype ("pdf"): every provider takes them, as it did, and writes
// them as application/octet-stream. A SendGrid body's type still must be a
// full MIME type (TestSendGridContentTypeParameters).
func TestAttachmentTypeWithoutSubtype(t *testing.T) {
	e := newEnv(t)
	r := e.postmark("/email", `{"From":"a@example.com","To":"b@example.com","Subject":"pm","TextBody":"t",`+
		`"Attachments":[{"Name":"report.pdf","Content":"JVBERg==","ContentType":"pdf"}]}`)
	if r.status != 200 {
		t.Fatalf("Postmark: %d %s", r.status, r.body)
	}
	r = e.sendgrid(`{"personalizations":[{"to":[{"email":"b@example.com"}]}],"from":{"email":"a@example.com"},"subject":"sg",` +
		`"content":[{"type":"text/plain","value":"t"}],"attachments":[{"content":"JVBERg==","filename":"report.pdf","type":"pdf"}]}`)
	if r.status != 202 {
		t.Fatalf("SendGrid: %d %s", r.status, r.body)
	}
	r = e.post("/emails", map[string]string{"Authorization": "Bearer " + e.password()}, []byte(`{"from":"a@example.com",`+
		`"to":"b@example.com","subject":"rs","text":"t","attachments":[{"filename":"report.pdf","content":"JVBERg==","content_type":"pdf"}]}`))
	if r.status != 200 {
		t.Fatalf("Resend: %d %s", r.status, r.body)
	}
	ms := e.messages()
	if len(ms) != 3 {
		t.Fatalf("%d messages stored", len(ms))
	}
	for _, m := range ms {
		if len(m.Attachments) != 1 || m.Attachments[0].ContentType != "application/octet-stream" ||
			m.Attachments[0].Filename != "report.pdf" || string(e.attachment(m, 0)) != "%PDF" {
			t.Errorf("%s: attachments %+v", m.Subject, m.Attachments)
		}
	}
}

// TestPostmarkMetadataValues sends Metadata as mrz1836/postmark sends it
// (map[string]interface{}): numbers and booleans are kept as their JSON
// text, as Postmark keeps every value a string.
func TestPostmarkMetadataValues(t *testing.T) {
	e := newEnv(t)
	r := e.postmark("/email", `{"From":"a@example.com","To":"b@example.com","Subject":"s","TextBody":"t",
		"Metadata":{"user":42,"ratio":0.5,"vip":true,"trial":false,"name":"Ann","long-name-of-twenty!":"`+strings.Repeat("é", 80)+`"}}`)
	if r.status != 200 {
		t.Fatalf("got %d %s", r.status, r.body)
	}
	want := `{"long-name-of-twenty!":"` + strings.Repeat("é", 80) + `","name":"Ann","ratio":"0.5","trial":"false","user":"42","vip":"true"}`
	if got := header(e.only(), "X-Capture-Metadata"); !slices.Equal(got, []string{want}) {
		t.Errorf("X-Capture-Metadata: %q, want %q", got, want)
	}
}

// TestPostmarkMetadataRefusals checks Metadata as Postmark documents it:
// at most 10 fields, names up to 20 characters, values up to 80, no two
// names differing only in case, and values that are text.
func TestPostmarkMetadataRefusals(t *testing.T) {
	e := newEnv(t)
	var eleven []string
	for i := range 11 {
		eleven = append(eleven, fmt.Sprintf(`"k%d":"v"`, i))
	}
	for _, c := range []struct{ name, metadata, want string }{
		{"an object", `{"user":{"id":1}}`, `\"user\"`},
		{"an array", `{"ids":[1,2]}`, `\"ids\"`},
		{"null", `{"gone":null}`, `\"gone\"`},
		{"name too long", `{"` + strings.Repeat("n", 21) + `":"v"}`, strings.Repeat("n", 21)},
		{"value too long", `{"note":"` + strings.Repeat("v", 81) + `"}`, `\"note\"`},
		{"case duplicates", `{"a_key":"1","A_Key":"2"}`, `\"a_key\"`},
		{"eleven fields", `{` + strings.Join(eleven, ",") + `}`, "at most 10"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.postmark("/email", `{"From":"a@example.com","To":"b@example.com","Subject":"s","TextBody":"t","Metadata":`+c.metadata+`}`)
			v, _ := r.json(t).(map[string]any)
			if v["ErrorCode"] != 300.0 {
				t.Errorf("ErrorCode %v, want 300", v["ErrorCode"])
			}
			wantField(t, r, 422, c.want)
		})
	}
	if n := len(e.messages()); n != 0 {
		t.Errorf("refused requests stored %d messages", n)
	}
}
