package emailapi_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func (e *env) ses(body string) response {
	e.t.Helper()
	return do(e.t, signedSES(e, e.password(), body, time.Now()))
}

func TestSESSimple(t *testing.T) {
	e := newEnv(t)
	r := e.ses(`{
		"FromEmailAddress": "\"Äpp\" <app@example.com>",
		"Destination": {"ToAddresses": ["alice@example.com"], "CcAddresses": ["carol@example.com"], "BccAddresses": ["dave@example.com"]},
		"ReplyToAddresses": ["help@example.com"],
		"Content": {"Simple": {
			"Subject": {"Data": "Sign in", "Charset": "UTF-8"},
			"Body": {"Text": {"Data": "Code: 481 516"}, "Html": {"Data": "<p>Code: <b>481516</b></p>"}},
			"Headers": [{"Name": "X-Flow", "Value": "login"}],
			"Attachments": [{"FileName": "a.bin", "RawContent": "AP8=", "ContentType": "application/octet-stream", "ContentDescription": "bytes"},
				{"FileName": "logo.png", "RawContent": "iVBO", "ContentDisposition": "INLINE", "ContentId": "logo"}]
		}},
		"EmailTags": [{"Name": "flow", "Value": "login"}],
		"ConfigurationSetName": "transactional"
	}`)
	m := e.only()
	wantJSON(t, r, 200, `{"MessageId":"`+m.ID+`"}`)
	if r.header.Get("X-Amzn-Requestid") == "" {
		t.Error("no request id")
	}
	if m.Subject != "Sign in" || m.From.Name != "Äpp" || !slices.Equal(addresses(m.To), []string{"alice@example.com"}) ||
		!slices.Equal(addresses(m.Cc), []string{"carol@example.com"}) || !slices.Equal(addresses(m.ReplyTo), []string{"help@example.com"}) ||
		!slices.Equal(m.EnvelopeTo, []string{"alice@example.com", "carol@example.com", "dave@example.com"}) {
		t.Errorf("message %+v envelope %v", m.MessageSummary, m.EnvelopeTo)
	}
	if *m.Text != "Code: 481 516" || *m.HTML != "<p>Code: <b>481516</b></p>" {
		t.Errorf("bodies %q %q", *m.Text, *m.HTML)
	}
	if len(m.Attachments) != 2 || m.Attachments[0].ContentID != "logo" || m.Attachments[0].ContentType != "image/png" ||
		string(e.attachment(m, 1)) != "\x00\xff" {
		t.Errorf("attachments %+v", m.Attachments)
	}
	for name, want := range map[string][]string{
		"X-Flow":                      {"login"},
		"X-Capture-Tag":               {"flow=login"},
		"X-Capture-Configuration-Set": {"transactional"},
	} {
		if got := header(m, name); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

// TestSESRaw stores a Raw message as sent, behind capture's own field;
// Destination, when given, is the envelope.
func TestSESRaw(t *testing.T) {
	e := newEnv(t)
	raw := "From: App <app@example.com>\r\nTo: a@example.com\r\nBcc: hidden@example.com\r\nSubject: Raw one\r\n\r\nbody text\r\n"
	r := e.ses(`{"Content": {"Raw": {"Data": "` + base64.StdEncoding.EncodeToString([]byte(raw)) + `"}}, "EmailTags": [{"Name":"k","Value":"v"}]}`)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	m := e.only()
	if m.Subject != "Raw one" || m.EnvelopeFrom != "app@example.com" || !slices.Equal(m.EnvelopeTo, []string{"a@example.com", "hidden@example.com"}) ||
		*m.Text != "body text\n" {
		t.Errorf("message %+v envelope %v text %q", m.MessageSummary, m.EnvelopeTo, *m.Text)
	}
	stored, err := e.st.MessageRaw(t.Context(), e.boot.Project.ID, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	// SES gives a message without a Message-ID one, as it gives a Simple
	// one.
	if m.MessageID == "" || !strings.HasSuffix(m.MessageID, "@example.com") {
		t.Errorf("Message-ID %q", m.MessageID)
	}
	if want := "X-Capture-Provider: ses\r\nX-Capture-Tag: k=v\r\nMessage-ID: <" + m.MessageID + ">\r\n" + raw; string(stored) != want {
		t.Errorf("raw stored as\n%q\nwant\n%q", stored, want)
	}

	// A message's own Message-ID is kept as it is.
	own := "Message-ID: <own-1@app.example.com>\r\n" + raw
	e.ses(`{"Destination": {"ToAddresses": ["other@example.com"]}, "Content": {"Raw": {"Data": "` +
		base64.StdEncoding.EncodeToString([]byte(own)) + `"}}}`)
	ms := e.messages()
	if len(ms) != 2 || !slices.Equal(ms[1].EnvelopeTo, []string{"other@example.com"}) {
		t.Fatalf("Destination did not make the envelope: %v", ms[len(ms)-1].EnvelopeTo)
	}
	if stored, _ := e.st.MessageRaw(t.Context(), e.boot.Project.ID, ms[1].ID); ms[1].MessageID != "own-1@app.example.com" ||
		string(stored) != "X-Capture-Provider: ses\r\n"+own {
		t.Errorf("own Message-ID: %q stored as %q", ms[1].MessageID, stored)
	}
}

func TestSESTemplateIsRecorded(t *testing.T) {
	e := newEnv(t)
	r := e.ses(`{"FromEmailAddress": "app@example.com", "Destination": {"ToAddresses": ["a@example.com"]},
		"Content": {"Template": {"TemplateName": "welcome", "TemplateData": "{\"name\": \"A\"}"}}}`)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	m := e.only()
	if !slices.Equal(header(m, "X-Capture-Template"), []string{"welcome"}) ||
		!slices.Equal(header(m, "X-Capture-Template-Data"), []string{`{"name":"A"}`}) {
		t.Errorf("headers %v", m.Headers)
	}
}

func TestSESRefusals(t *testing.T) {
	e := newEnv(t)
	valid := `{"FromEmailAddress":"a@example.com","Destination":{"ToAddresses":["b@example.com"]},` +
		`"Content":{"Simple":{"Subject":{"Data":"s"},"Body":{"Text":{"Data":"t"}}}}}`
	wantAWS := func(t *testing.T, r response, status int, errorType, message string) {
		t.Helper()
		v, _ := r.json(t).(map[string]any)
		if r.status != status || r.header.Get("X-Amzn-Errortype") != errorType || len(v) != 1 ||
			!strings.Contains(v["message"].(string), message) {
			t.Errorf("got %d %s %s, want %d %s %q", r.status, r.header.Get("X-Amzn-Errortype"), r.body, status, errorType, message)
		}
	}
	t.Run("unsigned", func(t *testing.T) {
		r := e.post("/v2/email/outbound-emails", nil, []byte(valid))
		wantAWS(t, r, 403, "MissingAuthenticationTokenException", "Missing Authentication Token")
	})
	t.Run("wrong secret", func(t *testing.T) {
		r := do(t, signedSES(e, "wrong", valid, time.Now()))
		wantAWS(t, r, 403, "InvalidSignatureException", "does not match")
	})
	t.Run("unknown access key", func(t *testing.T) {
		r := do(t, signedSESAs(e, "inb_nope", e.password(), valid, time.Now()))
		wantAWS(t, r, 403, "UnrecognizedClientException", "The security token included in the request is invalid.")
	})
	t.Run("old signature", func(t *testing.T) {
		r := do(t, signedSES(e, e.password(), valid, time.Now().Add(-20*time.Minute)))
		wantAWS(t, r, 403, "InvalidSignatureException", "15 minutes")
	})
	t.Run("body changed after signing", func(t *testing.T) {
		req := signedSES(e, e.password(), valid, time.Now())
		changed := strings.Replace(valid, "b@example.com", "x@example.com", 1)
		req.Body = nopCloser{strings.NewReader(changed)}
		r := do(t, req)
		wantAWS(t, r, 403, "InvalidSignatureException", "does not match")
	})
	t.Run("signed for another service", func(t *testing.T) {
		req := signedSES(e, e.password(), valid, time.Now())
		req.Header.Set("Authorization", strings.Replace(req.Header.Get("Authorization"), "/ses/", "/s3/", 1))
		r := do(t, req)
		wantAWS(t, r, 403, "InvalidSignatureException", "'ses'")
	})
	t.Run("malformed authorization", func(t *testing.T) {
		req := signedSES(e, e.password(), valid, time.Now())
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=x")
		r := do(t, req)
		wantAWS(t, r, 403, "IncompleteSignatureException", "SignedHeaders")
	})
	for _, c := range []struct{ name, body, message string }{
		{"not JSON", `{"Content":`, "not valid JSON"},
		{"no content", `{"FromEmailAddress":"a@example.com","Destination":{"ToAddresses":["b@example.com"]}}`, "Content is required"},
		{"two contents", `{"FromEmailAddress":"a@example.com","Destination":{"ToAddresses":["b@example.com"]},` +
			`"Content":{"Simple":{"Subject":{"Data":"s"},"Body":{"Text":{"Data":"t"}}},"Raw":{"Data":"AA=="}}}`, "exactly one"},
		{"no from", `{"Destination":{"ToAddresses":["b@example.com"]},"Content":{"Simple":{"Subject":{"Data":"s"},"Body":{"Text":{"Data":"t"}}}}}`, "FromEmailAddress"},
		{"no destination", `{"FromEmailAddress":"a@example.com","Content":{"Simple":{"Subject":{"Data":"s"},"Body":{"Text":{"Data":"t"}}}}}`, "Destination"},
		{"bad to", strings.Replace(valid, "b@example.com", "b@", 1), "Destination.ToAddresses"},
		{"no body", `{"FromEmailAddress":"a@example.com","Destination":{"ToAddresses":["b@example.com"]},"Content":{"Simple":{"Subject":{"Data":"s"}}}}`, "Content.Simple.Body"},
		{"bad raw", `{"Content":{"Raw":{"Data":"not base64!"}}}`, "Content.Raw.Data"},
		{"raw without recipients", `{"Content":{"Raw":{"Data":"` + base64.StdEncoding.EncodeToString([]byte("From: a@example.com\r\n\r\nx")) + `"}}}`, "recipient"},
		{"attachment without name", `{"FromEmailAddress":"a@example.com","Destination":{"ToAddresses":["b@example.com"]},` +
			`"Content":{"Simple":{"Subject":{"Data":"s"},"Body":{"Text":{"Data":"t"}},"Attachments":[{"RawContent":"AA=="}]}}}`, "Content.Attachments[0].FileName"},
		{"wrong type", `{"FromEmailAddress":["a@example.com"]}`, "FromEmailAddress"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantAWS(t, e.ses(c.body), 400, "BadRequestException", c.message)
		})
	}
	if n := len(e.messages()); n != 0 {
		t.Errorf("refused requests stored %d messages", n)
	}
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }

// TestSESv1 sends Amazon SES v1's SendEmail and SendRawEmail (the Query
// API: a signed form posted to /): stored as their v2 counterparts are,
// answered and refused in the XML the v1 SDKs read.
func TestSESv1(t *testing.T) {
	e := newEnv(t)
	r := do(t, signedSESv1(e, e.password(), url.Values{"Action": {"SendEmail"}, "Version": {"2010-12-01"},
		"Source": {"App <app@example.com>"}, "Destination.ToAddresses.member.1": {"alice@example.com"},
		"Destination.BccAddresses.member.1": {"dave@example.com"}, "ReplyToAddresses.member.1": {"help@example.com"},
		"Message.Subject.Data": {"Welcome"}, "Message.Body.Text.Data": {"Hi"}, "Message.Body.Html.Data": {"<p>Hi</p>"},
		"Tags.member.1.Name": {"flow"}, "Tags.member.1.Value": {"signup"}}))
	answer := regexp.MustCompile(`^<SendEmailResponse xmlns="http://ses.amazonaws.com/doc/2010-12-01/"><SendEmailResult>` +
		`<MessageId>(msg_\w+)</MessageId></SendEmailResult><ResponseMetadata><RequestId>([-0-9a-f]+)</RequestId></ResponseMetadata></SendEmailResponse>$`)
	got := answer.FindStringSubmatch(string(r.body))
	if r.status != 200 || got == nil || r.header.Get("Content-Type") != "text/xml" {
		t.Fatalf("SendEmail: %d %s", r.status, r.body)
	}
	if id := r.header.Get("X-Amzn-Requestid"); id != got[2] {
		t.Errorf("X-Amzn-Requestid %q, body's RequestId %q", id, got[2])
	}
	m := e.only()
	if m.ID != got[1] || m.Subject != "Welcome" || m.Text == nil || *m.Text != "Hi" || m.HTML == nil || *m.HTML != "<p>Hi</p>" ||
		!slices.Equal(m.EnvelopeTo, []string{"alice@example.com", "dave@example.com"}) || !slices.Equal(addresses(m.ReplyTo), []string{"help@example.com"}) ||
		!slices.Equal(header(m, "X-Capture-Tag"), []string{"flow=signup"}) {
		t.Errorf("SendEmail stored %+v", m.MessageSummary)
	}

	// Every member of a list is read, in its numbers' order (10 after 9).
	many := url.Values{"Action": {"SendEmail"}, "Source": {"app@example.com"}, "Message.Subject.Data": {"Many"}, "Message.Body.Text.Data": {"Hi"}}
	var manyTo []string
	for i := 1; i <= 11; i++ {
		to := fmt.Sprintf("r%d@example.com", i)
		many.Set(fmt.Sprintf("Destination.ToAddresses.member.%d", i), to)
		manyTo = append(manyTo, to)
	}
	if r := do(t, signedSESv1(e, e.password(), many)); r.status != 200 {
		t.Fatalf("SendEmail to 11: %d %s", r.status, r.body)
	}
	if ms := e.messages(); len(ms) != 2 || !slices.Equal(ms[1].EnvelopeTo, manyTo) {
		t.Errorf("SendEmail to 11 stored %d messages, the last to %v", len(ms), ms[len(ms)-1].EnvelopeTo)
	}

	raw := "From: app@example.com\r\nTo: bob@example.com\r\nSubject: Raw\r\n\r\nHi Bob\r\n"
	r = do(t, signedSESv1(e, e.password(), url.Values{"Action": {"SendRawEmail"},
		"RawMessage.Data": {base64.StdEncoding.EncodeToString([]byte(raw))}}))
	if r.status != 200 || !strings.HasPrefix(string(r.body), "<SendRawEmailResponse ") {
		t.Fatalf("SendRawEmail: %d %s", r.status, r.body)
	}
	if ms := e.messages(); len(ms) != 3 || ms[2].Subject != "Raw" || !slices.Equal(ms[2].EnvelopeTo, []string{"bob@example.com"}) {
		t.Errorf("SendRawEmail stored %d messages", len(ms))
	}

	for _, c := range []struct {
		name   string
		req    func() *http.Request
		status int
		code   string
		msg    string
	}{
		{"wrong key", func() *http.Request {
			return signedSESv1(e, "wrong", url.Values{"Action": {"SendEmail"}})
		}, 403, "SignatureDoesNotMatch", ""},
		{"unsigned", func() *http.Request {
			req, _ := http.NewRequest("POST", e.base+"/", strings.NewReader("Action=SendEmail"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return req
		}, 403, "MissingAuthenticationToken", ""},
		{"another action", func() *http.Request {
			return signedSESv1(e, e.password(), url.Values{"Action": {"ListIdentities"}})
		}, 400, "InvalidAction", ""},
		{"no subject", func() *http.Request {
			return signedSESv1(e, e.password(), url.Values{"Action": {"SendEmail"}, "Source": {"app@example.com"},
				"Destination.ToAddresses.member.1": {"alice@example.com"}, "Message.Body.Text.Data": {"Hi"}})
		}, 400, "MissingParameter", "Message.Subject is required."},
		{"raw without a recipient", func() *http.Request {
			return signedSESv1(e, e.password(), url.Values{"Action": {"SendRawEmail"}, "RawMessage.Data": {"RnJvbTogYUBleGFtcGxlLmNvbQ0KDQpoaQ0K"}})
		}, 400, "MissingParameter", "Neither Destinations nor the message"},
		{"a gap in a list", func() *http.Request {
			return signedSESv1(e, e.password(), url.Values{"Action": {"SendEmail"}, "Source": {"app@example.com"},
				"Destination.ToAddresses.member.1": {"alice@example.com"}, "Destination.ToAddresses.member.3": {"carol@example.com"},
				"Message.Subject.Data": {"s"}, "Message.Body.Text.Data": {"Hi"}})
		}, 400, "InvalidParameterValue", "Destination.ToAddresses: the list has no member 2"},
		{"a list index that is no number", func() *http.Request {
			return signedSESv1(e, e.password(), url.Values{"Action": {"SendRawEmail"}, "Destinations.member.first": {"alice@example.com"},
				"RawMessage.Data": {"RnJvbTogYUBleGFtcGxlLmNvbQ0KDQpoaQ0K"}})
		}, 400, "InvalidParameterValue", "Destinations.member.first: a list member&#39;s index must be a number from 1"},
		{"a list index of zero", func() *http.Request {
			return signedSESv1(e, e.password(), url.Values{"Action": {"SendEmail"}, "Source": {"app@example.com"},
				"Destination.ToAddresses.member.1": {"alice@example.com"}, "Destination.CcAddresses.member.0": {"carol@example.com"},
				"Message.Subject.Data": {"s"}, "Message.Body.Text.Data": {"Hi"}})
		}, 400, "InvalidParameterValue", "Destination.CcAddresses.member.0: a list member&#39;s index must be a number from 1"},
		{"a gap in the tags", func() *http.Request {
			return signedSESv1(e, e.password(), url.Values{"Action": {"SendEmail"}, "Source": {"app@example.com"},
				"Destination.ToAddresses.member.1": {"alice@example.com"}, "Message.Subject.Data": {"s"}, "Message.Body.Text.Data": {"Hi"},
				"Tags.member.1.Name": {"a"}, "Tags.member.1.Value": {"1"}, "Tags.member.3.Name": {"c"}, "Tags.member.3.Value": {"3"}})
		}, 400, "InvalidParameterValue", "Tags: the list has no member 2"},
		{"no action", func() *http.Request {
			return signedSESv1(e, e.password(), url.Values{"Source": {"app@example.com"}})
		}, 400, "MissingAction", "no Action"},
		{"incomplete signature", func() *http.Request {
			req, _ := http.NewRequest("POST", e.base+"/", strings.NewReader("Action=SendEmail"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+e.boot.Inbox.ID+"/20260101/us-east-1/ses/aws4_request")
			return req
		}, 400, "IncompleteSignature", "SignedHeaders"},
		{"unreadable form", func() *http.Request {
			return signedSESv1Body(e, e.password(), "Action=SendEmail&Source=%zz")
		}, 400, "InvalidParameterValue", "the form body cannot be read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, c.req())
			want := regexp.MustCompile(`^<ErrorResponse xmlns="http://ses.amazonaws.com/doc/2010-12-01/"><Error><Type>Sender</Type>` +
				`<Code>` + c.code + `</Code><Message>[^<]+</Message></Error><RequestId>([-0-9a-f]+)</RequestId></ErrorResponse>$`)
			got := want.FindSubmatch(r.body)
			if r.status != c.status || got == nil || !strings.Contains(string(r.body), c.msg) {
				t.Errorf("got %d %s, want %d %s", r.status, r.body, c.status, c.code)
			}
			// The header names the request the body names.
			if got != nil && r.header.Get("X-Amzn-Requestid") != string(got[1]) {
				t.Errorf("X-Amzn-Requestid %q, body's RequestId %q", r.header.Get("X-Amzn-Requestid"), got[1])
			}
		})
	}
	if n := len(e.messages()); n != 3 {
		t.Errorf("refusals stored %d messages", n-3)
	}
}

// TestSESv1FormGrowth sends an SES v1 message within the plan's limit
// whose form escapes triple its punctuation (%3C, %3D, …): it is stored,
// as the same message sent to v2 is. The plan's limit is kept on the
// message written, and a body over what any message can need is refused
// as a request body.
func TestSESv1FormGrowth(t *testing.T) {
	e := newEnv(t)
	html := strings.Repeat("<p>=</p>", 6<<20/8)
	form := url.Values{"Action": {"SendEmail"}, "Source": {"app@example.com"}, "Destination.ToAddresses.member.1": {"alice@example.com"},
		"Message.Subject.Data": {"Punctuation"}, "Message.Body.Html.Data": {html}}
	if n := len(form.Encode()); n < 15<<20 {
		t.Fatalf("the form is %d bytes, not grown past base64's allowance", n)
	}
	r := do(t, signedSESv1(e, e.password(), form))
	if r.status != 200 || !strings.HasPrefix(string(r.body), "<SendEmailResponse ") {
		t.Fatalf("SES v1, a 6 MiB HTML body: %d %.300s", r.status, r.body)
	}
	var v2 strings.Builder // as the SDK writes it, < and > as they are
	enc := json.NewEncoder(&v2)
	enc.SetEscapeHTML(false)
	enc.Encode(map[string]any{"FromEmailAddress": "app@example.com", "Destination": map[string]any{"ToAddresses": []string{"alice@example.com"}},
		"Content": map[string]any{"Simple": map[string]any{"Subject": map[string]string{"Data": "Punctuation"},
			"Body": map[string]any{"Html": map[string]string{"Data": html}}}}})
	if r := do(t, signedSES(e, e.password(), v2.String(), time.Now())); r.status != 200 {
		t.Fatalf("SES v2, the same message: %d %.300s", r.status, r.body)
	}
	ms := e.messages()
	if len(ms) != 2 || ms[0].HTML == nil || *ms[0].HTML != html || ms[1].HTML == nil || *ms[1].HTML != html {
		t.Fatalf("stored %d messages", len(ms))
	}

	// Within the body's allowance, over the plan's limit once written.
	form.Set("Message.Body.Html.Data", strings.Repeat("x", 11<<20))
	r = do(t, signedSESv1(e, e.password(), form))
	if r.status != 400 || !strings.Contains(string(r.body), "<Code>MessageRejected</Code><Message>message exceeds the 10485760-byte limit") {
		t.Errorf("an 11 MiB message: %d %.300s", r.status, r.body)
	}
	// A body over what any message of the plan can need.
	req := signedSESv1(e, e.password(), url.Values{"Action": {"SendEmail"}})
	size := int64(32 << 20) // over 3 × 10 MiB + 1 MiB
	req.Body, req.ContentLength = io.NopCloser(io.LimitReader(zeros{}, size)), size
	r = do(t, req)
	if r.status != 400 || !strings.Contains(string(r.body), "<Code>MessageRejected</Code><Message>the request body exceeds 32505856 bytes") {
		t.Errorf("a 32 MiB body: %d %.300s", r.status, r.body)
	}
	if n := len(e.messages()); n != 2 {
		t.Errorf("refusals stored %d messages", n-2)
	}
}

// TestSESv1QueryString sends SES v1 requests whose parameters are in the
// query string, as AWS's Query API takes them: a signed POST with Action
// in the URL and the rest in the body, and a signed GET with everything
// in the URL, are both sent. A parameter given twice with other values is
// refused naming it; an unsigned request naming an Action hears v1's own
// refusal.
func TestSESv1QueryString(t *testing.T) {
	e := newEnv(t)
	rest := url.Values{"Source": {"app@example.com"}, "Destination.ToAddresses.member.1": {"alice@example.com"},
		"Message.Subject.Data": {"From the URL"}, "Message.Body.Text.Data": {"Hi Alice"}}
	all := url.Values{"Action": {"SendEmail"}}
	for k, v := range rest {
		all[k] = v
	}
	for _, c := range []struct {
		name, method, query, body string
	}{
		{"POST with Action in the query", "POST", "Action=SendEmail", rest.Encode()},
		{"GET", "GET", all.Encode(), ""},
		{"POST with everything in the query", "POST", all.Encode(), ""},
		{"POST with Action in both", "POST", "Action=SendEmail", all.Encode()},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(e.messages())
			r := do(t, signedSESv1Query(e, e.password(), c.method, c.query, c.body))
			ms := e.messages()
			if r.status != 200 || !strings.HasPrefix(string(r.body), "<SendEmailResponse ") || len(ms) != before+1 {
				t.Fatalf("%d %s, %d messages stored", r.status, r.body, len(ms)-before)
			}
			if m := ms[len(ms)-1]; !strings.Contains(string(r.body), "<MessageId>"+m.ID+"</MessageId>") ||
				m.Subject != "From the URL" || !slices.Equal(m.EnvelopeTo, []string{"alice@example.com"}) {
				t.Errorf("%s stored subject %q to %v", r.body, m.Subject, m.EnvelopeTo)
			}
		})
	}
	n := len(e.messages())
	for _, c := range []struct {
		name   string
		req    *http.Request
		status int
		code   string
		msg    string
	}{
		{"a parameter twice with other values", signedSESv1Query(e, e.password(), "POST", "Source=other%40example.com", all.Encode()),
			400, "InvalidParameterValue", "Source is given both in the query string and in the body"},
		{"a GET with another action", signedSESv1Query(e, e.password(), "GET", "Action=ListIdentities", ""), 400, "InvalidAction", ""},
		{"a wrong key", signedSESv1Query(e, "wrong", "GET", all.Encode(), ""), 403, "SignatureDoesNotMatch", ""},
		{"an unsigned GET naming an action", func() *http.Request {
			req, _ := http.NewRequest("GET", e.base+"/?"+all.Encode(), nil)
			return req
		}(), 403, "MissingAuthenticationToken", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, c.req)
			if r.status != c.status || !strings.HasPrefix(string(r.body), "<ErrorResponse ") ||
				!strings.Contains(string(r.body), "<Code>"+c.code+"</Code>") || !strings.Contains(string(r.body), c.msg) {
				t.Errorf("got %d %s, want %d %s", r.status, r.body, c.status, c.code)
			}
		})
	}
	if got := len(e.messages()); got != n {
		t.Errorf("refusals stored %d messages", got-n)
	}
}

