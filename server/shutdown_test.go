package server_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capturedev/capture/store"
)

// heldPost is a POST whose handler is running, half of its body sent:
// the server holds it in flight until finish sends the rest.
type heldPost struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
	rest []byte
}

// holdPost sends a POST's headers and, once the handler starts reading
// the body (net/http then answers Expect: 100-continue), half of it.
func holdPost(t *testing.T, target string, header http.Header, body []byte) *heldPost {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(time.Minute))
	var req bytes.Buffer
	fmt.Fprintf(&req, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nExpect: 100-continue\r\n",
		u.RequestURI(), u.Host, len(body))
	header.Write(&req)
	req.WriteString("\r\n")
	if _, err := conn.Write(req.Bytes()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	tp := textproto.NewReader(br)
	if line, err := tp.ReadLine(); err != nil || line != "HTTP/1.1 100 Continue" {
		t.Fatalf("POST %s: %q %v, want 100 Continue", u.Path, line, err)
	}
	if line, err := tp.ReadLine(); err != nil || line != "" {
		t.Fatalf("POST %s: %q %v after 100 Continue", u.Path, line, err)
	}
	half := len(body) / 2
	if _, err := conn.Write(body[:half]); err != nil {
		t.Fatal(err)
	}
	return &heldPost{t: t, conn: conn, br: br, rest: body[half:]}
}

