package emailapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestUnknownRoute: a route no provider has, or a send route asked with
// another method, is answered in capture's own error envelope.
func TestUnknownRoute(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{"/v3/templates", "/emails/", "/v3//mail/send", "/email/withTemplates"} {
		r := e.post(path, nil, []byte(`{}`))
		v, _ := r.json(t).(map[string]any)
		env, _ := v["error"].(map[string]any)
		if r.status != 404 || env["code"] != "not_found" || !strings.Contains(env["message"].(string), "POST /v3/mail/send (SendGrid)") ||
			!strings.Contains(env["message"].(string), "POST /emails/batch (Resend batch)") {
			t.Errorf("POST %s: %d %s", path, r.status, r.body)
		}
	}
	// The path / alone is SES v1's only for an SES v1 request (signed, or
	// a form): another provider's SDK whose base URL lost its path, or a
	// GET, hears the list of routes.
	for _, c := range []struct {
		method string
		header map[string]string
	}{
		{"POST", map[string]string{"Authorization": "Bearer " + e.password(), "Content-Type": "application/json"}}, // SendGrid, Resend
		{"POST", map[string]string{"X-Postmark-Server-Token": e.password(), "Content-Type": "application/json"}},
		{"POST", nil},
		{"GET", nil},
		{"GET", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}},
	} {
		req, _ := http.NewRequest(c.method, e.base+"/", strings.NewReader(`{"from":"a@example.com"}`))
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		r := do(t, req)
		v, _ := r.json(t).(map[string]any)
		env, _ := v["error"].(map[string]any)
		msg, _ := env["message"].(string)
		if r.status != 404 || env["code"] != "not_found" || !strings.Contains(msg, "has no route "+c.method+" /;") ||
			!strings.Contains(msg, "POST /v3/mail/send (SendGrid)") {
			t.Errorf("%s / %v: %d %s", c.method, c.header, r.status, r.body)
		}
	}
	for _, path := range []string{"/emails", "/emails/batch", "/v3/mg.example.com/messages", "/v3/mg.example.com/messages.mime",
		"/email/withTemplate", "/v2/email/outbound-bulk-emails"} {
		req, _ := http.NewRequest("GET", e.base+path, nil)
		r := do(t, req)
		v, _ := r.json(t).(map[string]any)
		env, _ := v["error"].(map[string]any)
		if r.status != 405 || r.header.Get("Allow") != "POST" || env["code"] != "method_not_allowed" {
			t.Errorf("GET %s: %d %v %s", path, r.status, r.header, r.body)
		}
	}
}

func (e *env) resendBatch(body string, extra ...string) response {
	e.t.Helper()
	h := map[string]string{"Authorization": "Bearer " + e.password(), "Content-Type": "application/json"}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return e.post("/emails/batch", h, []byte(body))
}

func TestResendBatch(t *testing.T) {
	e := newEnv(t)
	r := e.resendBatch(`[
		{"from": "App <app@example.com>", "to": "a@example.com", "subject": "One", "text": "first", "tags": [{"name": "n", "value": "1"}]},
		{"from": "app@example.com", "to": ["b@example.com"], "bcc": "c@example.com", "subject": "Two", "html": "<p>second</p>"}
	]`)
	ms := e.messages()
	if len(ms) != 2 {
		t.Fatalf("%d messages; answer %d %s", len(ms), r.status, r.body)
	}
	wantJSON(t, r, 200, `{"data":[{"id":"`+ms[0].ID+`"},{"id":"`+ms[1].ID+`"}]}`)
	if ms[0].Subject != "One" || *ms[0].Text != "first" || !slices.Equal(header(ms[0], "X-Capture-Tag"), []string{"n=1"}) ||
		ms[1].Subject != "Two" || *ms[1].HTML != "<p>second</p>" || !slices.Equal(ms[1].EnvelopeTo, []string{"b@example.com", "c@example.com"}) {
		t.Errorf("messages %+v / %+v", ms[0].MessageSummary, ms[1].MessageSummary)
	}
}

