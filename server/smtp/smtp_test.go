package smtp

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	netsmtp "net/smtp"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/capturedev/capture/server/admission"
	"github.com/capturedev/capture/server/certs"
	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/storetest"
)

var queuedReply = regexp.MustCompile(`^2\.0\.0 OK: queued as (msg_[0-9A-Za-z]+)$`)

type testEnv struct {
	st       *store.Store
	srv      *Server
	project  store.Project
	inbox    store.Inbox
	caFile   string
	roots    *x509.CertPool
	starttls string // address of the STARTTLS listener
	implicit string // address of the implicit TLS listener
	served   chan error
	shutDown bool
}

// newEnv runs a server on two real listeners over a real store, with one
// project on plan and one inbox.
func newEnv(t testing.TB, plan string, cfg Config) *testEnv {
	return newEnvOver(t, plan, cfg, nil)
}

// newEnvOver is newEnv with the server over what over makes of the real
// store, when given.
func newEnvOver(t testing.TB, plan string, cfg Config, over func(*store.Store) Store) *testEnv {
	ctx := context.Background()
	st := storetest.Store(t)
	p, err := st.CreateProject(ctx, "acme", plan)
	if err != nil {
		t.Fatal(err)
	}
	in, err := st.CreateInbox(ctx, p.ID, "signup")
	if err != nil {
		t.Fatal(err)
	}
	tlsDir := t.TempDir()
	res, err := certs.Ensure(tlsDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	pemBytes, err := os.ReadFile(res.CAPath)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemBytes) {
		t.Fatal("no certificate in ca.pem")
	}

	cfg.TLSConfig = certs.ServerConfig(res.Certificate)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	var served Store = st
	if over != nil {
		served = over(st)
	}
	e := &testEnv{st: st, srv: New(served, cfg), project: p, inbox: in, caFile: res.CAPath, roots: roots,
		served: make(chan error, 2)}
	for _, implicit := range []bool{false, true} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if implicit {
			e.implicit = l.Addr().String()
		} else {
			e.starttls = l.Addr().String()
		}
		go func() { e.served <- e.srv.Serve(l, implicit) }()
	}
	t.Cleanup(func() {
		if !e.shutDown {
			e.shutdown(t)
		}
	})
	return e
}

// shutdownInBackground begins a shutdown (bounded at 20 s) and returns
// where its outcome arrives, for tests that watch what happens meanwhile.
func (e *testEnv) shutdownInBackground() <-chan error {
	e.shutDown = true
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done <- e.srv.Shutdown(ctx)
	}()
	return done
}

// shutdown stops the server and checks that both Serve calls return nil.
func (e *testEnv) shutdown(t testing.TB) {
	e.shutDown = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	for range 2 {
		if err := <-e.served; err != nil {
			t.Errorf("Serve returned %v after Shutdown", err)
		}
	}
}

func (e *testEnv) clientTLS() *tls.Config {
	return &tls.Config{RootCAs: e.roots, ServerName: "localhost"}
}

// dialSTARTTLS is a net/smtp client over STARTTLS, certificate checked
// against ca.pem, authenticated as the inbox.
func (e *testEnv) dialSTARTTLS(t *testing.T) *netsmtp.Client {
	t.Helper()
	conn, err := net.Dial("tcp", e.starttls)
	if err != nil {
		t.Fatal(err)
	}
	// The name given here is the one PlainAuth insists on.
	c, err := netsmtp.NewClient(conn, "localhost")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.StartTLS(e.clientTLS()); err != nil {
		t.Fatalf("STARTTLS: %v", err)
	}
	if err := c.Auth(netsmtp.PlainAuth("", e.inbox.ID, e.inbox.SMTPPassword, "localhost")); err != nil {
		t.Fatalf("AUTH: %v", err)
	}
	return c
}

// sendData runs DATA on c and returns the final reply, which net/smtp's own
// Data hides.
func sendData(t *testing.T, c *netsmtp.Client, raw []byte) (int, string) {
	t.Helper()
	seq, err := c.Text.Cmd("DATA")
	if err != nil {
		t.Fatal(err)
	}
	c.Text.StartResponse(seq)
	defer c.Text.EndResponse(seq)
	if _, _, err := c.Text.ReadResponse(354); err != nil {
		t.Fatalf("DATA: %v", err)
	}
	w := c.Text.DotWriter()
	if _, err := w.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	code, msg, err := c.Text.ReadResponse(0)
	if err != nil {
		t.Fatalf("reply to DATA: %v", err)
	}
	return code, msg
}

// messageID returns a check that a DATA reply is the 250 naming the
// message, so that it can take a reply straight from a call.
func messageID(t *testing.T) func(code int, msg string) string {
	return func(code int, msg string) string {
		t.Helper()
		m := queuedReply.FindStringSubmatch(msg)
		if code != 250 || m == nil {
			t.Fatalf("reply to DATA = %d %q, want 250 2.0.0 OK: queued as msg_…", code, msg)
		}
		return m[1]
	}
}

func (e *testEnv) message(t *testing.T, id string) store.Message {
	t.Helper()
	m, err := e.st.Message(context.Background(), e.project.ID, id)
	if err != nil {
		t.Fatalf("message %s not readable after the 250: %v", id, err)
	}
	return m
}

