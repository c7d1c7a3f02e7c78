package emailapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sdkPackages are the providers' official SDKs the scripts in testdata/sdk
// send with, pinned by its package-lock.json.
var sdkPackages = []string{"@sendgrid/mail", "postmark", "mailgun.js", "form-data", "@aws-sdk/client-sesv2", "@aws-sdk/client-ses", "resend"}

// TestProviderSDKs sends a message through each provider's official SDK,
// configured only by its documented base URL or endpoint option, to the
// real capture binary, and reads it back through the read API: subject,
// sender, recipients, envelope (Bcc included), bodies and attachment bytes
// must be exactly what the application sent. Each SDK must also report a
// wrong key as it reports the provider's own refusal.
func TestProviderSDKs(t *testing.T) {
	sdkDir, err := filepath.Abs(filepath.Join("testdata", "sdk"))
	if err != nil {
		t.Fatal(err)
	}
	node := needNode(t, sdkDir)
	for _, pkg := range sdkPackages {
		t.Logf("%s %s", pkg, sdkVersion(t, sdkDir, pkg))
	}
	srv := startCapture(t)

	attachment := make([]byte, 3000)
	for i := range attachment {
		attachment[i] = byte(i * 7)
	}
	want := sdkMessage{
		FromName: "Ünïcode App", From: "app@example.com",
		To: []string{"alice@example.com", "bob@example.com"}, Cc: []string{"carol@example.com"}, Bcc: []string{"dave@example.com"},
		Subject: "Your code is 834 221 ✓",
		Text:    "Hi Alice,\nyour code is 834221.\n",
		HTML:    `<p>Hi Alice,</p><p>your code is <b>834221</b>. <a href="https://app.example/verify?t=abc">Verify</a></p>`,
	}
	want.Attachment.Filename, want.Attachment.ContentType = "report ü.bin", "application/octet-stream"
	want.Attachment.Base64 = base64.StdEncoding.EncodeToString(attachment)
	want.BaseURL, want.Host = srv.emailAPI, strings.TrimPrefix(srv.emailAPI, "http://")
	want.Inbox, want.Password = srv.inbox, srv.password

	for _, c := range []struct {
		provider string
		wrongKey map[string]any
	}{
		{"sendgrid", map[string]any{"status": 401.0, "message": "The provided authorization grant is invalid, expired, or revoked"}},
		{"postmark", map[string]any{"class": "InvalidAPIKeyError", "status": 401.0, "code": 10.0}},
		{"mailgun", map[string]any{"status": 401.0, "details": "Forbidden"}},
		{"ses", map[string]any{"name": "InvalidSignatureException", "status": 403.0}},
		{"resend", map[string]any{"name": "invalid_api_key", "status": 403.0}},
	} {
		t.Run(c.provider, func(t *testing.T) {
			result := runScript(t, node, sdkDir, c.provider, want)
			id := strings.TrimPrefix(strings.TrimSuffix(result["id"].(string), "@mg.example.com>"), "<")
			m := srv.message(t, id)
			checkSDKMessage(t, srv, m, want, attachment)
			if h := m.Headers["X-Capture-Provider"]; !slices.Equal(h, []string{c.provider}) {
				t.Errorf("X-Capture-Provider %q", h)
			}
			wrong, _ := result["wrong_key"].(map[string]any)
			for k, v := range c.wrongKey {
				if wrong[k] != v {
					t.Errorf("wrong key reported as %v, want %s = %v", result["wrong_key"], k, v)
				}
			}
			sdkRoutes[c.provider](t, srv, m, result, want)
		})
	}
}