// finish sends the rest of the body and reads the answer.
func (h *heldPost) finish() (int, string) {
	h.t.Helper()
	if _, err := h.conn.Write(h.rest); err != nil {
		h.t.Fatalf("rest of the body: %v", err)
	}
	resp, err := http.ReadResponse(h.br, nil)
	if err != nil {
		h.t.Fatalf("answer: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Requests in flight at SIGTERM, on the capture and email API listeners,
// are finished, committed and answered as usual, while waits in progress
// end at once with 503; then serve exits 0. The line logged at the
// signal counts what it finishes.
func TestServeFinishesRequestsInFlightAtShutdown(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, dir)
	inbox, key := p.banner["Inbox"], p.banner["API key"]

	webhook := holdPost(t, p.captureURL()+"/held", http.Header{"Content-Type": {"application/json"}},
		fmt.Appendf(nil, `{"pad":%q}`, strings.Repeat("w", 256<<10)))
	email := holdPost(t, p.banner["Email API"]+"/emails", http.Header{
		"Content-Type": {"application/json"}, "Authorization": {"Bearer " + p.banner["SMTP password"]}},
		fmt.Appendf(nil, `{"from":"a@example.com","to":"b@example.com","subject":"held","text":%q}`, strings.Repeat("e", 256<<10)))

	// Five waits for the project's four slots: once the fifth is refused,
	// four are waiting in the server.
	type answer struct {
		status int
		header http.Header
		body   string
		err    error
	}
	waits := make(chan answer, 5)
	for i := range 5 {
		go func() {
			req, _ := http.NewRequest("GET", fmt.Sprintf("%s/inboxes/%s/messages?subject=never-%d&wait=30", p.banner["Read API"], inbox, i), nil)
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
			if err != nil {
				waits <- answer{err: err}
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			waits <- answer{resp.StatusCode, resp.Header, string(b), err}
		}()
	}
	if a := <-waits; a.status != http.StatusTooManyRequests {
		t.Fatalf("fifth wait: %d %q %v, want 429", a.status, a.body, a.err)
	}

	p.cmd.Process.Signal(syscall.SIGTERM)
	// The waits end while the uploads are still held.
	for range 4 {
		if a := <-waits; a.err != nil || !isUnavailable(a.status, a.header, a.body) {
			t.Errorf("wait at shutdown: %d %q %v, want 503 unavailable", a.status, a.body, a.err)
		}
	}
	if status, body := webhook.finish(); status != 200 || !strings.Contains(body, `"id":"req_`) {
		t.Errorf("webhook in flight at shutdown: %d %q, want 200 with its id", status, body)
	}
	if status, body := email.finish(); status != 200 || !strings.Contains(body, `"id"`) {
		t.Errorf("email in flight at shutdown: %d %q, want 200 with its id", status, body)
	}
	if err := p.exited(30 * time.Second); err != nil {
		t.Fatalf("serve exited with %v; stderr:\n%s", err, p.logs())
	}
	if strings.Contains(p.logs(), "timed out") {
		t.Errorf("shutdown ran into its timeout:\n%s", p.logs())
	}
	// The waits count too: they held a request each until they ended.
	// The refused fifth may still count: its client can read the 429
	// before net/http marks the connection idle again.
	if line := p.awaitLog("shutting down"); !strings.Contains(line, "finishing 6 in-flight connections (up to 10s)") &&
		!strings.Contains(line, "finishing 7 in-flight connections (up to 10s)") {
		t.Errorf("logged at the signal: %s", line)
	}

	if got := requestsStored(t, dir, p.endpointID()); len(got) != 1 || got[0] != "/held" {
		t.Errorf("webhooks stored: %v, want /held", got)
	}
	st, err := store.Open(t.Context(), database(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l, err := st.Messages(t.Context(), inbox, store.MessageFilter{}, store.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 || l.Items[0].Subject != "held" {
		t.Errorf("messages stored: %+v, want the one held", l.Items)
	}
}

// A client that connects to the implicit-TLS SMTP port and never sends a
// TLS hello (a port scan, a TCP health check) does not hold SIGTERM up:
// serve stops well within its 10 s bound, never near the 30 s the
// client's authentication deadline would take.
func TestServeStopsWithAConnectionBeforeItsTLSHandshake(t *testing.T) {
	p := startServe(t, filepath.Join(t.TempDir(), "data"))
	silent, err := net.Dial("tcp", p.smtpTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// Connections are accepted in order: once a later client is greeted,
	// the silent one has been accepted too.
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(p.admin("ca")))
	greeted, err := tls.Dial("tcp", p.smtpTLS, &tls.Config{RootCAs: roots, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer greeted.Close()
	greeted.SetDeadline(time.Now().Add(time.Minute))
	tp := textproto.NewConn(greeted)
	if _, _, err := tp.ReadResponse(220); err != nil {
		t.Fatal(err)
	}

	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.exited(15 * time.Second); err != nil {
		t.Fatalf("serve exited with %v; stderr:\n%s", err, p.logs())
	}
	if strings.Contains(p.logs(), "timed out") {
		t.Errorf("shutdown ran into its timeout:\n%s", p.logs())
	}
	if code, msg, err := tp.ReadResponse(0); code != 421 || !strings.HasPrefix(msg, "4.3.2") {
		t.Errorf("greeted client at shutdown: %d %q %v, want 421 4.3.2", code, msg, err)
	}
}

// A second Ctrl-C stops serve at once, with 130, rather than after the
// graceful stop's 10 s: the message still in DATA is not acknowledged
// (its client is told 421) and not stored.
func TestServeStopsAtOnceOnASecondSignal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, dir)
	tp, err := p.smtpSession(p.banner["Inbox"], p.banner["SMTP password"])
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	for _, step := range []struct {
		cmd  string
		code int
	}{{"MAIL FROM:<a@example.com>", 250}, {"RCPT TO:<b@example.com>", 250}, {"DATA", 354}} {
		if err := tp.PrintfLine("%s", step.cmd); err != nil {
			t.Fatal(err)
		}
		if _, _, err := tp.ReadResponse(step.code); err != nil {
			t.Fatalf("%s: %v", step.cmd, err)
		}
	}
	if err := tp.PrintfLine("Subject: cut off"); err != nil {
		t.Fatal(err)
	}

	p.cmd.Process.Signal(os.Interrupt)
	line := p.awaitLog("shutting down")
	if !strings.Contains(line, "finishing 1 in-flight connection (up to 10s); press Ctrl-C again to stop now") {
		t.Errorf("logged at the first signal: %s", line)
	}
	p.cmd.Process.Signal(os.Interrupt)
	err = p.exited(30 * time.Second)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 130 {
		t.Errorf("serve stopped by a second signal: %v, want exit status 130; stderr:\n%s", err, p.logs())
	}
	if logs := p.logs(); !strings.Contains(logs, "stopped at once") || strings.Contains(logs, "timed out") {
		t.Errorf("stderr:\n%s", logs)
	}
	if code, msg, _ := tp.ReadResponse(0); code == 250 {
		t.Errorf("the message cut off was acknowledged: %d %q", code, msg)
	}

	st, err := store.Open(t.Context(), database(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l, err := st.Messages(t.Context(), p.banner["Inbox"], store.MessageFilter{}, store.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 0 {
		t.Errorf("messages stored: %+v, want none", l.Items)
	}
}
