package emailapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capturedev/capture/server/admission"
	"github.com/capturedev/capture/server/emailapi"
	"github.com/capturedev/capture/server/servertest"
	"github.com/capturedev/capture/store"
)

// env is the email API listener on a free loopback port over a real store
// in a temporary directory, with the bootstrapped inbox to send into.
type env struct {
	t    *testing.T
	st   *store.Store
	boot store.Bootstrap
	base string
}

func newEnv(t *testing.T) *env { return newEnvWith(t, emailapi.Config{}) }

func newEnvWith(t *testing.T, cfg emailapi.Config) *env {
	t.Helper()
	st, boot := servertest.Open(t, "free")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := emailapi.NewServer(emailapi.New(st, cfg))
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return &env{t: t, st: st, boot: boot, base: "http://" + l.Addr().String()}
}

func (e *env) password() string { return e.boot.Inbox.SMTPPassword }

type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body; a body that is not JSON fails the test.
func (r response) json(t *testing.T) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("%d response is not JSON: %v\n%s", r.status, err, r.body)
	}
	return v
}

func (e *env) post(path string, header map[string]string, body []byte) response {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.base+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return do(e.t, req)
}

func do(t *testing.T, req *http.Request) response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

// messages returns every message of the inbox, oldest first.
func (e *env) messages() []store.Message {
	e.t.Helper()
	list, err := e.st.Messages(e.t.Context(), e.boot.Inbox.ID, store.MessageFilter{}, store.Page{Limit: 100})
	if err != nil {
		e.t.Fatal(err)
	}
	out := make([]store.Message, len(list.Items))
	for i, s := range list.Items {
		m, err := e.st.Message(e.t.Context(), e.boot.Project.ID, s.ID)
		if err != nil {
			e.t.Fatal(err)
		}
		out[len(out)-1-i] = m
	}
	return out
}

// allMessages returns every message of the inbox, oldest first, however
// many pages they take.
func (e *env) allMessages() []store.Message {
	e.t.Helper()
	var out []store.Message
	page := store.Page{Limit: 100}
	for {
		list, err := e.st.Messages(e.t.Context(), e.boot.Inbox.ID, store.MessageFilter{}, page)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, s := range list.Items {
			m, err := e.st.Message(e.t.Context(), e.boot.Project.ID, s.ID)
			if err != nil {
				e.t.Fatal(err)
			}
			out = append(out, m)
		}
		if list.Next == "" {
			break
		}
		page.Before = list.Next
	}
	slices.Reverse(out)
	return out
}

func (e *env) only() store.Message {
	e.t.Helper()
	ms := e.messages()
	if len(ms) != 1 {
		e.t.Fatalf("inbox holds %d messages, want 1", len(ms))
	}
	return ms[0]
}

func (e *env) attachment(m store.Message, i int) []byte {
	e.t.Helper()
	_, data, err := e.st.AttachmentData(e.t.Context(), e.boot.Project.ID, m.ID, m.Attachments[i].ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return data
}

func header(m store.Message, name string) []string {
	for _, h := range m.Headers {
		if strings.EqualFold(h.Name, name) {
			return h.Values
		}
	}
	return nil
}

func addresses(as []store.Address) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Address
	}
	return out
}

// wantJSON compares a response to a status and a JSON body exactly.
func wantJSON(t *testing.T, r response, status int, body string) {
	t.Helper()
	var want any
	if err := json.Unmarshal([]byte(body), &want); err != nil {
		t.Fatalf("bad expectation %s: %v", body, err)
	}
	if r.status != status || !reflect.DeepEqual(r.json(t), want) {
		t.Errorf("got %d %s\nwant %d %s", r.status, r.body, status, body)
	}
}

// wantField checks that a refusal names the field at fault.
func wantField(t *testing.T, r response, status int, field string) {
	t.Helper()
	if r.status != status || !bytes.Contains(r.body, []byte(field)) {
		t.Errorf("got %d %s, want %d naming %q", r.status, r.body, status, field)
	}
}