// TestSESv1SDK sends through the Amazon SES v1 SDK (@aws-sdk/client-ses,
// the Query API): SendEmail and SendRawEmail are stored as their v2
// counterparts are, a wrong key is reported as AWS reports it, and an
// action capture does not serve is refused in the XML the SDK reads.
func TestSESv1SDK(t *testing.T) {
	sdkDir, err := filepath.Abs(filepath.Join("testdata", "sdk"))
	if err != nil {
		t.Fatal(err)
	}
	node := needNode(t, sdkDir)
	t.Logf("@aws-sdk/client-ses %s", sdkVersion(t, sdkDir, "@aws-sdk/client-ses"))
	srv := startCapture(t)
	want := sdkMessage{FromName: "Ünïcode App", From: "app@example.com",
		To: []string{"alice@example.com", "bob@example.com"}, Cc: []string{"carol@example.com"}, Bcc: []string{"dave@example.com"},
		Subject: "Your code is 834 221 ✓", Text: "Hi Alice,\nyour code is 834221.\n", HTML: `<p>Your code is <b>834221</b>.</p>`}
	want.BaseURL, want.Host = srv.emailAPI, strings.TrimPrefix(srv.emailAPI, "http://")
	want.Inbox, want.Password = srv.inbox, srv.password
	result := runScript(t, node, sdkDir, "sesv1", want)

	m := srv.message(t, result["id"].(string))
	if m.Subject != want.Subject || m.From.Name != want.FromName || m.From.Address != want.From ||
		m.Body.Text == nil || *m.Body.Text != want.Text || m.Body.HTML == nil || *m.Body.HTML != want.HTML ||
		!slices.Equal(m.Envelope.To, slices.Concat(want.To, want.Cc, want.Bcc)) ||
		!slices.Equal(m.Headers["X-Capture-Provider"], []string{"ses"}) || !slices.Equal(m.Headers["X-Capture-Tag"], []string{"flow=signup"}) {
		t.Errorf("SendEmail: subject %q from %+v text %v html %v envelope %v headers %v",
			m.Subject, m.From, m.Body.Text, m.Body.HTML, m.Envelope.To, m.Headers)
	}
	raw := srv.message(t, result["raw_id"].(string))
	if raw.Subject != want.Subject+" (raw)" || raw.Body.Text == nil || *raw.Body.Text != want.Text ||
		!slices.Equal(raw.Envelope.To, slices.Concat(want.To, want.Bcc)) || raw.MessageID == "" {
		t.Errorf("SendRawEmail: subject %q text %v envelope %v Message-ID %q", raw.Subject, raw.Body.Text, raw.Envelope.To, raw.MessageID)
	}
	if wrong, _ := result["wrong_key"].(map[string]any); wrong["name"] != "SignatureDoesNotMatch" || wrong["status"] != 403.0 {
		t.Errorf("wrong key reported as %v", result["wrong_key"])
	}
	other, _ := result["other_action"].(map[string]any)
	if other["name"] != "InvalidAction" || other["status"] != 400.0 ||
		!strings.Contains(fmt.Sprint(other["message"]), "SendEmail and SendRawEmail") {
		t.Errorf("another action reported as %v", result["other_action"])
	}
}