func (e *testEnv) count(t testing.TB) int {
	t.Helper()
	l, err := e.st.Messages(context.Background(), e.inbox.ID, store.MessageFilter{}, store.Page{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

// rawClient speaks SMTP line by line, for exact replies.
type rawClient struct {
	t    *testing.T
	conn net.Conn
	tp   *textproto.Conn
}

func (e *testEnv) dialRaw(t *testing.T, implicit bool) *rawClient {
	t.Helper()
	conn := e.dial(t, implicit, 30*time.Second)
	r := &rawClient{t: t, conn: conn, tp: textproto.NewConn(conn)}
	r.expect(220, "")
	return r
}

// dial connects to the implicit-TLS listener (TLS done) or the STARTTLS
// one (plain text), closed when the test ends.
func (e *testEnv) dial(t *testing.T, implicit bool, deadline time.Duration) net.Conn {
	t.Helper()
	var conn net.Conn
	var err error
	if implicit {
		conn, err = tls.Dial("tcp", e.implicit, e.clientTLS())
	} else {
		conn, err = net.Dial("tcp", e.starttls)
	}
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(deadline))
	t.Cleanup(func() { conn.Close() })
	return conn
}

func (r *rawClient) reply() (int, string) {
	r.t.Helper()
	code, msg, err := r.tp.ReadResponse(0)
	if err != nil {
		r.t.Fatalf("read reply: %v", err)
	}
	return code, msg
}

func (r *rawClient) cmd(format string, args ...any) (int, string) {
	r.t.Helper()
	if err := r.tp.PrintfLine(format, args...); err != nil {
		r.t.Fatal(err)
	}
	return r.reply()
}

// expect checks the next reply's code and that its text starts with prefix.
func (r *rawClient) expect(code int, prefix string) string {
	r.t.Helper()
	got, msg := r.reply()
	if got != code || !strings.HasPrefix(msg, prefix) {
		r.t.Fatalf("reply = %d %q, want %d %q…", got, msg, code, prefix)
	}
	return msg
}

func (r *rawClient) must(code int, prefix, format string, args ...any) string {
	r.t.Helper()
	if err := r.tp.PrintfLine(format, args...); err != nil {
		r.t.Fatal(err)
	}
	return r.expect(code, prefix)
}

func (r *rawClient) startTLS(cfg *tls.Config) {
	r.t.Helper()
	r.must(220, "", "STARTTLS")
	tc := tls.Client(r.conn, cfg)
	if err := tc.Handshake(); err != nil {
		r.t.Fatalf("TLS handshake: %v", err)
	}
	r.conn, r.tp = tc, textproto.NewConn(tc)
}

func plainIR(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte("\x00" + user + "\x00" + pass))
}

// session is a raw client authenticated over STARTTLS.
func (e *testEnv) session(t *testing.T) *rawClient {
	t.Helper()
	r := e.dialRaw(t, false)
	r.must(250, "", "EHLO client.test")
	r.startTLS(e.clientTLS())
	r.must(250, "", "EHLO client.test")
	r.must(235, "2.0.0", "AUTH PLAIN %s", plainIR(e.inbox.ID, e.inbox.SMTPPassword))
	return r
}

// data sends DATA with raw dot-stuffed but otherwise byte for byte.
func (r *rawClient) data(raw []byte) (int, string) {
	r.t.Helper()
	r.must(354, "", "DATA")
	if _, err := r.conn.Write(dotStuff(raw)); err != nil {
		r.t.Fatal(err)
	}
	return r.reply()
}

func dotStuff(raw []byte) []byte {
	var b bytes.Buffer
	lineStart := true // only after CRLF does the server look for a dot
	for line := range bytes.Lines(raw) {
		if lineStart && line[0] == '.' {
			b.WriteByte('.')
		}
		b.Write(line)
		lineStart = bytes.HasSuffix(line, []byte("\r\n"))
	}
	if !bytes.HasSuffix(raw, []byte("\r\n")) {
		b.WriteString("\r\n")
	}
	b.WriteString(".\r\n")
	return b.Bytes()
}

func crlf(s string) []byte { return []byte(strings.ReplaceAll(s, "\n", "\r\n")) }

var confirmation = crlf(`From: "Alice Example" <alice@example.com>
To: Bob <bob@example.com>, carol@example.com
Cc: dave@example.com
Subject: =?UTF-8?Q?Confirm_your_caf=C3=A9_account?=
Date: Mon, 02 Jan 2006 15:04:05 +0000
Message-ID: <confirm-1@example.com>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="outer"

--outer
Content-Type: multipart/alternative; boundary="alt"

--alt
Content-Type: text/plain; charset=utf-8

Confirm: https://app.example.com/confirm?token=abc
.a line that starts with a dot
--alt
Content-Type: text/html; charset=utf-8

<p><a href="https://app.example.com/confirm?token=abc&amp;x=1">Confirm</a></p>
--alt--
--outer
Content-Type: application/pdf; name="invoice.pdf"
Content-Disposition: attachment; filename="invoice.pdf"
Content-Transfer-Encoding: base64

JVBERi0xLjQK
--outer--
`)

// checkConfirmation checks everything the read API serves of confirmation.
func (e *testEnv) checkConfirmation(t *testing.T, id, envFrom string, envTo []string) {
	t.Helper()
	m := e.message(t, id)
	if m.Subject != "Confirm your café account" {
		t.Errorf("Subject = %q", m.Subject)
	}
	if m.From == nil || m.From.Address != "alice@example.com" || m.From.Name != "Alice Example" {
		t.Errorf("From = %+v", m.From)
	}
	if len(m.To) != 2 || m.To[0].Address != "bob@example.com" || m.To[0].Name != "Bob" || m.To[1].Address != "carol@example.com" {
		t.Errorf("To = %+v", m.To)
	}
	if len(m.Cc) != 1 || m.Cc[0].Address != "dave@example.com" {
		t.Errorf("Cc = %+v", m.Cc)
	}
	if m.EnvelopeFrom != envFrom || strings.Join(m.EnvelopeTo, ",") != strings.Join(envTo, ",") {
		t.Errorf("envelope = %q → %q, want %q → %q", m.EnvelopeFrom, m.EnvelopeTo, envFrom, envTo)
	}
	if m.MessageID != "confirm-1@example.com" {
		t.Errorf("MessageID = %q", m.MessageID)
	}
	var found bool
	for _, l := range m.Links {
		if l.URL == "https://app.example.com/confirm?token=abc&x=1" && l.Text != nil && *l.Text == "Confirm" &&
			l.Origin == "https://app.example.com" {
			found = true
		}
	}
	if !found {
		t.Errorf("Links = %+v, want the HTML confirmation link", m.Links)
	}
	if len(m.Attachments) != 1 || m.Attachments[0].Filename != "invoice.pdf" ||
		m.Attachments[0].ContentType != "application/pdf" || m.Attachments[0].Size != int64(len("%PDF-1.4\n")) {
		t.Errorf("Attachments = %+v", m.Attachments)
	}
	if m.Text == nil || !strings.Contains(*m.Text, "\n.a line that starts with a dot") {
		t.Errorf("Text = %v", m.Text)
	}
	raw, err := e.st.MessageRaw(context.Background(), e.project.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, confirmation) {
		t.Errorf("raw differs from what was sent:\n%q\nwant\n%q", raw, confirmation)
	}
}

func TestCaptureSTARTTLS(t *testing.T) {
	e := newEnv(t, "team", Config{})
	c := e.dialSTARTTLS(t)
	if err := c.Mail("sender@example.com"); err != nil {
		t.Fatal(err)
	}
	for _, rcpt := range []string{"bob@example.com", "carol@example.com", "bcc@example.org"} {
		if err := c.Rcpt(rcpt); err != nil {
			t.Fatal(err)
		}
	}
	id := messageID(t)(sendData(t, c, confirmation))
	// Read at once: the 250 comes only after the commit.
	e.checkConfirmation(t, id, "sender@example.com", []string{"bob@example.com", "carol@example.com", "bcc@example.org"})
	if n := e.count(t); n != 1 {
		t.Errorf("%d messages stored for 3 recipients, want 1", n)
	}
	if err := c.Quit(); err != nil {
		t.Errorf("QUIT: %v", err)
	}
}

func TestCaptureImplicitTLS(t *testing.T) {
	e := newEnv(t, "team", Config{})
	conn, err := tls.Dial("tcp", e.implicit, e.clientTLS())
	if err != nil {
		t.Fatal(err)
	}
	c, err := netsmtp.NewClient(conn, "localhost")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		t.Error("STARTTLS offered inside implicit TLS")
	}
	if err := c.Auth(netsmtp.PlainAuth("", e.inbox.ID, e.inbox.SMTPPassword, "localhost")); err != nil {
		t.Fatalf("AUTH: %v", err)
	}
	if err := c.Mail("sender@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("bob@example.com"); err != nil {
		t.Fatal(err)
	}
	id := messageID(t)(sendData(t, c, confirmation))
	e.checkConfirmation(t, id, "sender@example.com", []string{"bob@example.com"})
	if err := c.Quit(); err != nil {
		t.Errorf("QUIT: %v", err)
	}
}