func TestResendBatchRefusals(t *testing.T) {
	e := newEnv(t)
	valid := `{"from":"a@example.com","to":"b@example.com","subject":"s","text":"t"}`
	for _, c := range []struct{ name, body, message string }{
		{"empty", `[]`, "at least one email"},
		{"too many", "[" + strings.Repeat(valid+",", 100) + valid + "]", "at most 100"},
		{"not an array", valid, "expected an array"},
		{"one invalid", "[" + valid + `,{"from":"a@example.com","subject":"s","text":"t"}]`, "emails[1]: Missing `to` field."},
		{"attachments", "[" + valid + `,{"from":"a@example.com","to":"b@example.com","subject":"s","text":"t",` +
			`"attachments":[{"filename":"a.txt","content":"YQ=="}]}]`, "emails[1]: Attachments are not supported"},
		{"scheduled", `[{"from":"a@example.com","to":"b@example.com","subject":"s","text":"t","scheduled_at":"in 1 hour"}]`,
			"emails[0]: `scheduled_at` is not supported"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.resendBatch(c.body)
			v, _ := r.json(t).(map[string]any)
			if r.status != 422 && r.status != 400 || v["statusCode"] != float64(r.status) || !strings.Contains(fmt.Sprint(v["message"]), c.message) {
				t.Errorf("got %d %s, want a refusal with %q", r.status, r.body, c.message)
			}
		})
	}
	if n := len(e.messages()); n != 0 {
		t.Errorf("refused batches stored %d messages: a strict batch is stored whole or not at all", n)
	}

	// Permissive validation stores the valid emails and lists the others.
	r := e.resendBatch("["+valid+`,{"from":"nope","to":"b@example.com","subject":"s","text":"t"},`+valid+"]", "X-Batch-Validation", "permissive")
	ms := e.messages()
	if len(ms) != 2 {
		t.Fatalf("permissive batch stored %d messages: %d %s", len(ms), r.status, r.body)
	}
	wantJSON(t, r, 200, `{"data":[{"id":"`+ms[0].ID+`"},{"id":"`+ms[1].ID+`"}],"errors":[{"index":1,"message":`+
		"\"emails[1]: Invalid `from` field. The email address needs to follow the `email@example.com` or `Name <email@example.com>` format.\"}]}")

	// An email past what one request may store is refused alone: the
	// smaller ones after it still fit.
	for _, m := range ms {
		if err := e.st.DeleteMessage(t.Context(), e.boot.Project.ID, m.ID); err != nil {
			t.Fatal(err)
		}
	}
	big := `{"from":"a@example.com","to":"b@example.com","subject":"big","text":"` + strings.Repeat("=", 3<<20) + `"}`
	r = e.resendBatch("["+big+","+big+","+big+","+valid+"]", "X-Batch-Validation", "permissive")
	if ms := e.messages(); len(ms) != 3 || !strings.Contains(string(r.body), `"index":2`) || strings.Contains(string(r.body), `"index":3`) ||
		!strings.Contains(string(r.body), "fewer or smaller messages") {
		t.Errorf("permissive batch over the request's budget: %d stored, %d %.300s", len(ms), r.status, r.body)
	}

	if r := e.post("/emails/batch", nil, []byte("["+valid+"]")); r.status != 401 {
		t.Errorf("no key: %d %s", r.status, r.body)
	}
}

// TestMailgunMessageID: the id Mailgun answers is the Message-Id of the
// stored message, holding the capture id; a sender's own is kept.
func TestMailgunMessageID(t *testing.T) {
	e := newEnv(t)
	form := url.Values{"from": {"app@example.com"}, "to": {"a@example.com"}, "subject": {"s"}, "text": {"t"}}
	r := e.mailgun("api", e.password(), "application/x-www-form-urlencoded", []byte(form.Encode()))
	m := e.only()
	wantJSON(t, r, 200, `{"id":"<`+m.ID+`@mg.example.com>","message":"Queued. Thank you."}`)
	if m.MessageID != m.ID+"@mg.example.com" {
		t.Errorf("Message-Id %q, answered <%s@mg.example.com>", m.MessageID, m.ID)
	}

	form.Set("h:Message-Id", "<order-1@app.example.com>")
	r = e.mailgun("api", e.password(), "application/x-www-form-urlencoded", []byte(form.Encode()))
	wantJSON(t, r, 200, `{"id":"<order-1@app.example.com>","message":"Queued. Thank you."}`)
	if ms := e.messages(); len(ms) != 2 || ms[1].MessageID != "order-1@app.example.com" || len(header(ms[1], "Message-Id")) != 1 {
		t.Errorf("sender's Message-Id not kept: %+v", ms[len(ms)-1].Headers)
	}

	// A batch's messages share the id answered.
	form = url.Values{"from": {"app@example.com"}, "to": {"a@example.com", "b@example.com"}, "subject": {"s"}, "text": {"t"},
		"recipient-variables": {`{"a@example.com":{},"b@example.com":{}}`}}
	r = e.mailgun("api", e.password(), "application/x-www-form-urlencoded", []byte(form.Encode()))
	ms := e.messages()[2:]
	wantJSON(t, r, 200, `{"id":"<`+ms[0].ID+`@mg.example.com>","message":"Queued. Thank you."}`)
	if len(ms) != 2 || ms[0].MessageID != ms[0].ID+"@mg.example.com" || ms[1].MessageID != ms[0].MessageID {
		t.Errorf("batch Message-Ids %q", []string{ms[0].MessageID, ms[1].MessageID})
	}
}