// sdkRoutes checks, for each provider, what its script sent through the
// provider's other send routes: batches, templates, MIME and Raw mail.
var sdkRoutes = map[string]func(t *testing.T, srv *captureProcess, m readMessage, result map[string]any, want sdkMessage){
	"sendgrid": func(t *testing.T, srv *captureProcess, _ readMessage, result map[string]any, want sdkMessage) {
		// 1,000 personalizations: one X-Message-Id, the first message's,
		// and every message of the send names it.
		many, _ := result["many"].(map[string]any)
		id, _ := many["id"].(string)
		if many["status"] != 202.0 || !strings.HasPrefix(id, "msg_") || strings.Contains(id, ",") {
			t.Fatalf("1,000 personalizations answered %v", result["many"])
		}
		first := srv.message(t, id)
		if first.Envelope.To[0] != "user0@example.com" {
			t.Errorf("X-Message-Id %s names the message to %v", id, first.Envelope.To)
		}
		// Every message is stored; a sample of them is read (the free
		// plan's rate limit would slow reading all), since the unit test
		// reads every one.
		var sent []string
		for _, item := range srv.list(t, "/inboxes/"+srv.inbox+"/messages", 1100) {
			if item.Subject == "Many" {
				sent = append(sent, item.ID)
			}
		}
		if len(sent) != 1000 || sent[len(sent)-1] != id {
			t.Fatalf("%d messages of the 1,000-personalization send stored", len(sent))
		}
		for i := 0; i < len(sent); i += 97 {
			if m := srv.message(t, sent[i]); !slices.Equal(m.Headers["X-Capture-Send-Id"], []string{id}) {
				t.Fatalf("message %s of the send has X-Capture-Send-Id %v, want %s", m.ID, m.Headers["X-Capture-Send-Id"], id)
			}
		}
		m := srv.message(t, result["substituted_id"].(string))
		if m.Subject != "Code for Alice" || m.Body.Text == nil || *m.Body.Text != "Hi Alice, your code is 834221." ||
			!slices.Equal(m.Headers["X-Capture-Substitutions"], []string{`{"-code-":"834221","-name-":"Alice"}`}) {
			t.Errorf("substitutions: subject %q text %v headers %v", m.Subject, m.Body.Text, m.Headers)
		}
		typed := srv.message(t, result["typed_id"].(string))
		if typed.Body.Text == nil || *typed.Body.Text != want.Text || typed.Body.HTML == nil || *typed.Body.HTML != want.HTML {
			t.Errorf("content types with parameters: text %v html %v", typed.Body.Text, typed.Body.HTML)
		}
		for _, a := range typed.Attachments {
			if a.ContentType == "application/octet-stream" {
				t.Errorf("a content block became an attachment: %+v", a)
			}
		}
	},
	"postmark": func(t *testing.T, srv *captureProcess, _ readMessage, result map[string]any, want sdkMessage) {
		m := srv.message(t, result["template_id"].(string))
		checkTemplate(t, m, "postmark", "welcome", `{"name":"Alice","code":834221}`, want.To[:1])
		batch, _ := result["batch_template"].([]any)
		if len(batch) != len(want.To) {
			t.Fatalf("batch with templates answered %v", result["batch_template"])
		}
		for i, r := range batch {
			r := r.(map[string]any)
			if r["code"] != 0.0 {
				t.Errorf("batch with templates, message %d: %v", i, r)
				continue
			}
			m := srv.message(t, r["id"].(string))
			checkTemplate(t, m, "postmark", fmt.Sprint(1000+i), fmt.Sprintf(`{"n":%d}`, i), want.To[i:i+1])
		}
	},
	"mailgun": func(t *testing.T, srv *captureProcess, m readMessage, result map[string]any, want sdkMessage) {
		// Mailgun's id is the Message-Id of the mail it sends.
		if id := result["id"].(string); "<"+m.MessageID+">" != id {
			t.Errorf("Mailgun answered id %s for the message whose Message-Id is <%s>", id, m.MessageID)
		}
		mimeID := result["mime_id"].(string)
		mime := srv.message(t, strings.TrimPrefix(strings.TrimSuffix(mimeID, "@mg.example.com>"), "<"))
		if mime.Subject != want.Subject+" (mime)" || mime.Body.Text == nil || *mime.Body.Text != want.Text ||
			"<"+mime.MessageID+">" != mimeID || mime.Envelope.From != want.From ||
			!slices.Equal(mime.Envelope.To, slices.Concat(want.To, want.Bcc)) ||
			!slices.Equal(mime.Headers["X-Capture-Tag"], []string{"mime"}) {
			t.Errorf("MIME message: subject %q text %v Message-Id %q envelope %+v headers %v",
				mime.Subject, mime.Body.Text, mime.MessageID, mime.Envelope, mime.Headers)
		}
	},
	"ses": func(t *testing.T, srv *captureProcess, _ readMessage, result map[string]any, want sdkMessage) {
		raw := srv.message(t, result["raw_id"].(string))
		if raw.Subject != want.Subject+" (raw)" || raw.Body.Text == nil || *raw.Body.Text != want.Text ||
			!slices.Equal(raw.Envelope.To, slices.Concat(want.To, want.Cc, want.Bcc)) || raw.MessageID == "" {
			t.Errorf("raw message: subject %q text %v envelope %v Message-ID %q", raw.Subject, raw.Body.Text, raw.Envelope.To, raw.MessageID)
		}
		bulk, _ := result["bulk"].([]any)
		if len(bulk) != len(want.To) {
			t.Fatalf("bulk answered %v", result["bulk"])
		}
		for i, r := range bulk {
			r := r.(map[string]any)
			if r["status"] != "SUCCESS" {
				t.Errorf("bulk entry %d: %v", i, r)
				continue
			}
			data := `{"name":"friend"}`
			if i == 0 {
				data = `{"name":"Alice"}`
			}
			checkTemplate(t, srv.message(t, r["id"].(string)), "ses", "welcome", data, want.To[i:i+1])
		}
	},
	"resend": func(t *testing.T, srv *captureProcess, _ readMessage, result map[string]any, want sdkMessage) {
		ids, _ := result["batch_ids"].([]any)
		if len(ids) != len(want.To) {
			t.Fatalf("batch answered %v", result["batch_ids"])
		}
		for i, id := range ids {
			m := srv.message(t, id.(string))
			if m.Subject != fmt.Sprintf("%s (batch %d)", want.Subject, i) || m.Body.Text == nil || *m.Body.Text != want.Text ||
				!slices.Equal(m.Envelope.To, want.To[i:i+1]) || !slices.Equal(m.Headers["X-Capture-Tag"], []string{"flow=batch"}) {
				t.Errorf("batch email %d: subject %q text %v envelope %v headers %v", i, m.Subject, m.Body.Text, m.Envelope.To, m.Headers)
			}
		}
	},
}