const pythonClient = `
import smtplib, ssl, sys
port, ca, user, password = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
msg = sys.stdin.buffer.read()
ctx = ssl.create_default_context(cafile=ca)
with smtplib.SMTP("localhost", port, timeout=20) as s:
    s.starttls(context=ctx)
    s.login(user, password)
    refused = s.sendmail("py@example.com", ["bob@example.com", "carol@example.com"], msg)
    assert refused == {}, refused
with smtplib.SMTP("localhost", port, timeout=20) as s:
    s.starttls(context=ctx)
    s.ehlo()
    s.user, s.password = user, password
    s.auth("LOGIN", s.auth_login, initial_response_ok=False)
    s.mail("py@example.com")
    s.rcpt("bob@example.com")
    code, reply = s.data(msg)
    print(code, reply.decode())
    try:
        s.login(user, "wrong")
    except smtplib.SMTPAuthenticationError:
        pass
`

func TestCapturePythonSmtplib(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("SKIPPED: python3 is not installed; the smtplib interoperability test did not run")
	}
	e := newEnv(t, "team", Config{})
	_, port, _ := net.SplitHostPort(e.starttls)
	cmd := exec.CommandContext(t.Context(), python, "-c", pythonClient, port, e.caFile, e.inbox.ID, e.inbox.SMTPPassword)
	cmd.Stdin = bytes.NewReader(confirmation)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 smtplib: %v\n%s", err, out)
	}
	code, reply, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if code != "250" {
		t.Fatalf("python3 smtplib: reply %s %s", code, reply)
	}
	id := messageID(t)(250, reply)
	e.checkConfirmation(t, id, "py@example.com", []string{"bob@example.com"})

	l, err := e.st.Messages(context.Background(), e.inbox.ID, store.MessageFilter{}, store.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 2 {
		t.Fatalf("%d messages stored, want 2", len(l.Items))
	}
	first := l.Items[1].ID // newest first
	e.checkConfirmation(t, first, "py@example.com", []string{"bob@example.com", "carol@example.com"})
}

func extensions(msg string) map[string]string {
	ext := make(map[string]string)
	for _, line := range strings.Split(msg, "\n")[1:] {
		k, v, _ := strings.Cut(line, " ")
		ext[k] = v
	}
	return ext
}

func TestEHLO(t *testing.T) {
	e := newEnv(t, "free", Config{Hostname: "mail.capture.test"})
	r := e.dialRaw(t, false)
	ext := extensions(r.must(250, "", "EHLO client.test"))
	for _, want := range []string{"STARTTLS", "8BITMIME", "SMTPUTF8", "PIPELINING"} {
		if _, ok := ext[want]; !ok {
			t.Errorf("before TLS, EHLO lacks %s: %v", want, ext)
		}
	}
	if _, ok := ext["AUTH"]; ok {
		t.Errorf("AUTH advertised before TLS: %v", ext)
	}
	r.startTLS(&tls.Config{RootCAs: e.roots, ServerName: "localhost"})
	ext = extensions(r.must(250, "", "EHLO client.test"))
	want := map[string]string{"AUTH": "PLAIN LOGIN", "SIZE": "52428800", "8BITMIME": "", "SMTPUTF8": "", "PIPELINING": ""}
	for k, v := range want {
		if got, ok := ext[k]; !ok || got != v {
			t.Errorf("after STARTTLS, EHLO has %s=%q (present %v), want %q", k, got, ok, v)
		}
	}
	if _, ok := ext["STARTTLS"]; ok {
		t.Errorf("STARTTLS advertised after TLS: %v", ext)
	}

	imp := e.dialRaw(t, true)
	ext = extensions(imp.must(250, "", "EHLO client.test"))
	if _, ok := ext["STARTTLS"]; ok {
		t.Errorf("STARTTLS advertised on implicit TLS: %v", ext)
	}
	if ext["AUTH"] != "PLAIN LOGIN" {
		t.Errorf("implicit TLS: AUTH = %q", ext["AUTH"])
	}
}

