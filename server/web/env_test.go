package web_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/smtp"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/server"
	"github.com/capturedev/capture/server/certs"
	"github.com/capturedev/capture/server/servertest"
	"github.com/capturedev/capture/store"
)

// env is a real capture server on loopback ports over a fresh data dir.
type env struct {
	st   *store.Store
	boot store.Bootstrap
	srv  *server.Server
	base string // the web interface, http://127.0.0.1:port
	ca   *x509.CertPool
}

func start(t testing.TB) *env {
	t.Helper()
	st, boot := servertest.Open(t, "free")
	res, err := certs.Ensure(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := servertest.Config(t)
	cfg.TLSConfig = certs.ServerConfig(res.Certificate)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := server.Listen(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	pem, err := os.ReadFile(res.CAPath)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &env{st: st, boot: boot, srv: srv, base: srv.HTTPBase(), ca: pool}
}

// loginLink makes a one-time sign-in link, as `capture user login-link` does.
func (e *env) loginLink(t testing.TB) string {
	t.Helper()
	token, err := e.st.CreateLoginToken(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return e.base + "/login?token=" + token
}

// sendMail sends raw over SMTP with STARTTLS and AUTH as the inbox, as an
// application would.
func (e *env) sendMail(t testing.TB, inbox store.Inbox, from string, to []string, raw string) {
	t.Helper()
	c, err := smtp.Dial(e.srv.StartTLSAddrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.StartTLS(&tls.Config{ServerName: "localhost", RootCAs: e.ca}); err != nil {
		t.Fatal(err)
	}
	if err := c.Auth(smtp.PlainAuth("", inbox.ID, inbox.SMTPPassword, "127.0.0.1")); err != nil {
		t.Fatal(err)
	}
	if err := c.Mail(from); err != nil {
		t.Fatal(err)
	}
	for _, rcpt := range to {
		if err := c.Rcpt(rcpt); err != nil {
			t.Fatal(err)
		}
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, strings.ReplaceAll(raw, "\n", "\r\n"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	c.Quit()
}

// client is a browser-like HTTP client with cookies that does not follow
// redirects, so tests see them.
type client struct {
	*http.Client
	t    testing.TB
	base string
	// accept is the Accept header of requests that set none: a
	// browser's, or none at all for a program.
	accept string
}

// browserAccept is the Accept header of Chromium's navigations.
const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"

func (e *env) client(t testing.TB) *client {
	jar, _ := cookiejar.New(nil)
	return &client{Client: &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		t: t, base: e.base, accept: browserAccept}
}

// program is the client's cookies in a program's requests, which accept
// no HTML.
func (c *client) program() *client {
	p := *c
	p.accept = ""
	return &p
}

type response struct {
	*http.Response
	body string
}

func (c *client) do(method, path string, form url.Values, header http.Header) response {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	target := path
	if strings.HasPrefix(path, "/") {
		target = c.base + path
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if c.accept != "" {
		req.Header.Set("Accept", c.accept)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp, string(b)}
}

func (c *client) get(path string) response { return c.do("GET", path, nil, nil) }

func (c *client) post(path string, form url.Values) response { return c.do("POST", path, form, nil) }

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the form token a page carries.
func csrf(t testing.TB, page string) string {
	t.Helper()
	m := csrfInput.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf field in page:\n%s", page)
	}
	return m[1]
}

// signIn signs the client in with a one-time link and returns a page's
// CSRF token.
func (c *client) signIn(e *env) string {
	c.t.Helper()
	resp := c.get(e.loginLink(c.t) + "&next=%2Fprojects")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/projects" {
		c.t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.body)
	}
	return csrf(c.t, c.get("/projects").body)
}