// TestRotationTakesEffectAtOnce rotates the inbox's password: the old one
// is refused by the very next request, the new one accepted.
func TestRotationTakesEffectAtOnce(t *testing.T) {
	e := newEnv(t)
	old := e.password()
	body := []byte(`{"from":"a@example.com","to":"b@example.com","subject":"s","text":"t"}`)
	if r := e.post("/emails", map[string]string{"Authorization": "Bearer " + old}, body); r.status != 200 {
		t.Fatalf("before rotation: %d %s", r.status, r.body)
	}
	rotated, err := e.st.RotateInboxPassword(t.Context(), e.boot.Inbox.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r := e.post("/emails", map[string]string{"Authorization": "Bearer " + old}, body); r.status != 403 {
		t.Errorf("old password after rotation: %d %s", r.status, r.body)
	}
	if r := e.post("/emails", map[string]string{"Authorization": "Bearer " + rotated.SMTPPassword}, body); r.status != 200 {
		t.Errorf("new password after rotation: %d %s", r.status, r.body)
	}
}

// TestAnotherInbox sends with a second inbox's password: the message lands
// there, not in the first.
func TestAnotherInbox(t *testing.T) {
	e := newEnv(t)
	other, err := e.st.CreateInbox(t.Context(), e.boot.Project.ID, "other")
	if err != nil {
		t.Fatal(err)
	}
	r := e.post("/emails", map[string]string{"Authorization": "Bearer " + other.SMTPPassword},
		[]byte(`{"from":"a@example.com","to":"b@example.com","subject":"to other","text":"t"}`))
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if n := len(e.messages()); n != 0 {
		t.Errorf("first inbox got %d messages", n)
	}
	list, _ := e.st.Messages(t.Context(), other.ID, store.MessageFilter{}, store.Page{})
	if len(list.Items) != 1 || list.Items[0].Subject != "to other" {
		t.Errorf("other inbox: %+v", list.Items)
	}
}

// TestUnavailable closes the store under the listener: every provider
// answers 503 in its own shape with Retry-After, never a success.
func TestUnavailable(t *testing.T) {
	e := newEnv(t)
	reqs := sampleRequests(e)
	e.st.Close()
	for _, req := range reqs {
		t.Run(req.name, func(t *testing.T) {
			r := do(t, req.build())
			if r.status != 503 || r.header.Get("Retry-After") == "" {
				t.Errorf("got %d (Retry-After %q) %s", r.status, r.header.Get("Retry-After"), r.body)
			}
			if !bytes.Contains(r.body, []byte(req.errorKey)) {
				t.Errorf("503 body %s is not in the provider's shape (no %q)", r.body, req.errorKey)
			}
		})
	}
}

// TestOversizeBody declares a body longer than any message of the plan
// can need (a batch's: than its messages may total): each provider
// refuses it in its own shape before reading it.
func TestOversizeBody(t *testing.T) {
	e := newEnv(t)
	for _, req := range sampleRequests(e) {
		t.Run(req.name, func(t *testing.T) {
			hr := req.build()
			size, want := int64(16<<20), "10485760-byte limit of the free plan" // over 10 MiB × 4/3 + 1 MiB
			if req.batch {
				size, want = 30<<20, "the batch exceeds the 20971520-byte total of a batch on the free plan" // over 2 × 10 MiB × 4/3 + 1 MiB
			}
			if req.form {
				// over 3 × 10 MiB + 1 MiB, refused as SES v1 refuses a message
				size, want = 32<<20, "<Code>MessageRejected</Code><Message>the request body exceeds 32505856 bytes, "+
					"more than a message within the 10485760-byte limit of the free plan can need"
			}
			if req.array {
				// over 4 × 10 MiB + 1 MiB: resend-go sends an attachment's
				// bytes as numbers, up to "255," each
				size, want = 42<<20, "the request body exceeds 42991616 bytes, "+
					"more than a message within the 10485760-byte limit of the free plan can need"
			}
			hr.Body = io.NopCloser(io.LimitReader(zeros{}, size))
			hr.ContentLength = size
			r := do(t, hr)
			if r.status != req.tooLargeStatus || !bytes.Contains(r.body, []byte(want)) || !bytes.Contains(r.body, []byte(req.errorKey)) {
				t.Errorf("got %d %s", r.status, r.body)
			}
		})
	}
	if n := len(e.messages()); n != 0 {
		t.Errorf("%d messages stored", n)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestOversizeMessage sends a body the listener reads whose message is
// over the plan's limit once composed.
func TestOversizeMessage(t *testing.T) {
	e := newEnv(t)
	big := strings.Repeat("A", 10<<20)
	r := e.post("/v3/mail/send", map[string]string{"Authorization": "Bearer " + e.password()},
		[]byte(`{"personalizations":[{"to":[{"email":"b@example.com"}]}],"from":{"email":"a@example.com"},"subject":"s",`+
			`"content":[{"type":"text/plain","value":"x"}],"attachments":[{"content":"`+big+`","filename":"big.bin"}]}`))
	wantJSON(t, r, 413, `{"errors":[{"message":"message exceeds the 10485760-byte limit of the free plan","field":null,"help":null}]}`)
	if n := len(e.messages()); n != 0 {
		t.Errorf("%d messages stored", n)
	}
}

// sample is one valid request per provider route.
type sample struct {
	name           string
	build          func() *http.Request
	errorKey       string // a key every error body of the provider has
	tooLargeStatus int
	batch          bool // the body holds a batch of messages
	form           bool // the body is an SES v1 form, allowed three times a message's size
	array          bool // attachments may be arrays of byte values, allowed four times a message's size
}

func sampleRequests(e *env) []sample {
	pw := e.password()
	req := func(path string, header map[string]string, body string) func() *http.Request {
		return func() *http.Request {
			r, _ := http.NewRequest("POST", e.base+path, strings.NewReader(body))
			for k, v := range header {
				r.Header.Set(k, v)
			}
			return r
		}
	}
	return []sample{
		{"sendgrid", req("/v3/mail/send", map[string]string{"Authorization": "Bearer " + pw},
			`{"personalizations":[{"to":[{"email":"b@example.com"}]}],"from":{"email":"a@example.com"},"subject":"s","content":[{"type":"text/plain","value":"t"}]}`),
			`"errors"`, 413, false, false, false},
		{"postmark", req("/email", map[string]string{"X-Postmark-Server-Token": pw},
			`{"From":"a@example.com","To":"b@example.com","Subject":"s","TextBody":"t"}`), `"ErrorCode"`, 413, false, false, false},
		{"postmark batch", req("/email/batch", map[string]string{"X-Postmark-Server-Token": pw},
			`[{"From":"a@example.com","To":"b@example.com","Subject":"s","TextBody":"t"}]`), `"ErrorCode"`, 413, true, false, false},
		{"mailgun", func() *http.Request {
			r := req("/v3/mg.example.com/messages", map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
				"from=a%40example.com&to=b%40example.com&subject=s&text=t")()
			r.SetBasicAuth("api", pw)
			return r
		}, `"message"`, 413, false, false, false},
		{"ses", func() *http.Request {
			return signedSES(e, pw, `{"FromEmailAddress":"a@example.com","Destination":{"ToAddresses":["b@example.com"]},`+
				`"Content":{"Simple":{"Subject":{"Data":"s"},"Body":{"Text":{"Data":"t"}}}}}`, time.Now())
		}, `"message"`, 400, false, false, false},
		{"ses v1", func() *http.Request {
			return signedSESv1(e, pw, url.Values{"Action": {"SendEmail"}, "Source": {"a@example.com"},
				"Destination.ToAddresses.member.1": {"b@example.com"}, "Message.Subject.Data": {"s"}, "Message.Body.Text.Data": {"t"}})
		}, `<ErrorResponse xmlns="http://ses.amazonaws.com/doc/2010-12-01/">`, 400, false, true, false},
		{"resend", req("/emails", map[string]string{"Authorization": "Bearer " + pw},
			`{"from":"a@example.com","to":"b@example.com","subject":"s","text":"t"}`), `"statusCode"`, 413, false, false, true},
	}
}

func TestSampleRequestsSucceed(t *testing.T) {
	e := newEnv(t)
	for _, req := range sampleRequests(e) {
		if r := do(t, req.build()); r.status/100 != 2 {
			t.Errorf("%s: %d %s", req.name, r.status, r.body)
		}
	}
	ms := e.messages()
	var providers []string
	for _, m := range ms {
		providers = append(providers, header(m, "X-Capture-Provider")...)
		if m.Subject != "s" || m.Text == nil || *m.Text != "t" || !slices.Equal(m.EnvelopeTo, []string{"b@example.com"}) {
			t.Errorf("%v: subject %q text %v envelope %v", header(m, "X-Capture-Provider"), m.Subject, m.Text, m.EnvelopeTo)
		}
	}
	want := []string{"sendgrid", "postmark", "postmark", "mailgun", "ses", "ses", "resend"}
	if !slices.Equal(providers, want) {
		t.Errorf("providers %v, want %v", providers, want)
	}
}

// TestShuttingDown serves requests whose context has ended, as during
// serve's shutdown: they are refused with 503 and nothing is stored.
func TestShuttingDown(t *testing.T) {
	st, boot := servertest.Open(t, "free")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	srv := emailapi.NewServer(emailapi.New(st, emailapi.Config{}))
	srv.BaseContext = func(net.Listener) context.Context { return ended }
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	e := &env{t: t, st: st, boot: boot, base: "http://" + l.Addr().String()}
	for _, req := range sampleRequests(e) {
		r := do(t, req.build())
		if r.status != 503 || r.header.Get("Retry-After") == "" || !bytes.Contains(r.body, []byte(req.errorKey)) {
			t.Errorf("%s: got %d %s", req.name, r.status, r.body)
		}
	}
	if n := len(e.messages()); n != 0 {
		t.Errorf("%d messages stored while shutting down", n)
	}
}

// TestSharedBudget holds the whole ingest budget, as concurrent webhooks
// and SMTP messages would: a send waits for room, is refused with 503 and
// Retry-After when none comes, stores nothing, and goes through once the
// budget has room again.
func TestSharedBudget(t *testing.T) {
	budget := admission.New(64 << 10)
	e := newEnvWith(t, emailapi.Config{Budget: budget, AdmissionWait: 100 * time.Millisecond})
	held, err := budget.Reserve(context.Background(), 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range sampleRequests(e) {
		r := do(t, req.build())
		if r.status != 503 || r.header.Get("Retry-After") == "" || !bytes.Contains(r.body, []byte(req.errorKey)) {
			t.Errorf("%s with the budget spent: got %d %s, want 503 with Retry-After in the provider's shape", req.name, r.status, r.body)
		}
	}
	if n := len(e.messages()); n != 0 {
		t.Fatalf("%d messages stored while the budget was spent", n)
	}
	held.Release()
	for _, req := range sampleRequests(e) {
		if r := do(t, req.build()); r.status/100 != 2 {
			t.Errorf("%s with room again: got %d %s", req.name, r.status, r.body)
		}
	}
	if n := len(e.messages()); n == 0 {
		t.Error("nothing stored once the budget had room")
	}
}

// TestBatchExpansionIsBounded sends one attachment to many
// personalizations: written once per recipient, the messages would total
// far more than the request, and the request is refused whole.
func TestBatchExpansionIsBounded(t *testing.T) {
	e := newEnv(t)
	var ps []string
	for i := range 30 {
		ps = append(ps, fmt.Sprintf(`{"to":[{"email":"r%d@example.com"}]}`, i))
	}
	attachment := base64.StdEncoding.EncodeToString(make([]byte, 1<<20))
	r := e.post("/v3/mail/send", map[string]string{"Authorization": "Bearer " + e.password()},
		[]byte(`{"personalizations":[`+strings.Join(ps, ",")+`],"from":{"email":"a@example.com"},"subject":"s",`+
			`"content":[{"type":"text/plain","value":"x"}],"attachments":[{"content":"`+attachment+`","filename":"a.bin"}]}`))
	if r.status != 413 || !strings.Contains(string(r.body), "twice the message limit of the free plan") {
		t.Errorf("got %d %s", r.status, r.body)
	}
	if n := len(e.messages()); n != 0 {
		t.Errorf("%d messages stored", n)
	}
}

// Every refusal is counted by the read API's code, as SMTP's are: a whole
// request's, and a message's refused alone within a permissive batch.
func TestRefusalsAreCounted(t *testing.T) {
	var mu sync.Mutex
	var codes []string
	e := newEnvWith(t, emailapi.Config{Refused: func(code string) {
		mu.Lock()
		defer mu.Unlock()
		codes = append(codes, code)
	}})
	one := []byte(`{"from":"a@example.com","to":"b@example.com","subject":"s","text":"t"}`)
	if r := e.post("/emails", map[string]string{"Authorization": "Bearer wrong"}, one); r.status < 400 {
		t.Fatalf("a wrong key: %d", r.status)
	}
	huge := []byte(`{"from":"a@example.com","to":"b@example.com","subject":"s","text":"` + strings.Repeat("x", 11<<20) + `"}`)
	if r := e.post("/emails", map[string]string{"Authorization": "Bearer " + e.password()}, huge); r.status != 413 {
		t.Fatalf("an oversize message: %d", r.status)
	}
	batch := []byte(`[{"from":"a@example.com","to":"b@example.com","subject":"ok","text":"t"},{"to":"b@example.com","subject":"no sender"}]`)
	if r := e.post("/emails/batch", map[string]string{"Authorization": "Bearer " + e.password(),
		"x-batch-validation": "permissive"}, batch); r.status != 200 {
		t.Fatalf("a permissive batch: %d %s", r.status, r.body)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"unauthorized", "quota_exceeded", "invalid_parameter"}; !slices.Equal(codes, want) {
		t.Errorf("counted %q, want %q", codes, want)
	}
}

// TestBatchBodies sends Postmark and Resend batches whose messages are
// each well within the plan's limit but together larger than one message
// may be: they are stored. A message over the limit is refused alone, and
// a batch over what a request's messages may total is refused whole,
// saying so, in the provider's shape.
func TestBatchBodies(t *testing.T) {
	e := newEnv(t)
	pm := map[string]string{"X-Postmark-Server-Token": e.password()}
	rs := map[string]string{"Authorization": "Bearer " + e.password()}
	pmMessage := func(i, attachmentBytes int) string {
		return fmt.Sprintf(`{"From":"a@example.com","To":"b%d@example.com","Subject":"m%d","TextBody":"t",`+
			`"Attachments":[{"Name":"a.bin","ContentType":"application/octet-stream","Content":"%s"}]}`,
			i, i, base64.StdEncoding.EncodeToString(make([]byte, attachmentBytes)))
	}
	batch := func(items []string) []byte { return []byte("[" + strings.Join(items, ",") + "]") }

	// Five messages of 3 MiB each, 15 MiB in all: over one message's
	// limit together, within twice it.
	var five []string
	for i := range 5 {
		five = append(five, pmMessage(i, 3<<20*3/4))
	}
	r := e.post("/email/batch", pm, batch(five))
	if results, _ := r.json(t).([]any); r.status != 200 || len(results) != 5 {
		t.Fatalf("Postmark batch of five 3 MiB messages: %d %.300s", r.status, r.body)
	}
	if n := len(e.messages()); n != 5 {
		t.Errorf("Postmark batch stored %d messages, want 5", n)
	}
	var texts []string
	for i := range 5 {
		texts = append(texts, fmt.Sprintf(`{"from":"a@example.com","to":"b%d@example.com","subject":"m%d","text":"%s"}`,
			i, i, strings.Repeat("x", 3<<20*9/10)))
	}
	r = e.post("/emails/batch", rs, batch(texts))
	if data, _ := r.json(t).(map[string]any)["data"].([]any); r.status != 200 || len(data) != 5 {
		t.Fatalf("Resend batch of five 3 MiB emails: %d %.300s", r.status, r.body)
	}
	if n := len(e.messages()); n != 10 {
		t.Errorf("the batches stored %d messages, want 10", n)
	}

	// One message over the limit gets its own error; the other is stored.
	r = e.post("/email/batch", pm, batch([]string{pmMessage(0, 11<<20), pmMessage(1, 10)}))
	results, _ := r.json(t).([]any)
	if r.status != 200 || len(results) != 2 {
		t.Fatalf("Postmark batch with an oversize message: %d %.300s", r.status, r.body)
	}
	if first := results[0].(map[string]any); first["ErrorCode"] != 300.0 ||
		first["Message"] != "message exceeds the 10485760-byte limit of the free plan" {
		t.Errorf("oversize message answered %v", first)
	}
	if second := results[1].(map[string]any); second["ErrorCode"] != 0.0 {
		t.Errorf("the message beside it answered %v", second)
	}
	if n := len(e.messages()); n != 11 {
		t.Errorf("%d messages, want 11", n)
	}
	// Resend, strict: the batch is refused, naming the email.
	huge := fmt.Sprintf(`{"from":"a@example.com","to":"b@example.com","subject":"huge","text":"%s"}`, strings.Repeat("x", 11<<20))
	r = e.post("/emails/batch", rs, batch([]string{texts[0], huge}))
	wantJSON(t, r, 413, `{"statusCode":413,"name":"validation_error","message":"emails[1]: message exceeds the 10485760-byte limit of the free plan"}`)

	// Over the total: the body is refused whole, naming the batch total.
	var big []string
	for i := range 4 {
		big = append(big, pmMessage(i, 7<<20))
	}
	r = e.post("/email/batch", pm, batch(big))
	wantJSON(t, r, 413, `{"ErrorCode":300,"Message":"the batch exceeds the 20971520-byte total of a batch on the free plan `+
		`(twice its 10485760-byte message limit, attachments counted in base64); send it as smaller batches"}`)
	big = big[:0]
	for i := range 4 {
		big = append(big, fmt.Sprintf(`{"from":"a@example.com","to":"b%d@example.com","subject":"m","text":"%s"}`, i, strings.Repeat("x", 7<<20)))
	}
	r = e.post("/emails/batch", rs, batch(big))
	if r.status != 413 || !strings.Contains(string(r.body), "the batch exceeds the 20971520-byte total") {
		t.Errorf("Resend batch over the total: %d %.300s", r.status, r.body)
	}
	if n := len(e.messages()); n != 11 {
		t.Errorf("refused batches stored %d messages", n-11)
	}
}

// TestPostmarkBatchTotal sends Postmark batches within the body limit
// whose messages, each within the message limit, total more than twice
// it: the message past the total is refused alone, with its own
// ErrorCode 300, and the others are stored. A message over the message
// limit spends nothing of the total, so the two after it still fit.
func TestPostmarkBatchTotal(t *testing.T) {
	e := newEnv(t)
	pm := map[string]string{"X-Postmark-Server-Token": e.password()}
	message := func(i, size int) string {
		return fmt.Sprintf(`{"From":"a@example.com","To":"b%d@example.com","Subject":"m%d","TextBody":"%s"}`,
			i, i, strings.Repeat("x", size))
	}
	send := func(items ...string) []map[string]any {
		t.Helper()
		r := e.post("/email/batch", pm, []byte("["+strings.Join(items, ",")+"]"))
		results, _ := r.json(t).([]any)
		if r.status != 200 || len(results) != len(items) {
			t.Fatalf("batch of %d: %d %.300s", len(items), r.status, r.body)
		}
		out := make([]map[string]any, len(results))
		for i, v := range results {
			out[i], _ = v.(map[string]any)
		}
		return out
	}
	const overTotal = "the messages of this request total more than 20971520 bytes, twice the message limit of the free plan; " +
		"send fewer or smaller messages per request"

	// Three of 7 MiB: 21 MiB in all, over the 20 MiB total; the body,
	// under 2 × 10 MiB × 4/3 + 1 MiB, is read.
	results := send(message(0, 7<<20), message(1, 7<<20), message(2, 7<<20))
	if results[0]["ErrorCode"] != 0.0 || results[1]["ErrorCode"] != 0.0 {
		t.Errorf("the first two answered %v, %v", results[0], results[1])
	}
	if third := results[2]; third["ErrorCode"] != 300.0 || third["Message"] != overTotal || third["MessageID"] != nil {
		t.Errorf("the message past the total answered %v", third)
	}
	ms := e.messages()
	if len(ms) != 2 || ms[0].Subject != "m0" || ms[1].Subject != "m1" {
		t.Fatalf("stored %d messages, want m0 and m1", len(ms))
	}

	// One of 11 MiB, over the message limit, then two of 7 MiB: the first
	// is refused for its own size and spends nothing; the others fit.
	results = send(message(3, 11<<20), message(4, 7<<20), message(5, 7<<20))
	if first := results[0]; first["ErrorCode"] != 300.0 || first["Message"] != "message exceeds the 10485760-byte limit of the free plan" {
		t.Errorf("the oversize message answered %v", first)
	}
	if results[1]["ErrorCode"] != 0.0 || results[2]["ErrorCode"] != 0.0 {
		t.Errorf("the two after it answered %v, %v", results[1], results[2])
	}
	if ms := e.messages(); len(ms) != 4 || ms[2].Subject != "m4" || ms[3].Subject != "m5" {
		t.Errorf("stored %d messages, want m4 and m5 after the first two", len(ms))
	}
}

// TestFanOutWaitsForRoom sends a small SendGrid request that expands to a
// message per personalization while most of a small ingest budget is
// held: its body is admitted, the messages it writes are not, and it is
// refused whole with 503 and Retry-After, storing nothing. With room
// again it goes through.
func TestFanOutWaitsForRoom(t *testing.T) {
	budget := admission.New(1 << 20)
	e := newEnvWith(t, emailapi.Config{Budget: budget, AdmissionWait: 100 * time.Millisecond})
	held, err := budget.Reserve(context.Background(), 600<<10)
	if err != nil {
		t.Fatal(err)
	}
	var ps []string
	for i := range 30 {
		ps = append(ps, fmt.Sprintf(`{"to":[{"email":"r%d@example.com"}]}`, i))
	}
	body := []byte(`{"personalizations":[` + strings.Join(ps, ",") + `],"from":{"email":"a@example.com"},"subject":"s",` +
		`"content":[{"type":"text/plain","value":"x"}],"attachments":[{"content":"` +
		base64.StdEncoding.EncodeToString(make([]byte, 16<<10)) + `","filename":"a.bin"}]}`)
	if 4*len(body) > 400<<10 {
		t.Fatalf("the body (%d bytes) does not fit beside what is held", len(body))
	}
	auth := map[string]string{"Authorization": "Bearer " + e.password()}
	r := e.post("/v3/mail/send", auth, body)
	if r.status != 503 || r.header.Get("Retry-After") == "" || !bytes.Contains(r.body, []byte(`"errors"`)) {
		t.Errorf("fan-out with little room: got %d %s, want 503 with Retry-After", r.status, r.body)
	}
	if n := len(e.messages()); n != 0 {
		t.Fatalf("%d messages stored without room", n)
	}
	held.Release()
	if r := e.post("/v3/mail/send", auth, body); r.status != 202 {
		t.Errorf("fan-out with room: got %d %s", r.status, r.body)
	}
	if n := len(e.messages()); n != 30 {
		t.Errorf("%d messages stored, want 30", n)
	}
}