func TestGreetingNamesHost(t *testing.T) {
	e := newEnv(t, "free", Config{Hostname: "mail.capture.test"})
	conn, err := net.Dial("tcp", e.starttls)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, msg, err := textproto.NewConn(conn).ReadResponse(220)
	if err != nil || !strings.HasPrefix(msg, "mail.capture.test ") {
		t.Errorf("greeting = %q, %v", msg, err)
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t, "team", Config{})
	pw := e.inbox.SMTPPassword

	t.Run("MAIL before AUTH", func(t *testing.T) {
		r := e.dialRaw(t, false)
		r.must(250, "", "EHLO client.test")
		r.startTLS(e.clientTLS())
		r.must(250, "", "EHLO client.test")
		r.must(530, "5.7.0 Authentication required", "MAIL FROM:<a@example.com>")
		r.must(502, "", "RCPT TO:<b@example.com>")
	})
	t.Run("AUTH before TLS refused", func(t *testing.T) {
		r := e.dialRaw(t, false)
		r.must(250, "", "EHLO client.test")
		r.must(538, "5.7.11 Encryption required", "AUTH PLAIN %s", plainIR(e.inbox.ID, pw))
		r.must(538, "5.7.11", "AUTH LOGIN")
		r.must(530, "5.7.0", "MAIL FROM:<a@example.com>")
		// The connection stays usable: upgrade and authenticate.
		r.startTLS(e.clientTLS())
		r.must(250, "", "EHLO client.test")
		r.must(235, "2.0.0", "AUTH PLAIN %s", plainIR(e.inbox.ID, pw))
	})

	tests := []struct {
		name    string
		auth    string
		replies []string // lines sent after 334 challenges
		code    int
		prefix  string
	}{
		{"PLAIN", "AUTH PLAIN " + plainIR(e.inbox.ID, pw), nil, 235, "2.0.0"},
		{"PLAIN without initial response", "AUTH PLAIN", []string{plainIR(e.inbox.ID, pw)}, 235, "2.0.0"},
		{"PLAIN lowercase mechanism", "AUTH plain " + plainIR(e.inbox.ID, pw), nil, 235, "2.0.0"},
		{"PLAIN with matching identity", "AUTH PLAIN " + base64.StdEncoding.EncodeToString([]byte(e.inbox.ID+"\x00"+e.inbox.ID+"\x00"+pw)), nil, 235, "2.0.0"},
		{"LOGIN", "AUTH LOGIN", []string{b64(e.inbox.ID), b64(pw)}, 235, "2.0.0"},
		{"LOGIN with initial response", "AUTH LOGIN " + b64(e.inbox.ID), []string{b64(pw)}, 235, "2.0.0"},
		{"bad password", "AUTH PLAIN " + plainIR(e.inbox.ID, pw+"x"), nil, 535, "5.7.8 Authentication credentials invalid"},
		{"empty password", "AUTH PLAIN " + plainIR(e.inbox.ID, ""), nil, 535, "5.7.8"},
		{"unknown inbox", "AUTH PLAIN " + plainIR("inb_doesnotexist", pw), nil, 535, "5.7.8"},
		{"other identity", "AUTH PLAIN " + base64.StdEncoding.EncodeToString([]byte("admin\x00"+e.inbox.ID+"\x00"+pw)), nil, 535, "5.7.8"},
		{"LOGIN bad password", "AUTH LOGIN", []string{b64(e.inbox.ID), b64("nope")}, 535, "5.7.8"},
		{"unknown mechanism", "AUTH CRAM-MD5", nil, 504, "5.7.4"},
		{"PLAIN not split in three", "AUTH PLAIN " + b64("just-a-user"), nil, 501, "5.5.2"},
		{"cancelled", "AUTH LOGIN", []string{"*"}, 501, ""},
		// go-smtp answers undecodable base64 itself, with a 454 and without
		// counting it as an error of the connection.
		{"garbage base64 initial response", "AUTH PLAIN !!!not*base64$$$", nil, 454, "4.7.0 Invalid base64 data"},
		{"garbage base64 response", "AUTH LOGIN", []string{"%%%garbage%%%"}, 454, "4.7.0 Invalid base64 data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.dialRaw(t, false)
			r.must(250, "", "EHLO client.test")
			r.startTLS(e.clientTLS())
			r.must(250, "", "EHLO client.test")
			code, msg := r.cmd("%s", tt.auth)
			for _, line := range tt.replies {
				if code != 334 {
					break
				}
				code, msg = r.cmd("%s", line)
			}
			if code != tt.code || !strings.HasPrefix(msg, tt.prefix) {
				t.Fatalf("AUTH: %d %q, want %d %q…", code, msg, tt.code, tt.prefix)
			}
			if code == 235 {
				r.must(250, "", "MAIL FROM:<a@example.com>")
				return
			}
			// A failed AUTH leaves the connection usable.
			r.must(250, "", "NOOP")
			r.must(530, "5.7.0", "MAIL FROM:<a@example.com>")
			r.must(235, "2.0.0", "AUTH PLAIN %s", plainIR(e.inbox.ID, pw))
			r.must(250, "", "MAIL FROM:<a@example.com>")
		})
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestAllowInsecureAuth(t *testing.T) {
	e := newEnv(t, "team", Config{AllowInsecureAuth: true})
	r := e.dialRaw(t, false)
	ext := extensions(r.must(250, "", "EHLO client.test"))
	if ext["AUTH"] != "PLAIN LOGIN" {
		t.Errorf("AUTH = %q before TLS with AllowInsecureAuth", ext["AUTH"])
	}
	r.must(235, "2.0.0", "AUTH PLAIN %s", plainIR(e.inbox.ID, e.inbox.SMTPPassword))
	r.must(250, "", "MAIL FROM:<a@example.com>")
	r.must(250, "", "RCPT TO:<b@example.com>")
	messageID(t)(r.data(crlf("Subject: plain\n\nhello\n")))
}

func TestPasswordRotation(t *testing.T) {
	e := newEnv(t, "team", Config{})
	old := e.inbox.SMTPPassword
	in, err := e.st.RotateInboxPassword(context.Background(), e.inbox.ID)
	if err != nil {
		t.Fatal(err)
	}
	if in.SMTPPassword == old {
		t.Fatal("password not rotated")
	}

	r := e.dialRaw(t, true)
	r.must(250, "", "EHLO client.test")
	r.must(535, "5.7.8", "AUTH PLAIN %s", plainIR(e.inbox.ID, old))
	r.must(235, "2.0.0", "AUTH PLAIN %s", plainIR(e.inbox.ID, in.SMTPPassword))

	r2 := e.dialRaw(t, false)
	r2.must(250, "", "EHLO client.test")
	r2.startTLS(e.clientTLS())
	r2.must(250, "", "EHLO client.test")
	r2.must(535, "5.7.8", "AUTH PLAIN %s", plainIR(e.inbox.ID, old))
}

func TestRecipientLimit(t *testing.T) {
	e := newEnv(t, "team", Config{})
	r := e.session(t)
	r.must(250, "", "MAIL FROM:<a@example.com>")
	var want []string
	for i := range 100 {
		addr := fmt.Sprintf("user%d@example.com", i)
		want = append(want, addr)
		r.must(250, "", "RCPT TO:<%s>", addr)
	}
	r.must(452, "4.5.3 Too many recipients", "RCPT TO:<user100@example.com>")
	r.must(452, "4.5.3 Too many recipients", "RCPT TO:<user101@example.com>")
	id := messageID(t)(r.data(crlf("Subject: many\n\nhi\n")))
	m := e.message(t, id)
	if strings.Join(m.EnvelopeTo, ",") != strings.Join(want, ",") {
		t.Errorf("EnvelopeTo has %d recipients, want the first 100", len(m.EnvelopeTo))
	}
	// The count starts again with the next message.
	r.must(250, "", "MAIL FROM:<a@example.com>")
	r.must(250, "", "RCPT TO:<again@example.com>")
	messageID(t)(r.data(crlf("Subject: again\n\nhi\n")))
}

func TestSeveralMessagesRSETNOOP(t *testing.T) {
	e := newEnv(t, "team", Config{})
	r := e.session(t)

	r.must(250, "", "MAIL FROM:<one@example.com>")
	r.must(250, "", "RCPT TO:<x@example.com>")
	id1 := messageID(t)(r.data(crlf("Subject: one\n\nfirst\n")))

	r.must(250, "", "NOOP")
	r.must(250, "", "MAIL FROM:<dropped@example.com>")
	r.must(250, "", "RCPT TO:<dropped@example.com>")
	r.must(503, "5.5.1", "MAIL FROM:<nested@example.com>") // it would drop the recipient
	r.must(250, "", "RSET")
	r.must(502, "", "DATA") // the transaction is gone

	r.must(250, "", "MAIL FROM:<two@example.com>")
	r.must(250, "", "RCPT TO:<y@example.com>")
	r.must(250, "", "NOOP")
	id2 := messageID(t)(r.data(crlf("Subject: two\n\nsecond\n")))

	// Pipelined: the whole transaction in one write, replies in order.
	msg := dotStuff(crlf("Subject: three\n\nthird\n"))
	batch := "MAIL FROM:<three@example.com>\r\nRCPT TO:<z@example.com>\r\nRCPT TO:<w@example.com>\r\nDATA\r\n"
	if _, err := r.conn.Write([]byte(batch)); err != nil {
		t.Fatal(err)
	}
	r.expect(250, "")
	r.expect(250, "")
	r.expect(250, "")
	r.expect(354, "")
	if _, err := r.conn.Write(msg); err != nil {
		t.Fatal(err)
	}
	id3 := messageID(t)(r.reply())
	r.must(221, "", "QUIT")

	for _, c := range []struct{ id, subject, from, to string }{
		{id1, "one", "one@example.com", "x@example.com"},
		{id2, "two", "two@example.com", "y@example.com"},
		{id3, "three", "three@example.com", "z@example.com,w@example.com"},
	} {
		m := e.message(t, c.id)
		if m.Subject != c.subject || m.EnvelopeFrom != c.from || strings.Join(m.EnvelopeTo, ",") != c.to {
			t.Errorf("%s: subject %q envelope %q → %v", c.id, m.Subject, m.EnvelopeFrom, m.EnvelopeTo)
		}
	}
	if n := e.count(t); n != 3 {
		t.Errorf("%d messages stored, want 3", n)
	}
}

func TestSizeLimit(t *testing.T) {
	e := newEnv(t, "free", Config{})
	const limit = 10 << 20
	want := "5.3.4 message exceeds the 10485760-byte limit of the free plan"
	r := e.session(t)

	r.must(552, want, "MAIL FROM:<a@example.com> SIZE=%d", limit+1)
	r.must(250, "", "MAIL FROM:<a@example.com> SIZE=%d", limit)
	r.must(250, "", "RCPT TO:<b@example.com>")

	// One byte over, in long lines so the test stays fast.
	big := make([]byte, 0, limit+1)
	big = append(big, "Subject: big\r\n\r\n"...)
	line := append(bytes.Repeat([]byte("x"), 8190), '\r', '\n')
	for len(big)+len(line) <= limit+1 {
		big = append(big, line...)
	}
	for len(big) < limit-1 {
		big = append(big, 'y')
	}
	big = append(big, "\r\n"...)
	if len(big) != limit+1 {
		t.Fatalf("built %d bytes", len(big))
	}
	code, msg := r.data(big)
	if code != 552 || msg != want {
		t.Fatalf("oversize DATA: %d %q, want 552 %q", code, msg, want)
	}
	if n := e.count(t); n != 0 {
		t.Fatalf("%d messages stored after 552", n)
	}

	// The connection goes on.
	r.must(250, "", "MAIL FROM:<a@example.com>")
	r.must(250, "", "RCPT TO:<b@example.com>")
	messageID(t)(r.data(crlf("Subject: small\n\nok\n")))
}

func TestLongLines(t *testing.T) {
	e := newEnv(t, "team", Config{MaxLineLength: 4096})
	r := e.session(t)
	r.must(250, "", "MAIL FROM:<a@example.com>")
	r.must(250, "", "RCPT TO:<b@example.com>")
	// Longer than RFC 5321's 1000 but within the configured limit: kept.
	ok := crlf("Subject: " + strings.Repeat("s", 3000) + "\n\nbody\n")
	id := messageID(t)(r.data(ok))
	if m := e.message(t, id); len(m.Subject) != 3000 {
		t.Errorf("len(Subject) = %d", len(m.Subject))
	}

	r.must(250, "", "MAIL FROM:<a@example.com>")
	r.must(250, "", "RCPT TO:<b@example.com>")
	code, msg := r.data(crlf("Subject: x\n\n" + strings.Repeat("l", 10000) + "\n"))
	if code != 500 || !strings.Contains(msg, "longer than 4096 bytes") {
		t.Fatalf("over-long line: %d %q", code, msg)
	}
	if n := e.count(t); n != 1 {
		t.Errorf("%d messages stored, want 1", n)
	}
}

func TestBadInputStoredRaw(t *testing.T) {
	e := newEnv(t, "team", Config{})
	r := e.session(t)
	for _, name := range []string{"8bit-headers.eml", "nul-bytes.eml", "garbage.eml", "broken-boundary.eml", "no-headers.eml"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "eml", name))
		if err != nil {
			t.Fatal(err)
		}
		r.must(250, "", "MAIL FROM:<a@example.com>")
		r.must(250, "", "RCPT TO:<b@example.com>")
		id := messageID(t)(r.data(raw))
		got, err := e.st.MessageRaw(context.Background(), e.project.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		want := raw
		if !bytes.HasSuffix(want, []byte("\r\n")) {
			want = append(append([]byte(nil), raw...), "\r\n"...)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: raw stored differs:\n%q\nwant\n%q", name, got, want)
		}
		e.message(t, id)
	}

	r.must(250, "", "MAIL FROM:<a@example.com>")
	r.must(250, "", "RCPT TO:<b@example.com>")
	id := messageID(t)(r.data([]byte("Subject: caf\xe9 \x00 nul\r\nFrom: \xff\xfe\r\n\r\nbody \x00\x01\x02\r\n")))
	m := e.message(t, id)
	if m.Subject == "" {
		t.Errorf("8-bit subject lost: %+v", m.MessageSummary)
	}
}

