package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/smtp"
	"net/textproto"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capturedev/capture/server/certs"
	"github.com/capturedev/capture/server/servertest/logbuffer"
	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/pgtest"
	"github.com/capturedev/capture/store/storetest"
)

// firstWrite closes c at its first write: the banner has begun.
type firstWrite struct {
	once sync.Once
	c    chan struct{}
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.c) })
	return len(p), nil
}

// slowOpen is a serve whose database opens only when the test says so.
type slowOpen struct {
	srv      *Server
	entered  chan struct{} // the open has begun
	release  chan struct{} // lets it go on
	banner   *firstWrite
	log      *logbuffer.Buffer
	done     chan error
	cancel   context.CancelFunc
	caPEM    []byte // the CA of the SMTP certificate, given as --tls-cert
	dir      string
	database string
}

// startSlowOpen runs Serve on dir, its database opened by open once the
// test releases it (store.OpenDatabase when open is nil), and returns
// while the open waits.
func startSlowOpen(t *testing.T, dir string, open func(ctx context.Context, database, dir string) (*store.Store, error)) *slowOpen {
	t.Helper()
	return startSlowOpenCapped(t, dir, open, nil)
}

// startSlowOpenCapped is startSlowOpen with caps, when set, on the
// connections answered while opening.
func startSlowOpenCapped(t *testing.T, dir string, open func(ctx context.Context, database, dir string) (*store.Store, error),
	caps *openingCaps) *slowOpen {
	t.Helper()
	p := &slowOpen{entered: make(chan struct{}), release: make(chan struct{}), banner: &firstWrite{c: make(chan struct{})},
		log: &logbuffer.Buffer{}, done: make(chan error, 1), dir: dir}
	if pgtest.Requested() {
		p.database = storetest.PostgresDatabase(t)
	}
	if open == nil {
		open = func(ctx context.Context, database, dir string) (*store.Store, error) {
			return store.OpenDatabase(ctx, database, dir)
		}
	}
	tlsDir := t.TempDir()
	res, err := certs.Ensure(tlsDir, []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	p.caPEM, _ = os.ReadFile(res.CAPath)
	bound := make(chan *Server, 1)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	cfg := ServeConfig{
		Config: Config{
			HTTPAddr: "127.0.0.1:0", CaptureAddr: "127.0.0.1:0", EmailAPIAddr: "127.0.0.1:0",
			SMTPStartTLSAddrs: []string{"127.0.0.1:0"}, SMTPTLSAddrs: []string{"127.0.0.1:0"},
			SMTPHost: "localhost", ShutdownTimeout: 2 * time.Second,
			Logger: slog.New(slog.NewTextHandler(p.log, nil)),
		},
		DataDir: dir, Database: p.database,
		TLSCertFile: filepath.Join(tlsDir, certs.CertFile), TLSKeyFile: filepath.Join(tlsDir, certs.KeyFile),
		Banner:      p.banner,
		bound:       func(s *Server) { bound <- s },
		openingCaps: caps,
		openStore: func(ctx context.Context) (*store.Store, error) {
			close(p.entered)
			select {
			case <-p.release:
			case <-ctx.Done():
			}
			return open(ctx, p.database, dir)
		},
	}
	go func() { p.done <- Serve(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	})
	select {
	case p.srv = <-bound:
	case err := <-p.done:
		t.Fatalf("serve: %v", err)
	}
	<-p.entered
	return p
}

// opened lets the open finish and waits until the servers answer.
func (p *slowOpen) opened(t *testing.T) {
	t.Helper()
	close(p.release)
	select {
	case <-p.banner.c:
	case err := <-p.done:
		t.Fatalf("serve: %v; log:\n%s", err, p.log)
	}
}

func getURL(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	return request(t, http.MethodGet, url, "", nil)
}

func request(t *testing.T, method, url, body string, header http.Header) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// unavailableEnvelope reports whether an answer is 503 in capture's error
// envelope, code unavailable, with Retry-After, and returns its message.
func unavailableEnvelope(status int, h http.Header, body string) (string, bool) {
	var env struct {
		Error struct{ Code, Message string }
	}
	if status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || json.Unmarshal([]byte(body), &env) != nil ||
		env.Error.Code != "unavailable" {
		return "", false
	}
	return env.Error.Message, true
}

// smtpGreeting is the reply an SMTP listener greets with, in TLS when
// roots is set.
func smtpGreeting(t *testing.T, addr string, roots *x509.CertPool) (int, string) {
	t.Helper()
	var c net.Conn
	var err error
	if roots != nil {
		c, err = tls.DialWithDialer(&net.Dialer{Timeout: 30 * time.Second}, "tcp", addr,
			&tls.Config{ServerName: "localhost", RootCAs: roots})
	} else {
		c, err = net.DialTimeout("tcp", addr, 30*time.Second)
	}
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	code, msg, err := textproto.NewConn(c).ReadResponse(0)
	if err != nil && code == 0 {
		t.Fatalf("greeting of %s: %v", addr, err)
	}
	return code, msg
}

func legacyDataDir(t *testing.T) string {
	t.Helper()
	old, err := os.ReadFile(filepath.Join("..", "store", "testdata", "legacy", "v8-before-search.db"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, store.DBFile), old, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func listing(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil {
			fi, _ := d.Info()
			names = append(names, path+" "+fi.ModTime().String())
		}
		return nil
	})
	return names
}

// TestServeAnswersWhileItsDatabaseOpens: while the database opens (after
// an upgrade, its schema migrates, which takes a while on a large one),
// the listeners bound already answer: /healthz 200, /readyz and every
// other request 503 unavailable with Retry-After, the email API as when
// its database is unavailable, SMTP 421 at its greeting, writing nothing.
// Once open, the same ports serve, and what was accepted meanwhile gets
// its answer.
func TestServeAnswersWhileItsDatabaseOpens(t *testing.T) {
	upgrade := !pgtest.Requested()
	dir := t.TempDir()
	if upgrade {
		dir = legacyDataDir(t)
	}
	p := startSlowOpen(t, dir, nil)
	srv := p.srv
	before := listing(t, dir)

	if status, _, body := getURL(t, srv.HTTPBase()+"/healthz"); status != http.StatusOK || body != "ok" {
		t.Errorf("/healthz while opening: %d %q, want 200 ok", status, body)
	}
	status, h, body := getURL(t, srv.HTTPBase()+"/readyz")
	if _, ok := unavailableEnvelope(status, h, body); !ok {
		t.Errorf("/readyz while opening: %d %v %s, want 503 unavailable with Retry-After", status, h, body)
	}
	status, h, body = getURL(t, srv.APIBase()+"/inboxes")
	if _, ok := unavailableEnvelope(status, h, body); !ok {
		t.Errorf("the read API while opening: %d %v %s", status, h, body)
	}
	status, h, body = request(t, http.MethodPost, srv.CaptureBase()+"/whe_000000000000/hook", `{"a":1}`,
		http.Header{"Content-Type": {"application/json"}})
	msg, ok := unavailableEnvelope(status, h, body)
	if !ok {
		t.Errorf("a webhook while opening: %d %v %s, want 503 unavailable with Retry-After", status, h, body)
	}
	if upgrade && !strings.Contains(msg, "upgrading its database schema") {
		t.Errorf("a webhook while upgrading is told %q", msg)
	}
	// SendGrid's route, as when the database cannot be read: its shape,
	// 503, Retry-After.
	status, h, body = request(t, http.MethodPost, srv.EmailAPIBase()+"/v3/mail/send",
		`{"personalizations":[{"to":[{"email":"a@example.com"}]}],"from":{"email":"b@example.com"},"subject":"s","content":[{"type":"text/plain","value":"v"}]}`,
		http.Header{"Authorization": {"Bearer SG.inb_0000.secret"}, "Content-Type": {"application/json"}})
	if status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || !strings.Contains(body, "errors") {
		t.Errorf("the email API while opening: %d %v %s, want SendGrid's 503 with Retry-After", status, h, body)
	}

	startTLS := srv.StartTLSAddrs()[0].String()
	if code, msg := smtpGreeting(t, startTLS, nil); code != 421 || !strings.HasPrefix(msg, "4.3.0 localhost") {
		t.Errorf("SMTP greeting while opening: %d %q, want 421 4.3.0", code, msg)
	}
	_, err := smtp.Dial(startTLS)
	var tpErr *textproto.Error
	if !errors.As(err, &tpErr) || tpErr.Code != 421 {
		t.Errorf("net/smtp while opening: %v, want a 421", err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(p.caPEM)
	implicitTLS := srv.TLSAddrs()[0].String()
	if code, _ := smtpGreeting(t, implicitTLS, roots); code != 421 {
		t.Errorf("implicit-TLS SMTP greeting while opening: %d, want 421", code)
	}
	if upgrade && !strings.Contains(p.log.String(), "upgrading the database schema: answering 503 (SMTP 421) until it ends") {
		t.Errorf("logged:\n%s", p.log)
	}
	if after := listing(t, dir); !slices.Equal(before, after) {
		t.Errorf("the data dir changed while opening:\n%v\nthen\n%v", before, after)
	}

	// A connection accepted before the hand-over, its request not sent
	// yet, is answered too, by whichever server took it.
	pending, err := net.Dial("tcp", srv.CaptureAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer pending.Close()

	p.opened(t)

	io.WriteString(pending, "GET /whe_000000000000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	pending.SetDeadline(time.Now().Add(30 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(pending), nil); err != nil {
		t.Errorf("a connection made during the open: %v", err)
	} else {
		resp.Body.Close()
	}

	// The same ports, now served.
	if status, _, body := getURL(t, srv.HTTPBase()+"/readyz"); status != http.StatusOK {
		t.Errorf("/readyz once open: %d %s", status, body)
	}
	if status, _, body := getURL(t, srv.HTTPBase()+"/healthz"); status != http.StatusOK {
		t.Errorf("/healthz once open: %d %s", status, body)
	}
	if status, _, body := request(t, http.MethodPost, srv.CaptureBase()+"/whe_000000000000/hook", `{}`, nil); status != http.StatusNotFound {
		t.Errorf("a webhook to no endpoint once open: %d %s, want 404", status, body)
	}
	if status, _, body := request(t, http.MethodPost, srv.EmailAPIBase()+"/v3/mail/send", `{}`,
		http.Header{"Authorization": {"Bearer SG.inb_0000.secret"}}); status == http.StatusServiceUnavailable {
		t.Errorf("the email API once open: %d %s", status, body)
	}
	if code, msg := smtpGreeting(t, startTLS, nil); code != 220 {
		t.Errorf("SMTP greeting once open: %d %q, want 220", code, msg)
	}
	if code, msg := smtpGreeting(t, implicitTLS, roots); code != 220 {
		t.Errorf("implicit-TLS SMTP greeting once open: %d %q, want 220", code, msg)
	}
	p.cancel()
	if err := <-p.done; err != nil {
		t.Errorf("serve: %v", err)
	}
	p.done <- nil
}

// TestServeFailingToOpenClosesItsPorts: a database that does not open
// stops serve with its error, and every port it answered on while opening
// is closed.
func TestServeFailingToOpenClosesItsPorts(t *testing.T) {
	broken := errors.New("the disk is on fire")
	p := startSlowOpen(t, t.TempDir(), func(context.Context, string, string) (*store.Store, error) { return nil, broken })
	addrs := []string{p.srv.HTTPAddr().String(), p.srv.CaptureAddr().String(), p.srv.emailLn.Addr().String(),
		p.srv.StartTLSAddrs()[0].String(), p.srv.TLSAddrs()[0].String()}
	if status, _, _ := getURL(t, p.srv.HTTPBase()+"/healthz"); status != http.StatusOK {
		t.Errorf("/healthz while opening: %d", status)
	}
	close(p.release)
	if err := <-p.done; !errors.Is(err, broken) {
		t.Errorf("serve: %v, want the open's error", err)
	}
	p.done <- nil
	for _, a := range addrs {
		if c, err := net.Dial("tcp", a); err == nil {
			c.Close()
			t.Errorf("%s still open", a)
		}
	}
}

// TestServeStoppedMidUpgradeSaysItResumes: stopped while the schema
// upgrade runs, serve says the step was rolled back and resumes at the
// next start, not "open database …: context canceled".
func TestServeStoppedMidUpgradeSaysItResumes(t *testing.T) {
	p := startSlowOpen(t, t.TempDir(), func(ctx context.Context, _, dir string) (*store.Store, error) {
		<-ctx.Done()
		// As the store says it.
		return nil, fmt.Errorf("open database %s: %w", filepath.Join(dir, store.DBFile),
			&store.UpgradeInterruptedError{Step: "0009_packed_content.sql", Err: ctx.Err()})
	})
	p.cancel()
	close(p.release)
	err := <-p.done
	p.done <- nil
	want := "stopped while upgrading the database schema (at 0009_packed_content.sql): nothing of that step was kept; the upgrade resumes at the next start"
	if err == nil || err.Error() != want {
		t.Errorf("serve: %v, want %q", err, want)
	}
}

// TestOpeningCapsItsConnections: while the database opens, connections
// that send nothing (or never begin TLS) cannot pile up past the caps
// serving has: a new HTTP client displaces the oldest idle one and is
// answered, and SMTP past its cap is greeted 421 at once (plain) or closed
// (implicit TLS) instead of being held.
func TestOpeningCapsItsConnections(t *testing.T) {
	p := startSlowOpenCapped(t, t.TempDir(), nil, &openingCaps{http: 2, smtp: 2})
	srv := p.srv

	var idle []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", srv.HTTPAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	if status, _, body := getURL(t, srv.HTTPBase()+"/healthz"); status != http.StatusOK || body != "ok" {
		t.Errorf("/healthz past the cap of idle connections: %d %q", status, body)
	}
	// The oldest idle connection made room: it is closed.
	idle[0].SetReadDeadline(time.Now().Add(3 * time.Second))
	if n, err := idle[0].Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the oldest idle connection: read %d bytes, %v; want it closed at once", n, err)
	}

	// Two implicit-TLS connections that never say hello hold the SMTP
	// slots (each up to 5 s). One goroutine accepts, in the order the
	// connections were made.
	implicitTLS := srv.TLSAddrs()[0].String()
	for range 2 {
		c, err := net.Dial("tcp", implicitTLS)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	over, err := net.Dial("tcp", implicitTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	over.SetReadDeadline(time.Now().Add(3 * time.Second))
	if n, err := over.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("implicit TLS past the cap: read %d bytes, %v; want it closed at once", n, err)
	}
	if code, msg := smtpGreeting(t, srv.StartTLSAddrs()[0].String(), nil); code != 421 || !strings.HasPrefix(msg, "4.3.0 localhost") {
		t.Errorf("SMTP past the cap: %d %q, want the 421 still", code, msg)
	}
	p.opened(t)
}