// checkTemplate checks a message sent with a template capture cannot
// render: the template and its data are kept as X-Capture-* fields.
func checkTemplate(t *testing.T, m readMessage, provider, template, data string, to []string) {
	t.Helper()
	if !slices.Equal(m.Headers["X-Capture-Provider"], []string{provider}) || !slices.Equal(m.Headers["X-Capture-Template"], []string{template}) ||
		!slices.Equal(m.Headers["X-Capture-Template-Data"], []string{data}) || !slices.Equal(m.Envelope.To, to) {
		t.Errorf("templated message %s: envelope %v headers %v", m.ID, m.Envelope.To, m.Headers)
	}
}

// sdkMessage is what the scripts send, as common.mjs reads it.
type sdkMessage struct {
	BaseURL    string   `json:"base_url"`
	Host       string   `json:"host"`
	Inbox      string   `json:"inbox"`
	Password   string   `json:"password"`
	FromName   string   `json:"from_name"`
	From       string   `json:"from"`
	To         []string `json:"to"`
	Cc         []string `json:"cc"`
	Bcc        []string `json:"bcc"`
	Subject    string   `json:"subject"`
	Text       string   `json:"text"`
	HTML       string   `json:"html"`
	Attachment struct {
		Filename    string `json:"filename"`
		ContentType string `json:"content_type"`
		Base64      string `json:"base64"`
	} `json:"attachment"`
}

// readMessage is a message as the read API returns it.
type readMessage struct {
	ID        string `json:"id"`
	Subject   string `json:"subject"`
	MessageID string `json:"message_id"`
	From      struct{ Name, Address string }
	To, Cc    []struct{ Name, Address string }
	Envelope  struct {
		From string
		To   []string
	}
	Headers map[string][]string
	Body    struct {
		Text *string
		HTML *string `json:"html"`
	}
	Attachments []struct {
		ID          string
		Filename    string
		ContentType string `json:"content_type"`
		Size        int
		Inline      bool
	}
}

func checkSDKMessage(t *testing.T, srv *captureProcess, m readMessage, want sdkMessage, attachment []byte) {
	t.Helper()
	names := func(as []struct{ Name, Address string }) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.Address)
		}
		return out
	}
	if m.Subject != want.Subject {
		t.Errorf("subject %q", m.Subject)
	}
	if m.From.Name != want.FromName || m.From.Address != want.From {
		t.Errorf("from %+v", m.From)
	}
	if !slices.Equal(names(m.To), want.To) || !slices.Equal(names(m.Cc), want.Cc) {
		t.Errorf("to %v cc %v", m.To, m.Cc)
	}
	if m.Envelope.From != want.From || !slices.Equal(m.Envelope.To, slices.Concat(want.To, want.Cc, want.Bcc)) {
		t.Errorf("envelope %+v", m.Envelope)
	}
	if _, ok := m.Headers["Bcc"]; ok {
		t.Error("Bcc in the headers")
	}
	if m.Body.Text == nil || *m.Body.Text != want.Text || m.Body.HTML == nil || *m.Body.HTML != want.HTML {
		t.Errorf("text %v html %v", m.Body.Text, m.Body.HTML)
	}
	if len(m.Attachments) != 1 {
		t.Fatalf("attachments %+v", m.Attachments)
	}
	a := m.Attachments[0]
	if a.Filename != want.Attachment.Filename || a.ContentType != want.Attachment.ContentType || a.Size != len(attachment) || a.Inline {
		t.Errorf("attachment %+v", a)
	}
	if got := srv.get(t, "/messages/"+m.ID+"/attachments/"+a.ID); !bytes.Equal(got, attachment) {
		t.Errorf("attachment bytes differ: got %d bytes", len(got))
	}
}