func TestSMTPUTF8(t *testing.T) {
	e := newEnv(t, "team", Config{})
	r := e.session(t)
	r.must(250, "", "MAIL FROM:<josé@exämple.com> SMTPUTF8 BODY=8BITMIME")
	r.must(250, "", "RCPT TO:<用户@例子.广告>")
	id := messageID(t)(r.data([]byte("Subject: ünïcödé\r\n\r\nhallo\r\n")))
	m := e.message(t, id)
	if m.EnvelopeFrom != "josé@exämple.com" || len(m.EnvelopeTo) != 1 || m.EnvelopeTo[0] != "用户@例子.广告" {
		t.Errorf("envelope %q → %q", m.EnvelopeFrom, m.EnvelopeTo)
	}
	if m.Subject != "ünïcödé" {
		t.Errorf("Subject = %q", m.Subject)
	}
}

func TestBDAT(t *testing.T) {
	e := newEnv(t, "team", Config{})
	r := e.session(t)
	r.must(250, "", "MAIL FROM:<a@example.com>")
	r.must(250, "", "RCPT TO:<b@example.com>")
	raw := crlf("Subject: chunked\n\n.dot kept as is\n")
	fmt.Fprintf(r.conn, "BDAT %d LAST\r\n%s", len(raw), raw)
	id := messageID(t)(r.reply())
	got, err := e.st.MessageRaw(context.Background(), e.project.ID, id)
	if err != nil || !bytes.Equal(got, raw) {
		t.Errorf("raw = %q, %v", got, err)
	}
}