func (e *env) mailgunMIME(fields [][2]string, mime string) response {
	e.t.Helper()
	var files []formFile
	if mime != "" {
		files = []formFile{{"message", "MimeMessage", "", mime}}
	}
	ct, body := multipartForm(e.t, fields, files)
	req, _ := http.NewRequest("POST", e.base+"/v3/mg.example.com/messages.mime", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", ct)
	req.SetBasicAuth("api", e.password())
	return do(e.t, req)
}

func TestMailgunMIME(t *testing.T) {
	e := newEnv(t)
	mime := "From: App <app@example.com>\r\nTo: a@example.com\r\nSubject: As sent\r\n\r\nbody\r\n"
	r := e.mailgunMIME([][2]string{{"to", "a@example.com"}, {"to", "hidden@example.com"}, {"o:tag", "t1"}, {"h:X-Order", "o-1"}}, mime)
	m := e.only()
	wantJSON(t, r, 200, `{"id":"<`+m.ID+`@mg.example.com>","message":"Queued. Thank you."}`)
	stored, err := e.st.MessageRaw(t.Context(), e.boot.Project.ID, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := "X-Capture-Provider: mailgun\r\nX-Capture-Tag: t1\r\nX-Capture-Domain: mg.example.com\r\nX-Order: o-1\r\n" +
		"Message-Id: <" + m.ID + "@mg.example.com>\r\n" + mime
	if string(stored) != want {
		t.Errorf("stored\n%q\nwant\n%q", stored, want)
	}
	if m.EnvelopeFrom != "app@example.com" || !slices.Equal(m.EnvelopeTo, []string{"a@example.com", "hidden@example.com"}) {
		t.Errorf("envelope %s %v", m.EnvelopeFrom, m.EnvelopeTo)
	}

	// The message's own Message-Id is kept, and answered.
	r = e.mailgunMIME([][2]string{{"to", "a@example.com"}}, "Message-Id: <own@app.example.com>\r\n"+mime)
	wantJSON(t, r, 200, `{"id":"<own@app.example.com>","message":"Queued. Thank you."}`)
	if ms := e.messages(); len(ms) != 2 || ms[1].MessageID != "own@app.example.com" || len(header(ms[1], "Message-Id")) != 1 {
		t.Errorf("own Message-Id: %+v", ms[len(ms)-1].Headers)
	}
	// An h: option for a field the message already has once is dropped:
	// the message keeps its own, never two.
	r = e.mailgunMIME([][2]string{{"to", "a@example.com"}, {"h:Message-Id", "<h@x.example.com>"}, {"h:Reply-To", "h@x.example.com"},
		{"h:In-Reply-To", "<h-parent@x.example.com>"}},
		"Message-Id: <own2@app.example.com>\r\nReply-To: own@app.example.com\r\nIn-Reply-To: <parent@app.example.com>\r\n"+mime)
	wantJSON(t, r, 200, `{"id":"<own2@app.example.com>","message":"Queued. Thank you."}`)
	ms := e.messages()
	last := ms[len(ms)-1]
	if got := header(last, "Message-Id"); len(got) != 1 || got[0] != "<own2@app.example.com>" {
		t.Errorf("Message-Id fields %q, want the message's own once", got)
	}
	if got := header(last, "Reply-To"); len(got) != 1 || got[0] != "own@app.example.com" {
		t.Errorf("Reply-To fields %q, want the message's own once", got)
	}
	if got := header(last, "In-Reply-To"); len(got) != 1 || got[0] != "<parent@app.example.com>" {
		t.Errorf("In-Reply-To fields %q, want the message's own once", got)
	}
}

func TestMailgunMIMERefusals(t *testing.T) {
	e := newEnv(t)
	mime := "From: app@example.com\r\nSubject: s\r\n\r\nbody\r\n"
	for _, c := range []struct {
		name    string
		fields  [][2]string
		mime    string
		message string
	}{
		{"no to", nil, mime, "'to' parameter is missing"},
		{"bad to", [][2]string{{"to", "x@"}}, mime, "'to' parameter is not a valid address"},
		{"no message", [][2]string{{"to", "a@example.com"}}, "", "'message' parameter is missing"},
		{"not MIME", [][2]string{{"to", "a@example.com"}}, "just text", "not a MIME message"},
		{"no From", [][2]string{{"to", "a@example.com"}}, "Subject: s\r\n\r\nbody\r\n", "has no From header"},
		{"reserved header", [][2]string{{"to", "a@example.com"}, {"h:Subject", "x"}}, mime, "h:Subject"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.mailgunMIME(c.fields, c.mime)
			v, _ := r.json(t).(map[string]any)
			if r.status != 400 || len(v) != 1 || !strings.Contains(fmt.Sprint(v["message"]), c.message) {
				t.Errorf("got %d %s, want 400 with %q", r.status, r.body, c.message)
			}
		})
	}
	req, _ := http.NewRequest("POST", e.base+"/v3/mg.example.com/messages.mime", strings.NewReader("to=a%40example.com"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("api", "nope")
	if r := do(t, req); r.status != 401 || string(r.body) != "Forbidden" {
		t.Errorf("wrong key: %d %s", r.status, r.body)
	}
	if n := len(e.messages()); n != 0 {
		t.Errorf("refused requests stored %d messages", n)
	}
}

func TestPostmarkTemplates(t *testing.T) {
	e := newEnv(t)
	r := e.postmark("/email/withTemplate", `{"From":"App <app@example.com>","To":"a@example.com","Cc":"c@example.com",
		"TemplateAlias":"welcome","TemplateModel":{"name":"Ann","items":[1,2]},"InlineCss":false,"Tag":"signup",
		"Headers":[{"Name":"X-Flow","Value":"signup"}]}`)
	m := e.only()
	if v, _ := r.json(t).(map[string]any); r.status != 200 || v["MessageID"] != m.ID || v["ErrorCode"] != 0.0 || v["To"] != "a@example.com" {
		t.Errorf("got %d %s", r.status, r.body)
	}
	for name, want := range map[string][]string{
		"X-Capture-Template":      {"welcome"},
		"X-Capture-Template-Data": {`{"name":"Ann","items":[1,2]}`},
		"X-Capture-Inline-Css":    {"false"},
		"X-Capture-Tag":           {"signup"},
		"X-Flow":                  {"signup"},
	} {
		if got := header(m, name); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if !slices.Equal(m.EnvelopeTo, []string{"a@example.com", "c@example.com"}) {
		t.Errorf("envelope %v", m.EnvelopeTo)
	}

	r = e.postmark("/email/batchWithTemplates", `{"Messages":[
		{"From":"app@example.com","To":"a@example.com","TemplateId":12,"TemplateModel":{}},
		{"From":"app@example.com","To":"b@example.com","TemplateModel":{}},
		{"From":"app@example.com","To":"c@example.com","TemplateId":"13","TemplateModel":{"x":1}}]}`)
	ms := e.messages()[1:]
	if len(ms) != 2 {
		t.Fatalf("%d messages stored: %s", len(ms), r.body)
	}
	results, _ := r.json(t).([]any)
	if r.status != 200 || len(results) != 3 {
		t.Fatalf("got %d %s", r.status, r.body)
	}
	for i, want := range []struct {
		code float64
		id   string
	}{{0, ms[0].ID}, {300, ""}, {0, ms[1].ID}} {
		res := results[i].(map[string]any)
		if res["ErrorCode"] != want.code || want.id != "" && res["MessageID"] != want.id {
			t.Errorf("result %d: %v", i, res)
		}
	}
	if !slices.Equal(header(ms[0], "X-Capture-Template"), []string{"12"}) || !slices.Equal(header(ms[1], "X-Capture-Template"), []string{"13"}) ||
		!slices.Equal(header(ms[1], "X-Capture-Template-Data"), []string{`{"x":1}`}) {
		t.Errorf("batch templates %v / %v", ms[0].Headers, ms[1].Headers)
	}
}

func TestPostmarkTemplateRefusals(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		name, path, body, field string
		code                    float64
	}{
		{"no template", "/email/withTemplate", `{"From":"a@example.com","To":"b@example.com","TemplateModel":{}}`, "TemplateId", 300},
		{"id and alias", "/email/withTemplate", `{"From":"a@example.com","To":"b@example.com","TemplateId":1,"TemplateAlias":"w","TemplateModel":{}}`, "not both", 300},
		{"bad id", "/email/withTemplate", `{"From":"a@example.com","To":"b@example.com","TemplateId":-1,"TemplateModel":{}}`, "TemplateId", 300},
		{"no model", "/email/withTemplate", `{"From":"a@example.com","To":"b@example.com","TemplateAlias":"w"}`, "TemplateModel", 300},
		{"model not an object", "/email/withTemplate", `{"From":"a@example.com","To":"b@example.com","TemplateAlias":"w","TemplateModel":[1]}`, "TemplateModel", 403},
		{"no recipients", "/email/withTemplate", `{"From":"a@example.com","TemplateAlias":"w","TemplateModel":{}}`, "Zero recipients", 300},
		{"no messages", "/email/batchWithTemplates", `{"Messages":[]}`, "Messages", 300},
		{"batch not an object", "/email/batchWithTemplates", `[]`, "body", 403},
		{"too many", "/email/batchWithTemplates", `{"Messages":[` +
			strings.Repeat(`{"From":"a@example.com","To":"b@example.com","TemplateAlias":"w","TemplateModel":{}},`, 500) +
			`{"From":"a@example.com","To":"b@example.com","TemplateAlias":"w","TemplateModel":{}}]}`, "Too many batch messages", 410},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.postmark(c.path, c.body)
			wantField(t, r, 422, c.field)
			if v, _ := r.json(t).(map[string]any); v["ErrorCode"] != c.code {
				t.Errorf("ErrorCode %v, want %v", v["ErrorCode"], c.code)
			}
		})
	}
	if r := e.post("/email/withTemplate", map[string]string{"X-Postmark-Server-Token": "nope"}, []byte(`{}`)); r.status != 401 {
		t.Errorf("wrong token: %d %s", r.status, r.body)
	}
	if n := len(e.messages()); n != 0 {
		t.Errorf("refused requests stored %d messages", n)
	}
}

func (e *env) sesBulk(body string) response {
	e.t.Helper()
	req := signedSESAt(e, "/v2/email/outbound-bulk-emails", e.boot.Inbox.ID, e.password(), body, time.Now())
	return do(e.t, req)
}

func TestSESBulk(t *testing.T) {
	e := newEnv(t)
	r := e.sesBulk(`{
		"FromEmailAddress": "App <app@example.com>",
		"ReplyToAddresses": ["help@example.com"],
		"DefaultEmailTags": [{"Name": "flow", "Value": "welcome"}, {"Name": "plan", "Value": "free"}],
		"DefaultContent": {"Template": {"TemplateName": "welcome", "TemplateData": "{\"name\":\"friend\"}",
			"Headers": [{"Name": "X-Flow", "Value": "welcome"}]}},
		"BulkEmailEntries": [
			{"Destination": {"ToAddresses": ["a@example.com"], "BccAddresses": ["audit@example.com"]},
			 "ReplacementEmailContent": {"ReplacementTemplate": {"ReplacementTemplateData": "{\"name\":\"Ann\"}"}},
			 "ReplacementTags": [{"Name": "plan", "Value": "pro"}],
			 "ReplacementHeaders": [{"Name": "X-Flow", "Value": "welcome-pro"}]},
			{"Destination": {"ToAddresses": ["b@example.com"]}}
		],
		"ConfigurationSetName": "bulk"
	}`)
	ms := e.messages()
	if len(ms) != 2 {
		t.Fatalf("%d messages: %d %s", len(ms), r.status, r.body)
	}
	wantJSON(t, r, 200, `{"BulkEmailEntryResults":[{"Status":"SUCCESS","MessageId":"`+ms[0].ID+`"},{"Status":"SUCCESS","MessageId":"`+ms[1].ID+`"}]}`)
	for i, want := range []struct {
		to             []string
		data, plan, xf string
	}{
		{[]string{"a@example.com", "audit@example.com"}, `{"name":"Ann"}`, "plan=pro", "welcome-pro"},
		{[]string{"b@example.com"}, `{"name":"friend"}`, "plan=free", "welcome"},
	} {
		m := ms[i]
		if !slices.Equal(m.EnvelopeTo, want.to) || !slices.Equal(header(m, "X-Capture-Template"), []string{"welcome"}) ||
			!slices.Equal(header(m, "X-Capture-Template-Data"), []string{want.data}) ||
			!slices.Equal(header(m, "X-Capture-Tag"), []string{"flow=welcome", want.plan}) ||
			!slices.Equal(header(m, "X-Flow"), []string{want.xf}) || !slices.Equal(header(m, "X-Capture-Configuration-Set"), []string{"bulk"}) ||
			!slices.Equal(addresses(m.ReplyTo), []string{"help@example.com"}) || m.MessageID == "" {
			t.Errorf("entry %d: envelope %v headers %v", i, m.EnvelopeTo, m.Headers)
		}
	}
}

func TestSESBulkRefusals(t *testing.T) {
	e := newEnv(t)
	entry := `{"Destination":{"ToAddresses":["a@example.com"]}}`
	tmpl := `"DefaultContent":{"Template":{"TemplateName":"w"}}`
	for _, c := range []struct{ name, body, field string }{
		{"no template", `{"FromEmailAddress":"a@example.com","BulkEmailEntries":[` + entry + `]}`, "DefaultContent.Template"},
		{"no entries", `{"FromEmailAddress":"a@example.com",` + tmpl + `}`, "BulkEmailEntries"},
		{"too many", `{"FromEmailAddress":"a@example.com",` + tmpl + `,"BulkEmailEntries":[` + strings.Repeat(entry+",", 50) + entry + `]}`, "at most 50"},
		{"no sender", `{` + tmpl + `,"BulkEmailEntries":[` + entry + `]}`, "FromEmailAddress"},
		{"no destination", `{"FromEmailAddress":"a@example.com",` + tmpl + `,"BulkEmailEntries":[` + entry + `,{}]}`, "BulkEmailEntries[1].Destination"},
		{"bad address", `{"FromEmailAddress":"a@example.com",` + tmpl + `,"BulkEmailEntries":[{"Destination":{"ToAddresses":["x@"]}}]}`,
			"BulkEmailEntries[0].Destination.ToAddresses"},
		{"bad data", `{"FromEmailAddress":"a@example.com",` + tmpl + `,"BulkEmailEntries":[{"Destination":{"ToAddresses":["a@example.com"]},` +
			`"ReplacementEmailContent":{"ReplacementTemplate":{"ReplacementTemplateData":"{nope"}}}]}`, "ReplacementTemplateData"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.sesBulk(c.body)
			if r.status != 400 || r.header.Get("X-Amzn-Errortype") == "" || !strings.Contains(string(r.body), c.field) {
				t.Errorf("got %d %v %s, want 400 naming %q", r.status, r.header.Get("X-Amzn-Errortype"), r.body, c.field)
			}
		})
	}
	req := signedSESAt(e, "/v2/email/outbound-bulk-emails", e.boot.Inbox.ID, "wrong", `{}`, time.Now())
	if r := do(t, req); r.status != 403 || r.header.Get("X-Amzn-Errortype") != "InvalidSignatureException" {
		t.Errorf("wrong secret: %d %s", r.status, r.body)
	}
	if n := len(e.messages()); n != 0 {
		t.Errorf("refused requests stored %d messages", n)
	}
}