// TestSESTagNames refuses message tags SES refuses: a name or value that
// is empty, longer than 256 characters, or holds anything but ASCII
// letters, digits, _ and -, in v2's EmailTags, its bulk default and
// replacement tags, and v1's Tags, naming the field.
func TestSESTagNames(t *testing.T) {
	e := newEnv(t)
	simple := func(tags string) string {
		return `{"FromEmailAddress": "app@example.com", "Destination": {"ToAddresses": ["b@example.com"]},
			"Content": {"Simple": {"Subject": {"Data": "s"}, "Body": {"Text": {"Data": "t"}}}}, "EmailTags": ` + tags + `}`
	}
	long := strings.Repeat("a", 257)
	for _, c := range []struct{ name, tags, field string }{
		{"empty name", `[{"Name": "", "Value": "v"}]`, "EmailTags[0].Name"},
		{"no name", `[{"Value": "v"}]`, "EmailTags[0].Name"},
		{"a space and a !", `[{"Name": "ok", "Value": "v"}, {"Name": "a b!", "Value": "v"}]`, "EmailTags[1].Name"},
		{"not ASCII", `[{"Name": "flöw", "Value": "v"}]`, "EmailTags[0].Name"},
		{"too long", `[{"Name": "` + long + `", "Value": "v"}]`, "EmailTags[0].Name"},
		{"empty value", `[{"Name": "n", "Value": ""}]`, "EmailTags[0].Value"},
		{"a value with a dot", `[{"Name": "n", "Value": "a.b"}]`, "EmailTags[0].Value"},
		{"a value too long", `[{"Name": "n", "Value": "` + long + `"}]`, "EmailTags[0].Value"},
	} {
		t.Run("v2 "+c.name, func(t *testing.T) {
			r := e.ses(simple(c.tags))
			if r.status != 400 || r.header.Get("X-Amzn-Errortype") != "BadRequestException" || !strings.Contains(string(r.body), c.field) {
				t.Errorf("got %d %s %s, want 400 BadRequestException naming %s", r.status, r.header.Get("X-Amzn-Errortype"), r.body, c.field)
			}
		})
	}
	bulk := func(defaults, replacements string) string {
		return `{"FromEmailAddress": "app@example.com", "DefaultContent": {"Template": {"TemplateName": "welcome"}},
			"DefaultEmailTags": ` + defaults + `,
			"BulkEmailEntries": [{"Destination": {"ToAddresses": ["b@example.com"]}, "ReplacementTags": ` + replacements + `}]}`
	}
	for _, c := range []struct{ name, body, field string }{
		{"default", bulk(`[{"Name": "a b", "Value": "v"}]`, `[]`), "DefaultEmailTags[0].Name"},
		{"replacement", bulk(`[]`, `[{"Name": "n", "Value": "v w"}]`), "BulkEmailEntries[0].ReplacementTags[0].Value"},
	} {
		t.Run("bulk "+c.name, func(t *testing.T) {
			r := e.sesBulk(c.body)
			if r.status != 400 || r.header.Get("X-Amzn-Errortype") != "BadRequestException" || !strings.Contains(string(r.body), c.field) {
				t.Errorf("got %d %s %s, want 400 BadRequestException naming %s", r.status, r.header.Get("X-Amzn-Errortype"), r.body, c.field)
			}
		})
	}
	v1 := url.Values{"Action": {"SendEmail"}, "Source": {"app@example.com"}, "Destination.ToAddresses.member.1": {"b@example.com"},
		"Message.Subject.Data": {"s"}, "Message.Body.Text.Data": {"t"}}
	for _, c := range []struct {
		name  string
		tags  url.Values
		field string
	}{
		{"a value without a name", url.Values{"Tags.member.1.Value": {"v"}}, "Tags.member.1.Name"},
		{"a name without a value", url.Values{"Tags.member.1.Name": {"n"}}, "Tags.member.1.Value"},
		{"a name with a space", url.Values{"Tags.member.1.Name": {"a b"}, "Tags.member.1.Value": {"v"}}, "Tags.member.1.Name"},
	} {
		t.Run("v1 "+c.name, func(t *testing.T) {
			form := url.Values{}
			for k, v := range v1 {
				form[k] = v
			}
			for k, v := range c.tags {
				form[k] = v
			}
			r := do(t, signedSESv1(e, e.password(), form))
			if r.status != 400 || !strings.Contains(string(r.body), "<Code>InvalidParameterValue</Code>") || !strings.Contains(string(r.body), c.field) {
				t.Errorf("got %d %s, want 400 InvalidParameterValue naming %s", r.status, r.body, c.field)
			}
		})
	}
	if n := len(e.messages()); n != 0 {
		t.Fatalf("refused tags stored %d messages", n)
	}
	// The longest name and value SES takes, and every character it allows.
	max := strings.Repeat("Az09_-", 256/6) + "abcd"
	if r := e.ses(simple(`[{"Name": "` + max + `", "Value": "` + max + `"}]`)); r.status != 200 {
		t.Errorf("a 256-character tag: %d %s", r.status, r.body)
	}
	if m := e.only(); !slices.Equal(header(m, "X-Capture-Tag"), []string{max + "=" + max}) {
		t.Errorf("tag kept as %v", header(m, "X-Capture-Tag"))
	}
}