// A client that ends lines with a bare LF (smtplib.sendmail given
// msg.as_bytes()) dot-stuffs after LF too; the message is stored as it
// meant it. BDAT has no stuffing, so its dots are kept as sent.
func TestBareLFDotStuffing(t *testing.T) {
	e := newEnv(t, "team", Config{})
	raw := []byte("Subject: dots\n\nLoading\n...\n.env must be set\n..two\n.\nend\n")
	// As Python's smtplib stuffs: a dot after any LF, or at the start.
	stuffed := regexp.MustCompile(`(?m)^\.`).ReplaceAll(raw, []byte(".."))
	r := e.session(t)
	r.must(250, "", "MAIL FROM:<py@example.com>")
	r.must(250, "", "RCPT TO:<b@example.com>")
	r.must(354, "", "DATA")
	if _, err := r.conn.Write(append(stuffed, "\r\n.\r\n"...)); err != nil {
		t.Fatal(err)
	}
	id := messageID(t)(r.reply())
	want := append(bytes.Clone(raw), "\r\n"...)
	if got, err := e.st.MessageRaw(context.Background(), e.project.ID, id); err != nil || !bytes.Equal(got, want) {
		t.Errorf("raw = %q, %v; want %q", got, err, want)
	}

	r.must(250, "", "MAIL FROM:<a@example.com>")
	r.must(250, "", "RCPT TO:<b@example.com>")
	fmt.Fprintf(r.conn, "BDAT %d LAST\r\n%s", len(stuffed), stuffed)
	id = messageID(t)(r.reply())
	if got, err := e.st.MessageRaw(context.Background(), e.project.ID, id); err != nil || !bytes.Equal(got, stuffed) {
		t.Errorf("BDAT raw = %q, %v; want it as sent", got, err)
	}
}

func TestDisconnectMidDATA(t *testing.T) {
	e := newEnv(t, "team", Config{})
	for _, implicit := range []bool{false, true} {
		r := e.dialRaw(t, implicit)
		r.must(250, "", "EHLO client.test")
		if !implicit {
			r.startTLS(e.clientTLS())
			r.must(250, "", "EHLO client.test")
		}
		r.must(235, "", "AUTH PLAIN %s", plainIR(e.inbox.ID, e.inbox.SMTPPassword))
		r.must(250, "", "MAIL FROM:<a@example.com>")
		r.must(250, "", "RCPT TO:<b@example.com>")
		r.must(354, "", "DATA")
		if _, err := r.conn.Write(crlf("Subject: cut\n\nhalf a mess")); err != nil {
			t.Fatal(err)
		}
		r.conn.Close()
	}
	// Shutdown returns once every connection has been handled to its end.
	e.shutdown(t)
	if n := e.count(t); n != 0 {
		t.Errorf("%d messages stored from interrupted DATA", n)
	}
	e.srv.mu.Lock()
	open := len(e.srv.conns)
	e.srv.mu.Unlock()
	if open != 0 {
		t.Errorf("%d connections still tracked", open)
	}
}

func TestStoreFailure(t *testing.T) {
	e := newEnv(t, "team", Config{})
	r := e.session(t)
	r.must(250, "", "MAIL FROM:<a@example.com>")
	r.must(250, "", "RCPT TO:<b@example.com>")
	e.st.Close()
	code, msg := r.data(crlf("Subject: lost\n\nbody\n"))
	if code != 451 || !strings.HasPrefix(msg, "4.3.0 ") {
		t.Fatalf("DATA with the store closed: %d %q, want 451 4.3.0", code, msg)
	}
	r.must(250, "", "NOOP")
}

func TestMaxConnections(t *testing.T) {
	e := newEnv(t, "team", Config{MaxConnections: 2})
	// Authenticated sessions may hold every slot.
	a := e.session(t)
	e.session(t)

	for _, implicit := range []bool{false, true} {
		conn := e.dial(t, implicit, 10*time.Second)
		code, msg, err := textproto.NewConn(conn).ReadResponse(0)
		if err != nil || code != 421 || !strings.HasPrefix(msg, "4.7.0 ") || !strings.Contains(msg, "too many connections") {
			t.Errorf("implicit=%v: over the limit: %d %q %v", implicit, code, msg, err)
		}
		if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("implicit=%v: connection not closed after 421: %v", implicit, err)
		}
		conn.Close()
	}

	// A slot frees when its connection closes. Over TLS the client sees
	// the end (close_notify) just before the socket closes and the slot is
	// given back, so a new connection may still meet the limit for an
	// instant: it is retried, within a bound, until it is let in.
	a.must(221, "", "QUIT")
	if _, err := a.conn.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after QUIT: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn := e.dial(t, false, 10*time.Second)
		code, msg, err := textproto.NewConn(conn).ReadResponse(0)
		conn.Close()
		if err == nil && code == 220 {
			break
		}
		if code != 421 || time.Now().After(deadline) {
			t.Fatalf("after QUIT freed a slot: %d %q %v, want 220", code, msg, err)
		}
	}
}

// expectHangUp checks that the server says reply (code and enhanced code)
// and closes the connection.
func (r *rawClient) expectHangUp(code int, prefix string) {
	r.t.Helper()
	r.expect(code, prefix)
	if _, err := r.conn.Read(make([]byte, 1)); err == nil {
		r.t.Fatal("connection left open after the reply")
	}
}

// Idle or NOOPing clients that never authenticate can hold half the slots
// at most, and each new one displaces the oldest: a sender always gets in.
func TestUnauthenticatedConnectionsNeverLockSendersOut(t *testing.T) {
	e := newEnv(t, "team", Config{MaxConnections: 8})
	var idle []*rawClient
	for i := range 8 {
		r := e.dialRaw(t, i%2 == 1)
		r.must(250, "", "NOOP")
		idle = append(idle, r)
	}
	// The first four were displaced by the next four.
	for _, r := range idle[:4] {
		r.expectHangUp(421, "4.7.0")
	}
	for _, r := range idle[4:] {
		r.must(250, "", "NOOP")
	}
	// A sender still gets in, displacing one more, and delivers.
	c := e.dialSTARTTLS(t)
	if err := c.Mail("a@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("b@example.com"); err != nil {
		t.Fatal(err)
	}
	messageID(t)(sendData(t, c, crlf("Subject: through the crowd\n\nhi\n")))
	idle[4].expectHangUp(421, "4.7.0")
	// Authenticated, it no longer counts among the unauthenticated: four
	// more idle clients displace only each other.
	for range 4 {
		r := e.dialRaw(t, false)
		idle = append(idle, r)
	}
	for _, r := range idle[5:8] {
		r.expectHangUp(421, "4.7.0")
	}
	if err := c.Noop(); err != nil {
		t.Fatalf("authenticated session displaced: %v", err)
	}
}

