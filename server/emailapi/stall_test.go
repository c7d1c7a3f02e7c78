package emailapi_test

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	netsmtp "net/smtp"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/server/admission"
	"github.com/capturedev/capture/server/capture"
	"github.com/capturedev/capture/server/emailapi"
	"github.com/capturedev/capture/server/servertest"
	"github.com/capturedev/capture/server/smtp"
	"github.com/capturedev/capture/store"
)

// ingest is the email API, the webhook listener and an SMTP listener over
// one store, sharing one ingest budget as serve runs them.
type ingest struct {
	st      *store.Store
	boot    store.Bootstrap
	api     string // host:port
	webhook string // base URL of the bootstrapped endpoint
	smtp    string // host:port, AUTH allowed before TLS
}

func newIngest(t *testing.T, budget *admission.Budget, wait time.Duration) *ingest {
	t.Helper()
	st, boot := servertest.Open(t, "free")
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	in := &ingest{st: st, boot: boot}

	l := listen()
	api := emailapi.NewServer(emailapi.New(st, emailapi.Config{Budget: budget, AdmissionWait: wait}))
	go api.Serve(l)
	t.Cleanup(func() { api.Close() })
	in.api = l.Addr().String()

	l = listen()
	hooks := capture.NewServer(capture.New(st, capture.Config{Budget: budget, AdmissionWait: wait}))
	go hooks.Serve(l)
	t.Cleanup(func() { hooks.Close() })
	in.webhook = "http://" + l.Addr().String() + "/" + boot.Endpoint.ID

	l = listen()
	mail := smtp.New(st, smtp.Config{Budget: budget, AdmissionWait: wait, AllowInsecureAuth: true,
		Logger: slog.New(slog.DiscardHandler)})
	served := make(chan error, 1)
	go func() { served <- mail.Serve(l, false) }()
	t.Cleanup(func() {
		mail.Close()
		<-served
	})
	in.smtp = l.Addr().String()
	return in
}

// stall sends a request's head and the first bytes of its body, and no
// more.
func (in *ingest) stall(t *testing.T, head, start string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", in.api)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head+"\r\n"+start); err != nil {
		t.Fatal(err)
	}
	return c
}

// stallReserved sends a request's head asking to be told to go on
// ("Expect: 100-continue"), waits for "100 Continue", which net/http sends
// on the handler's first read of the body, once it has reserved its first
// piece of the ingest budget, and then sends the first bytes of its body,
// and no more.
func (in *ingest) stallReserved(t *testing.T, head, start string) net.Conn {
	t.Helper()
	c := in.stall(t, head+"Expect: 100-continue\r\n", "")
	const goOn = "HTTP/1.1 100 Continue\r\n\r\n"
	got := make([]byte, len(goOn))
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != goOn {
		t.Fatalf("waiting for %q: got %q, %v", goOn, got, err)
	}
	c.SetReadDeadline(time.Time{})
	if _, err := io.WriteString(c, start); err != nil {
		t.Fatal(err)
	}
	return c
}