// needNode finds node and the installed SDKs. Without them the test skips,
// saying why, except in CI, where they must be there.
func needNode(t *testing.T, sdkDir string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(sdkDir, "node_modules"))
	}
	if err != nil {
		msg := "provider SDK tests need node and the SDKs (`npm ci` in server/emailapi/testdata/sdk): " + err.Error()
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node
}

func sdkVersion(t *testing.T, sdkDir, pkg string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sdkDir, "node_modules", pkg, "package.json"))
	if err != nil {
		t.Fatalf("%s is not installed (`npm ci` in %s): %v", pkg, sdkDir, err)
	}
	var p struct{ Version string }
	json.Unmarshal(b, &p)
	return p.Version
}

func runScript(t *testing.T, node, sdkDir, provider string, send sdkMessage) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	spec, _ := json.Marshal(send)
	cmd := exec.CommandContext(ctx, node, provider+".mjs")
	cmd.Dir = sdkDir
	cmd.Env = append(os.Environ(), "CAPTURE_SEND="+string(spec), "AWS_EC2_METADATA_DISABLED=true", "NODE_NO_WARNINGS=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s.mjs: %v\n%s%s", provider, err, stdout.String(), stderr.String())
	}
	var result map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &result); err != nil {
		t.Fatalf("node %s.mjs printed %q: %v\n%s", provider, stdout.String(), err, stderr.String())
	}
	if _, ok := result["id"].(string); !ok {
		t.Fatalf("node %s.mjs gave no id: %v", provider, result)
	}
	return result
}

// captureProcess is `capture serve` running from a freshly built binary
// in a temporary data dir, every listener on a free loopback port.
type captureProcess struct {
	api, key, inbox, password, emailAPI string
}

var bannerRow = regexp.MustCompile(`^\s+(Read API|API key|Inbox|SMTP password|Email API|CA certificate)\s+(\S+)`)

func startCapture(t *testing.T) *captureProcess {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "capture")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/capturedev/capture")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "serve", "--data-dir", filepath.Join(t.TempDir(), "data"), "--http", "127.0.0.1:0",
		"--capture", "127.0.0.1:0", "--smtp-starttls", "127.0.0.1:0", "--smtp-tls", "127.0.0.1:0", "--email-api", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	banner := map[string]string{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := bannerRow.FindStringSubmatch(sc.Text()); m != nil {
			banner[m[1]] = m[2]
		}
		if _, ok := banner["CA certificate"]; ok {
			break
		}
	}
	go func() {
		io.Copy(io.Discard, stdout)
		cmd.Wait()
		close(exited)
	}()
	p := &captureProcess{api: banner["Read API"], key: banner["API key"], inbox: banner["Inbox"],
		password: banner["SMTP password"], emailAPI: banner["Email API"]}
	if p.api == "" || p.key == "" || p.password == "" || !strings.HasPrefix(p.emailAPI, "http://127.0.0.1:") {
		t.Fatalf("serve's banner: %v\n%s", banner, stderr.String())
	}
	return p
}

func (p *captureProcess) get(t *testing.T, path string) []byte {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", p.api+path, nil)
	req.Header.Set("Authorization", "Bearer "+p.key)
	r := do(t, req)
	if r.status != 200 {
		t.Fatalf("GET %s: %d %s", path, r.status, r.body)
	}
	return r.body
}

// listItem is what a test reads of a list's item.
type listItem struct{ ID, Subject string }

// list returns up to most items of a list route, newest first, following
// its pages.
func (p *captureProcess) list(t *testing.T, path string, most int) []listItem {
	t.Helper()
	var items []listItem
	next := ""
	for len(items) < most {
		q := "?limit=100"
		if next != "" {
			q += "&before=" + next
		}
		var page struct {
			Items []listItem
			Next  *string
		}
		if err := json.Unmarshal(p.get(t, path+q), &page); err != nil {
			t.Fatal(err)
		}
		items = append(items, page.Items...)
		if page.Next == nil {
			break
		}
		next = *page.Next
	}
	return items
}

func (p *captureProcess) message(t *testing.T, id string) readMessage {
	t.Helper()
	var m readMessage
	if err := json.Unmarshal(p.get(t, "/messages/"+id), &m); err != nil {
		t.Fatal(err)
	}
	if m.ID != id {
		t.Fatalf("asked for %s, got %s", id, m.ID)
	}
	return m
}