// A session must authenticate within its deadline, however busy it keeps
// the connection.
func TestPreAuthDeadline(t *testing.T) {
	e := newEnv(t, "team", Config{PreAuthTimeout: 300 * time.Millisecond})
	for _, implicit := range []bool{false, true} {
		r := e.dialRaw(t, implicit)
		var code int
		var msg string
		for code == 0 || code == 250 {
			r.tp.PrintfLine("NOOP")
			var err error
			code, msg, err = r.tp.ReadResponse(0)
			if err != nil {
				break // closed right after the 421 was read
			}
		}
		if code != 421 || !strings.Contains(msg, "authentication required within 300ms") {
			t.Errorf("implicit=%v: NOOPs outlived the authentication deadline, or were not told why: last reply %d %q", implicit, code, msg)
		}
	}
	// An authenticated session is not held to it. Its deadline is longer,
	// so that STARTTLS and AUTH of a loaded machine fit in it, and the
	// session outlives it by half again.
	const deadline = time.Second
	e = newEnv(t, "team", Config{PreAuthTimeout: deadline})
	connected := time.Now()
	s := e.session(t)
	for time.Since(connected) < deadline*3/2 {
		s.must(250, "", "NOOP")
	}
}

func TestShutdownWaitsForInFlight(t *testing.T) {
	e := newEnv(t, "team", Config{})
	busy := e.session(t)
	idle := e.session(t)

	busy.must(250, "", "MAIL FROM:<a@example.com>")
	busy.must(250, "", "RCPT TO:<b@example.com>")
	busy.must(354, "", "DATA")
	if _, err := busy.conn.Write(crlf("Subject: in flight\n\nfirst half, ")); err != nil {
		t.Fatal(err)
	}

	done := e.shutdownInBackground()

	// Shutdown has begun once the idle connection is told and closed.
	idle.expectHangUp(421, "4.3.2")
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v with a transaction in flight", err)
	default:
	}

	if _, err := busy.conn.Write(dotStuff(crlf("second half\n"))); err != nil {
		t.Fatal(err)
	}
	id := messageID(t)(busy.reply())
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for range 2 {
		if err := <-e.served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
	if m := e.message(t, id); m.Subject != "in flight" {
		t.Errorf("Subject = %q", m.Subject)
	}
	// Its next command would find the server gone: it is told first.
	busy.expectHangUp(421, "4.3.2")
}