// answer reads the response to a stalled request.
func answer(t *testing.T, c net.Conn) (int, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sendSMTP sends one message through the SMTP listener and returns what
// went wrong, if anything.
func (in *ingest) sendSMTP() error {
	conn, err := net.Dial("tcp", in.smtp)
	if err != nil {
		return err
	}
	// The name given here is the one PlainAuth insists on.
	c, err := netsmtp.NewClient(conn, "localhost")
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Auth(netsmtp.PlainAuth("", in.boot.Inbox.ID, in.boot.Inbox.SMTPPassword, "localhost")); err != nil {
		return err
	}
	if err := c.Mail("app@example.com"); err != nil {
		return err
	}
	if err := c.Rcpt("alice@example.com"); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	io.WriteString(w, "Subject: by smtp\r\n\r\nhello\r\n")
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// TestStalledBodiesHoldLittle: clients that declare large batch bodies to
// the email API and then stall, as many as would together hold the whole
// ingest budget, hold only a first piece of it each, so that webhooks,
// SMTP messages and other API calls are still admitted at once; and they
// are cut off, and told so, once their bodies fall behind the minimum rate.
func TestStalledBodiesHoldLittle(t *testing.T) {
	const budgetSize = 64 << 20
	// Each declares a quarter of the budget: a Postmark batch within the
	// free plan's limit for one (two 10 MiB messages in base64).
	const stalled, declared = 4, budgetSize / 4
	budget := admission.New(budgetSize)
	in := newIngest(t, budget, 100*time.Millisecond)
	conns := make([]net.Conn, stalled)
	for i := range conns {
		conns[i] = in.stallReserved(t, fmt.Sprintf("POST /email/batch HTTP/1.1\r\nHost: x\r\nX-Postmark-Server-Token: %s\r\n"+
			"Content-Type: application/json\r\nContent-Length: %d\r\n", in.boot.Inbox.SMTPPassword, declared), `[{"From"`)
	}

	// Each has reserved its first piece (it was told to go on); real
	// sends must be admitted while they stall.
	req, _ := http.NewRequest("POST", "http://"+in.api+"/email", strings.NewReader(
		`{"From":"app@example.com","To":"alice@example.com","Subject":"by api","TextBody":"hello"}`))
	req.Header.Set("X-Postmark-Server-Token", in.boot.Inbox.SMTPPassword)
	req.Header.Set("Content-Type", "application/json")
	if r := do(t, req); r.status != http.StatusOK {
		t.Errorf("email API send while others stall: %d %s", r.status, r.body)
	}
	hook, err := http.Post(in.webhook, "application/json", strings.NewReader(strings.Repeat("x", 512<<10)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(hook.Body)
	hook.Body.Close()
	if hook.StatusCode != http.StatusOK {
		t.Errorf("webhook while email API bodies stall: %d %s", hook.StatusCode, b)
	}
	if err := in.sendSMTP(); err != nil {
		t.Errorf("SMTP message while email API bodies stall: %v", err)
	}

	for i, c := range conns {
		status, body := answer(t, c)
		// Postmark answers a body it cannot read with 422.
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, "arrived too slowly") {
			t.Errorf("stalled sender %d got %d %s, want 422 saying the body arrived too slowly", i, status, body)
		}
	}
	list, err := in.st.Messages(t.Context(), in.boot.Inbox.ID, store.MessageFilter{}, store.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.Items); n != 2 {
		t.Errorf("%d messages stored, want the API's and SMTP's", n)
	}
}

// TestStalledBodyIsCutOff: a body that stops coming, declared or chunked,
// is cut off and answered in the provider's shape, as a body the route
// cannot read, and nothing is stored.
func TestStalledBodyIsCutOff(t *testing.T) {
	in := newIngest(t, admission.New(64<<20), 0)
	pw := in.boot.Inbox.SMTPPassword
	basic := base64.StdEncoding.EncodeToString([]byte("api:" + pw))
	tests := []struct {
		name, route, auth, length string
		status                    int
	}{
		{"sendgrid", "/v3/mail/send", "Authorization: Bearer " + pw, "Content-Length: 1000000", http.StatusBadRequest},
		{"sendgrid chunked", "/v3/mail/send", "Authorization: Bearer " + pw, "Transfer-Encoding: chunked", http.StatusBadRequest},
		{"postmark", "/email", "X-Postmark-Server-Token: " + pw, "Content-Length: 1000000", http.StatusUnprocessableEntity},
		{"resend batch", "/emails/batch", "Authorization: Bearer " + pw, "Content-Length: 20000000", http.StatusBadRequest},
		{"mailgun", "/v3/mg.example.com/messages", "Authorization: Basic " + basic, "Content-Length: 1000000", http.StatusBadRequest},
	}
	conns := make([]net.Conn, len(tests))
	for i, tt := range tests {
		start := "{"
		if strings.HasPrefix(tt.length, "Transfer-Encoding") {
			start = "1\r\n{\r\n"
		}
		conns[i] = in.stall(t, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\n%s\r\nContent-Type: application/json\r\n%s\r\n",
			tt.route, tt.auth, tt.length), start)
	}
	for i, tt := range tests {
		status, body := answer(t, conns[i])
		if status != tt.status || !strings.Contains(body, "arrived too slowly") {
			t.Errorf("%s: got %d %s, want %d saying the body arrived too slowly", tt.name, status, body, tt.status)
		}
	}
	list, err := in.st.Messages(t.Context(), in.boot.Inbox.ID, store.MessageFilter{}, store.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.Items); n != 0 {
		t.Errorf("%d messages stored from stalled bodies", n)
	}
}
