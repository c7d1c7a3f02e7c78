package emailapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/store"
)

func (e *env) sendgrid(body string) response {
	e.t.Helper()
	return e.post("/v3/mail/send", map[string]string{"Authorization": "Bearer " + e.password(), "Content-Type": "application/json"}, []byte(body))
}

func TestSendGridMessage(t *testing.T) {
	e := newEnv(t)
	r := e.sendgrid(`{
		"personalizations": [{
			"to": [{"email": "alice@example.com", "name": "Alice"}, {"email": "bob@example.com"}],
			"cc": [{"email": "carol@example.com"}],
			"bcc": [{"email": "dave@example.com"}],
			"headers": {"X-Trace": "personal"},
			"dynamic_template_data": {"name": "Alice"},
			"custom_args": {"user": "42"}
		}],
		"from": {"email": "app@example.com", "name": "Äpp"},
		"reply_to": {"email": "help@example.com", "name": "Help"},
		"subject": "Welcome",
		"content": [{"type": "text/plain", "value": "Hi\nthere"}, {"type": "text/html", "value": "<p>Hi <img src=\"cid:logo\"></p>"}],
		"attachments": [
			{"content": "AAEC/w==", "filename": "data.bin", "type": "application/octet-stream"},
			{"content": "iVBORw0KGgo=", "filename": "logo.png", "type": "image/png", "disposition": "inline", "content_id": "logo"}
		],
		"headers": {"X-Trace": "global", "X-Other": "kept"},
		"categories": ["signup", "welcome"],
		"template_id": "d-123",
		"custom_args": {"campaign": "c1"},
		"batch_id": "b1",
		"tracking_settings": {"click_tracking": {"enable": true}}
	}`)
	if r.status != 202 || len(r.body) != 0 || !strings.HasPrefix(r.header.Get("X-Message-Id"), "msg_") {
		t.Fatalf("got %d %q %v", r.status, r.body, r.header)
	}
	m := e.only()
	if m.ID != r.header.Get("X-Message-Id") {
		t.Errorf("X-Message-Id %s names another message than %s", r.header.Get("X-Message-Id"), m.ID)
	}
	if m.From == nil || m.From.Name != "Äpp" || m.From.Address != "app@example.com" || m.Subject != "Welcome" {
		t.Errorf("from %+v subject %q", m.From, m.Subject)
	}
	if !slices.Equal(addresses(m.To), []string{"alice@example.com", "bob@example.com"}) || m.To[0].Name != "Alice" ||
		!slices.Equal(addresses(m.Cc), []string{"carol@example.com"}) ||
		!slices.Equal(addresses(m.ReplyTo), []string{"help@example.com"}) {
		t.Errorf("to %v cc %v reply-to %v", m.To, m.Cc, m.ReplyTo)
	}
	if m.EnvelopeFrom != "app@example.com" ||
		!slices.Equal(m.EnvelopeTo, []string{"alice@example.com", "bob@example.com", "carol@example.com", "dave@example.com"}) {
		t.Errorf("envelope %s %v", m.EnvelopeFrom, m.EnvelopeTo)
	}
	if header(m, "Bcc") != nil {
		t.Error("Bcc is in the headers")
	}
	if m.Text == nil || *m.Text != "Hi\nthere" || m.HTML == nil || *m.HTML != `<p>Hi <img src="cid:logo"></p>` {
		t.Errorf("text %v html %v", m.Text, m.HTML)
	}
	if len(m.Attachments) != 2 {
		t.Fatalf("attachments %+v", m.Attachments)
	}
	if a := m.Attachments[0]; a.Filename != "logo.png" || a.ContentType != "image/png" || a.ContentID != "logo" || !a.Inline {
		t.Errorf("inline image %+v", a)
	}
	if a := m.Attachments[1]; a.Filename != "data.bin" || a.ContentType != "application/octet-stream" || a.Inline {
		t.Errorf("attachment %+v", a)
	}
	if got := e.attachment(m, 1); string(got) != "\x00\x01\x02\xff" {
		t.Errorf("attachment bytes %x", got)
	}
	for name, want := range map[string][]string{
		"X-Trace":                 {"personal"},
		"X-Other":                 {"kept"},
		"X-Capture-Provider":      {"sendgrid"},
		"X-Capture-Tag":           {"signup", "welcome"},
		"X-Capture-Template":      {"d-123"},
		"X-Capture-Template-Data": {`{"name":"Alice"}`},
		"X-Capture-Metadata":      {`{"campaign":"c1","user":"42"}`},
		"X-Capture-Batch-Id":      {"b1"},
		"X-Capture-Tracking":      {`{"click_tracking":{"enable":true}}`},
	} {
		if got := header(m, name); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

// TestSendGridPersonalizations: one message per personalization, each
// with its own recipients, subject and substitutions.
func TestSendGridPersonalizations(t *testing.T) {
	e := newEnv(t)
	r := e.sendgrid(`{
		"personalizations": [
			{"to": [{"email": "a@example.com"}], "substitutions": {"-name-": "Ann", "-name-x": "longer wins"}},
			{"to": [{"email": "b@example.com"}], "subject": "Own subject for -name-", "substitutions": {"-name-": "Ben"}, "send_at": ` +
		fmt.Sprint(time.Now().Add(time.Hour).Unix()) + `}
		],
		"from": {"email": "app@example.com"},
		"subject": "Hello -name-",
		"content": [{"type": "text/plain", "value": "Dear -name-, -name-x. %footer%"}],
		"sections": {"%footer%": "Bye"}
	}`)
	if r.status != 202 || len(r.header.Values("X-Message-Id")) != 1 {
		t.Fatalf("got %d %v", r.status, r.header)
	}
	ms := e.messages()
	if len(ms) != 2 {
		t.Fatalf("%d messages", len(ms))
	}
	// One X-Message-Id for the send: its first message's id, which every
	// message of the send carries.
	if id := r.header.Get("X-Message-Id"); ms[0].ID != id ||
		!slices.Equal(header(ms[0], "X-Capture-Send-Id"), []string{id}) || !slices.Equal(header(ms[1], "X-Capture-Send-Id"), []string{id}) {
		t.Errorf("X-Message-Id %s: messages %s %v and %s %v", id, ms[0].ID, header(ms[0], "X-Capture-Send-Id"),
			ms[1].ID, header(ms[1], "X-Capture-Send-Id"))
	}
	want := []struct{ to, subject, text string }{
		{"a@example.com", "Hello Ann", "Dear Ann, longer wins. Bye"},
		// Only this personalization's tags are replaced: "-name-x" is not
		// one of them, so its "-name-" part is.
		{"b@example.com", "Own subject for Ben", "Dear Ben, Benx. Bye"},
	}
	for i, w := range want {
		m := ms[i]
		if !slices.Equal(m.EnvelopeTo, []string{w.to}) || m.Subject != w.subject || *m.Text != w.text {
			t.Errorf("message %d: to %v subject %q text %q", i, m.EnvelopeTo, m.Subject, *m.Text)
		}
	}
	if h := header(ms[1], "X-Capture-Send-At"); len(h) != 1 || !strings.HasSuffix(h[0], "Z") {
		t.Errorf("send_at recorded as %q", h)
	}
	// What was asked for is kept beside what was sent.
	for i, subs := range []string{`{"-name-":"Ann","-name-x":"longer wins"}`, `{"-name-":"Ben"}`} {
		if got := header(ms[i], "X-Capture-Substitutions"); !slices.Equal(got, []string{subs}) {
			t.Errorf("message %d: X-Capture-Substitutions %q, want %q", i, got, subs)
		}
		if got := header(ms[i], "X-Capture-Sections"); !slices.Equal(got, []string{`{"%footer%":"Bye"}`}) {
			t.Errorf("message %d: X-Capture-Sections %q", i, got)
		}
	}
}

// TestSendGridSectionSubstitutions: a section may hold substitution tags
// for the recipient, and a substitution may bring in a section, so the
// subject and text read "Hello Mr. John"; substitutions also apply to the
// reply-to address and name, as SendGrid applies them.
func TestSendGridSectionSubstitutions(t *testing.T) {
	e := newEnv(t)
	r := e.sendgrid(`{"personalizations":[
			{"to":[{"email":"john@example.com"}],"substitutions":{"-name-":"John","-greeting-":"-maleGreeting-","-agent-":"Ann","-id-":"7"}},
			{"to":[{"email":"jane@example.com"}],"substitutions":{"-name-":"Jane","-greeting-":"-femaleGreeting-","-agent-":"Bo","-id-":"8"}}],
		"sections":{"-maleGreeting-":"Hello Mr. -name-","-femaleGreeting-":"Hello Ms. -name-"},
		"from":{"email":"app@example.com"},"reply_to":{"email":"support+-id-@example.com","name":"-agent- at Support"},
		"subject":"-greeting-","content":[{"type":"text/plain","value":"-greeting-, welcome. -femaleGreeting-"}]}`)
	if r.status != 202 {
		t.Fatalf("got %d %s", r.status, r.body)
	}
	ms := e.messages()
	if len(ms) != 2 {
		t.Fatalf("%d messages", len(ms))
	}
	for i, w := range []struct{ subject, text, replyTo, replyName string }{
		{"Hello Mr. John", "Hello Mr. John, welcome. Hello Ms. John", "support+7@example.com", "Ann at Support"},
		{"Hello Ms. Jane", "Hello Ms. Jane, welcome. Hello Ms. Jane", "support+8@example.com", "Bo at Support"},
	} {
		m := ms[i]
		if m.Subject != w.subject || m.Text == nil || *m.Text != w.text {
			t.Errorf("message %d: subject %q text %q", i, m.Subject, deref(m.Text))
		}
		if len(m.ReplyTo) != 1 || m.ReplyTo[0].Address != w.replyTo || m.ReplyTo[0].Name != w.replyName {
			t.Errorf("message %d: reply-to %+v, want %s <%s>", i, m.ReplyTo, w.replyName, w.replyTo)
		}
	}
	// A reply-to that is not an address once substituted is refused.
	r = e.sendgrid(`{"personalizations":[{"to":[{"email":"john@example.com"}],"substitutions":{"-rt-":"nobody"}}],
		"from":{"email":"app@example.com"},"reply_to_list":[{"email":"-rt-"}],"subject":"s","content":[{"type":"text/plain","value":"t"}]}`)
	wantField(t, r, 400, "reply_to_list.0.email")
}

// TestSendGridContentTypeParameters sends content whose types carry
// parameters, as SDKs and frameworks write them: text/plain and text/html
// with a charset are still the message's bodies (its links found), in
// UTF-8 whatever charset was named, since a JSON string is Unicode, and
// another type keeps its parameters, their values as given.
func TestSendGridContentTypeParameters(t *testing.T) {
	e := newEnv(t)
	r := e.sendgrid(`{"personalizations":[{"to":[{"email":"b@example.com"}]}],"from":{"email":"a@example.com"},"subject":"s",
		"content":[{"type":"text/plain; charset=ISO-8859-1","value":"Hi ü https://app.test/t"},
			{"type":"Text/HTML; charset=UTF-8","value":"<p>Hello <a href=\"https://app.test/x\">ü</a></p>"},
			{"type":"text/calendar; method=REQUEST","value":"BEGIN:VCALENDAR\r\nMETHOD:REQUEST\r\nEND:VCALENDAR\r\n"}]}`)
	if r.status != 202 {
		t.Fatalf("got %d %s", r.status, r.body)
	}
	m := e.only()
	if m.Text == nil || *m.Text != "Hi ü https://app.test/t" || m.HTML == nil || *m.HTML != `<p>Hello <a href="https://app.test/x">ü</a></p>` {
		t.Errorf("text %v html %v", m.Text, m.HTML)
	}
	links, _, err := e.st.MessageLinks(t.Context(), e.boot.Project.ID, m.ID, store.LinkFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, l := range links {
		urls = append(urls, l.URL)
	}
	if !slices.Contains(urls, "https://app.test/x") {
		t.Errorf("links %q, want https://app.test/x among them", urls)
	}
	for _, a := range m.Attachments {
		if a.ContentType == "application/octet-stream" {
			t.Errorf("a content block became an attachment: %+v", a)
		}
	}
	raw, err := e.st.MessageRaw(t.Context(), e.boot.Project.ID, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Content-Type: text/plain; charset=utf-8\r\n",
		"Content-Type: text/html; charset=utf-8\r\n",
		"Content-Type: text/calendar; charset=utf-8; method=REQUEST\r\n",
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("no %q in\n%s", want, raw)
		}
	}
	// The media type names the block: the same type twice is refused,
	// parameters or not.
	r = e.sendgrid(`{"personalizations":[{"to":[{"email":"b@example.com"}]}],"from":{"email":"a@example.com"},"subject":"s",
		"content":[{"type":"text/plain","value":"a"},{"type":"text/plain; charset=utf-8","value":"b"}]}`)
	wantField(t, r, 400, "content.1.type")
	// A type without a subtype is no media type, not a part to write.
	r = e.sendgrid(`{"personalizations":[{"to":[{"email":"b@example.com"}]}],"from":{"email":"a@example.com"},"subject":"s",
		"content":[{"type":"text/plain","value":"a"},{"type":"pdf","value":"b"}]}`)
	wantField(t, r, 400, "content.1.type")
}

func TestSendGridSandboxStoresNothing(t *testing.T) {
	e := newEnv(t)
	r := e.sendgrid(`{"personalizations":[{"to":[{"email":"b@example.com"}]}],"from":{"email":"a@example.com"},"subject":"s",
		"content":[{"type":"text/plain","value":"t"}],"mail_settings":{"sandbox_mode":{"enable":true}}}`)
	if r.status != 200 || len(e.messages()) != 0 {
		t.Errorf("sandbox: %d, %d messages", r.status, len(e.messages()))
	}
}

func TestSendGridRefusals(t *testing.T) {
	e := newEnv(t)
	// valid is a valid request with personalizations p, the other fields
	// overridden by patch (a later JSON key wins).
	withPersonalizations := func(p, patch string) string {
		return `{"personalizations":` + p + `,"from":{"email":"a@example.com"},"subject":"s","content":[{"type":"text/plain","value":"t"}]` + patch + "}"
	}
	valid := func(patch string) string { return withPersonalizations(`[{"to":[{"email":"b@example.com"}]}]`, patch) }
	t.Run("no credential", func(t *testing.T) {
		r := e.post("/v3/mail/send", nil, []byte(valid("")))
		wantJSON(t, r, 401, `{"errors":[{"message":"authorization required","field":null,"help":null}]}`)
	})
	t.Run("wrong credential", func(t *testing.T) {
		r := e.post("/v3/mail/send", map[string]string{"Authorization": "Bearer " + e.password() + "x"}, []byte(valid("")))
		wantJSON(t, r, 401, `{"errors":[{"message":"The provided authorization grant is invalid, expired, or revoked","field":null,"help":null}]}`)
	})
	for _, c := range []struct{ name, body, field string }{
		{"not JSON", `{"personalizations":`, ""},
		{"wrong type", `{"personalizations":{"to":1}}`, "personalizations"},
		{"no personalizations", `{"from":{"email":"a@example.com"},"subject":"s","content":[{"type":"text/plain","value":"t"}]}`, "personalizations"},
		{"no to", withPersonalizations(`[{"cc":[{"email":"c@example.com"}]}]`, ""), "personalizations.0.to"},
		{"bad to", withPersonalizations(`[{"to":[{"email":"nobody"}]}]`, ""), "personalizations.0.to.0.email"},
		{"no from", `{"personalizations":[{"to":[{"email":"b@example.com"}]}],"subject":"s","content":[{"type":"text/plain","value":"t"}]}`, "from.email"},
		{"no subject", valid(`,"subject":""`), "subject"},
		{"no content", valid(`,"content":[]`), "content"},
		{"empty content", valid(`,"content":[{"type":"text/plain","value":""}]`), "content.0.value"},
		{"html before text", valid(`,"content":[{"type":"text/html","value":"h"},{"type":"text/plain","value":"t"}]`), "content.1.type"},
		{"bad base64", valid(`,"attachments":[{"content":"***","filename":"f"}]`), "attachments.0.content"},
		{"inline without id", valid(`,"attachments":[{"content":"AA==","filename":"f","disposition":"inline"}]`), "attachments.0.content_id"},
		{"reserved header", valid(`,"headers":{"Subject":"x"}`), "headers"},
		{"duplicate recipient", withPersonalizations(`[{"to":[{"email":"b@example.com"}],"bcc":[{"email":"B@example.com"}]}]`, ""), "personalizations.0"},
		{"too far ahead", valid(`,"send_at":` + fmt.Sprint(time.Now().Add(100*time.Hour).Unix())), "send_at"},
		{"both reply-tos", valid(`,"reply_to":{"email":"r@example.com"},"reply_to_list":[{"email":"s@example.com"}]`), "reply_to_list"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.sendgrid(c.body)
			v, _ := r.json(t).(map[string]any)
			errs, _ := v["errors"].([]any)
			if r.status != 400 || len(errs) != 1 {
				t.Fatalf("got %d %s", r.status, r.body)
			}
			entry := errs[0].(map[string]any)
			if c.field == "" && entry["field"] != nil || c.field != "" && entry["field"] != c.field {
				t.Errorf("field %v, want %q: %s", entry["field"], c.field, r.body)
			}
			if entry["message"] == "" {
				t.Errorf("no message: %s", r.body)
			}
		})
	}
	if n := len(e.messages()); n != 0 {
		t.Errorf("refused requests stored %d messages", n)
	}
}

// deref is the text a body pointer holds, "" for none.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestSendGridThousandPersonalizations sends SendGrid's largest request,
// 1,000 personalizations, with Python's urllib, whose http.client refuses
// a response of more than 100 header fields: the send must succeed with
// one X-Message-Id, and every message must name it.
func TestSendGridThousandPersonalizations(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatal(err)
		}
		t.Skip("needs python3:", err)
	}
	e := newEnv(t)
	const n = 1000
	personalizations := make([]map[string]any, n)
	for i := range personalizations {
		personalizations[i] = map[string]any{"to": []map[string]string{{"email": fmt.Sprintf("user%d@example.com", i)}}}
	}
	body, _ := json.Marshal(map[string]any{"personalizations": personalizations, "from": map[string]string{"email": "app@example.com"},
		"subject": "Hello", "content": []map[string]string{{"type": "text/plain", "value": "Hi"}}})
	file := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(file, body, 0o600); err != nil {
		t.Fatal(err)
	}
	const script = `
import json, sys, urllib.request
url, key, path = sys.argv[1:]
req = urllib.request.Request(url, data=open(path, "rb").read(), method="POST",
    headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
with urllib.request.urlopen(req) as resp:
    print(json.dumps({"status": resp.status, "ids": resp.headers.get_all("X-Message-Id")}))
`
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "-c", script, e.base+"/v3/mail/send", e.password(), file).CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	var got struct {
		Status int
		IDs    []string
	}
	if err := json.Unmarshal(out, &got); err != nil || got.Status != 202 || len(got.IDs) != 1 {
		t.Fatalf("python3 read %s (%v)", out, err)
	}
	id := got.IDs[0]
	ms := e.allMessages()
	if len(ms) != n || ms[0].ID != id {
		t.Fatalf("%d messages stored, the first %s, answered %s", len(ms), ms[0].ID, id)
	}
	for i, m := range ms {
		if !slices.Equal(header(m, "X-Capture-Send-Id"), []string{id}) || !slices.Equal(m.EnvelopeTo, []string{fmt.Sprintf("user%d@example.com", i)}) {
			t.Fatalf("message %d: to %v X-Capture-Send-Id %v, want %s", i, m.EnvelopeTo, header(m, "X-Capture-Send-Id"), id)
		}
	}
}