// A client that connects to the implicit-TLS port and never starts its
// handshake (a port scan, a TCP health check) is closed at shutdown rather
// than holding it up until the client's deadline.
func TestShutdownClosesConnectionsBeforeTheirTLSHandshake(t *testing.T) {
	e := newEnv(t, "team", Config{})
	silent, err := net.Dial("tcp", e.implicit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	silent.SetDeadline(time.Now().Add(time.Minute))
	// Connections are accepted in order: once a later client is greeted,
	// the silent one has been accepted too.
	greeted := e.dialRaw(t, true)
	if n := e.srv.InTransaction(); n != 0 {
		t.Errorf("InTransaction = %d with no transaction begun", n)
	}

	done := e.shutdownInBackground()
	// Well within the 30 s authentication deadline that would otherwise
	// end the handshake.
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Shutdown still waits for a connection that never started its TLS handshake")
	}
	if n, err := silent.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("silent connection: read %d bytes, %v; want it closed", n, err)
	}
	// A client past its handshake is told, in TLS, before the close.
	greeted.expectHangUp(421, "4.3.2")
	for range 2 {
		if err := <-e.served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestShutdownTimeoutClosesEverything(t *testing.T) {
	e := newEnv(t, "team", Config{})
	busy := e.session(t)
	busy.must(250, "", "MAIL FROM:<a@example.com>")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.srv.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown with an ended context: %v", err)
	}
	e.shutDown = true
	busy.expectHangUp(421, "4.3.2")
	for range 2 {
		if err := <-e.served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
}

func TestServeAfterShutdown(t *testing.T) {
	e := newEnv(t, "team", Config{})
	e.shutdown(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Serve(l, false); err != nil {
		t.Errorf("Serve after Shutdown: %v", err)
	}
	if _, err := l.Accept(); err == nil {
		t.Error("listener left open")
	}
}

func TestReadTimeout(t *testing.T) {
	// Long enough for STARTTLS and AUTH on a loaded machine, whose
	// commands each get the same time to arrive.
	e := newEnv(t, "team", Config{ReadTimeout: time.Second})
	r := e.session(t)
	r.must(250, "", "MAIL FROM:<a@example.com>")
	// A client that goes quiet is told so and disconnected.
	r.expect(421, "4.4.2")
	if _, err := r.conn.Read(make([]byte, 1)); err == nil {
		t.Error("connection left open after the idle timeout")
	}
	// A client that stalls inside DATA loses its message.
	s := e.session(t)
	s.must(250, "", "MAIL FROM:<a@example.com>")
	s.must(250, "", "RCPT TO:<b@example.com>")
	s.must(354, "", "DATA")
	if _, err := s.conn.Write(crlf("Subject: stalled\n\nhalf")); err != nil {
		t.Fatal(err)
	}
	s.expect(421, "4.4.2 Timeout while receiving the message")
	// 421 closes the channel (RFC 5321 3.8): nothing more is read.
	if _, err := s.conn.Read(make([]byte, 1)); err == nil {
		t.Error("connection left open after 421 for a stalled DATA")
	}
	e.shutdown(t)
	if n := e.count(t); n != 0 {
		t.Errorf("%d messages stored from a stalled DATA", n)
	}
}

func TestReadMessageLimit(t *testing.T) {
	for _, tt := range []struct {
		size, limit int
		over        bool
	}{
		{0, 10, false}, {10, 10, false}, {11, 10, true}, {5000, 4096, true},
		{4096, 4096, false}, {4097, 4096, true}, {8192, 8192, false}, {20000, 100000, false},
	} {
		data := bytes.Repeat([]byte("x"), tt.size)
		for _, r := range []io.Reader{bytes.NewReader(data), iotest.OneByteReader(bytes.NewReader(data))} {
			buf := &buffer{}
			got, err := readMessage(buf, r, int64(tt.limit), 0, nil)
			if tt.over {
				if !errors.Is(err, errOverLimit) {
					t.Errorf("%d bytes, limit %d: err %v, want over the limit", tt.size, tt.limit, err)
				}
			} else if err != nil || !bytes.Equal(got, data) {
				t.Errorf("%d bytes, limit %d: %d bytes, %v", tt.size, tt.limit, len(got), err)
			}
			if cap(buf.b) > tt.limit+1 {
				t.Errorf("%d bytes, limit %d: buffer grew to %d", tt.size, tt.limit, cap(buf.b))
			}
		}
	}
}

// A message whose size MAIL FROM declared is read into one buffer of that
// size, not doubled up to it; a wrong declaration still reads the message
// whole, and never past the limit.
func TestReadMessageSizedByDeclaration(t *testing.T) {
	for _, tt := range []struct {
		size, declared, limit int
		wantCap               int // 0: only bounded by the limit
	}{
		{100_000, 100_000, 1 << 20, 100_000 + declaredSlack},
		{100_000, 10, 1 << 20, 0},
		{100_000, 60_000, 1 << 20, 0},
		{100_000, 900_000, 1 << 20, 900_000 + declaredSlack},
		{100_000, 50 << 20, 1 << 20, 1<<20 + 1},
	} {
		data := bytes.Repeat([]byte("y"), tt.size)
		buf := &buffer{}
		var grown []int
		got, err := readMessage(buf, bytes.NewReader(data), int64(tt.limit), int64(tt.declared),
			func(size int) error { grown = append(grown, size); return nil })
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes declared as %d: %d bytes, %v", tt.size, tt.declared, len(got), err)
		}
		if cap(buf.b) > tt.limit+1 {
			t.Errorf("%d bytes declared as %d: buffer grew to %d, past the limit", tt.size, tt.declared, cap(buf.b))
		}
		if tt.wantCap != 0 && (cap(buf.b) != tt.wantCap || len(grown) != 1) {
			t.Errorf("%d bytes declared as %d: buffer of %d after %d growths, want one of %d",
				tt.size, tt.declared, cap(buf.b), len(grown), tt.wantCap)
		}
	}
}

// Refused hears each refused sign-in and message by the read API's code,
// and nothing of what went through.
func TestRefusalsAreCounted(t *testing.T) {
	var mu sync.Mutex
	heard := map[string]int{}
	e := newEnv(t, "free", Config{Refused: func(code string) {
		mu.Lock()
		defer mu.Unlock()
		heard[code]++
	}})
	pw := e.inbox.SMTPPassword
	r := e.dialRaw(t, false)
	r.must(250, "", "EHLO client.test")
	r.startTLS(e.clientTLS())
	r.must(250, "", "EHLO client.test")
	r.must(535, "5.7.8", "AUTH PLAIN %s", plainIR(e.inbox.ID, pw+"x"))
	r.must(235, "2.0.0", "AUTH PLAIN %s", plainIR(e.inbox.ID, pw))
	r.must(552, "5.3.4", "MAIL FROM:<a@example.com> SIZE=%d", 11<<20)
	r.must(250, "", "MAIL FROM:<a@example.com>")
	r.must(250, "", "RCPT TO:<b@example.com>")
	r.must(354, "", "DATA")
	r.must(250, "2.0.0", "Subject: fine\r\n\r\nfine\r\n.")
	mu.Lock()
	defer mu.Unlock()
	if want := map[string]int{"unauthorized": 1, "quota_exceeded": 1}; !maps.Equal(heard, want) {
		t.Errorf("heard %v, want %v", heard, want)
	}
}

// A message that finds no room in the ingest budget before its deadline is
// refused with 451 4.3.0 and not stored; with room again, it goes through.
func TestBudgetFullIsATemporaryRefusal(t *testing.T) {
	budget := admission.New(1 << 20)
	e := newEnv(t, "team", Config{Budget: budget, AdmissionWait: 50 * time.Millisecond})
	hold, err := budget.Reserve(t.Context(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	r := e.session(t)
	r.must(250, "", "MAIL FROM:<a@example.com>")
	r.must(250, "", "RCPT TO:<b@example.com>")
	if code, msg := r.data(crlf("Subject: no room\n\nbody\n")); code != 451 || !strings.HasPrefix(msg, "4.3.0 ") {
		t.Fatalf("DATA with the budget spent: %d %q", code, msg)
	}
	if n := e.count(t); n != 0 {
		t.Fatalf("%d stored", n)
	}
	hold.Release()
	r.must(250, "", "MAIL FROM:<a@example.com>")
	r.must(250, "", "RCPT TO:<b@example.com>")
	messageID(t)(r.data(crlf("Subject: room\n\nbody\n")))
}

// No log line, at any level, holds what a client sent as a password, even
// when it swapped user name and password.
func TestAuthLogsNoSecret(t *testing.T) {
	var logs bytes.Buffer
	e := newEnv(t, "team", Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	for _, pair := range [][2]string{
		{e.inbox.SMTPPassword, e.inbox.ID}, // swapped
		{e.inbox.ID, e.inbox.SMTPPassword + "x"},
	} {
		r := e.dialRaw(t, false)
		r.must(250, "", "EHLO client.test")
		r.startTLS(e.clientTLS())
		r.must(250, "", "EHLO client.test")
		r.must(535, "5.7.8", "AUTH PLAIN %s", plainIR(pair[0], pair[1]))
		r.must(221, "", "QUIT")
	}
	e.shutdown(t)
	if strings.Contains(logs.String(), e.inbox.SMTPPassword) {
		t.Errorf("a password reached the log:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "smtp auth failed") {
		t.Errorf("failed logins not logged:\n%s", logs.String())
	}
}

// The authentication deadline and a successful AUTH settle which came
// first once: a connection hung up on does not authenticate after all,
// and an authenticated one is not hung up on.
func TestAuthAndDeadlineSettleOnce(t *testing.T) {
	s := &Server{cfg: Config{Hostname: "capture.test", PreAuthTimeout: time.Hour}, conns: map[*conn]struct{}{}}
	newConn := func() (*conn, net.Conn) {
		client, server := net.Pipe()
		t.Cleanup(func() { client.Close(); server.Close() })
		c := &conn{Conn: server, srv: s}
		c.authBy.Store(time.Now().Add(time.Hour).UnixNano())
		c.authTimer = time.AfterFunc(time.Hour, func() {})
		return c, client
	}

	late, lateClient := newConn()
	go io.Copy(io.Discard, lateClient) // reads the 421
	late.authExpired()
	if s.authenticated(late) {
		t.Error("a connection hung up on at its deadline authenticated afterwards")
	}

	early, client := newConn()
	if !s.authenticated(early) {
		t.Fatal("a connection within its deadline did not authenticate")
	}
	early.authExpired()
	// Not hung up on: a read of its other end waits (until a deadline)
	// instead of meeting a 421 or the end of the connection.
	client.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := client.Read(make([]byte, 64)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("an authenticated connection was hung up on at its deadline: read %d, %v", n, err)
	}
}
