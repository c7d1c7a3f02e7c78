package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	_ "github.com/jackc/pgx/v5/stdlib"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/datadir"
	"github.com/capturedev/capture/store/pgtest"
	"github.com/capturedev/capture/store/storetest"
)

// serveProc is the real binary's `serve` on free loopback ports.
type serveProc struct {
	t      testing.TB
	bin    string
	dir    string
	dbArgs []string // --database URL, or nothing
	// smtp and smtpTLS are the STARTTLS and implicit TLS listeners.
	smtpTLS string
	stdout  io.Reader
	cmd     *exec.Cmd
	banner  map[string]string
	smtp    string // STARTTLS address
	done    chan error

	mu     sync.Mutex
	stderr bytes.Buffer
	logged chan struct{} // closed, and replaced, at each write to stderr
}

var (
	bannerRow = regexp.MustCompile(`^\s+(Read API|API key|Inbox|SMTP password|Capture URL|Email API|CA certificate|SMTP)\s+(.*)$`)
	smtpPorts = regexp.MustCompile(`STARTTLS: (\d+)`)
	tlsPorts  = regexp.MustCompile(`\sTLS: (\d+)`)
)

// startServe runs `capture serve` on dir (a new data dir unless it holds
// one) and waits for its banner. It is stopped when the test ends.
func startServe(t testing.TB, dir string, args ...string) *serveProc {
	t.Helper()
	p := launchServe(t, dir, args...)
	p.awaitBanner()
	return p
}

// launchServe starts `capture serve` on dir; awaitBanner waits for it to
// serve. args with --database name the database, else the tests' backend
// gives dir one.
func launchServe(t testing.TB, dir string, args ...string) *serveProc {
	t.Helper()
	return launchServeUnder(t, dir, nil, args...)
}

// launchServeUnder is launchServe run by the command under (given the
// binary and its arguments after it), or directly when under is nil.
func launchServeUnder(t testing.TB, dir string, under []string, args ...string) *serveProc {
	t.Helper()
	p := &serveProc{t: t, bin: captureBinary(t), dir: dir, banner: map[string]string{}, done: make(chan error, 1),
		logged: make(chan struct{})}
	if i := slices.Index(args, "--database"); i >= 0 {
		p.dbArgs = args[i : i+2]
	} else {
		p.dbArgs = databaseArgs(t, dir)
		args = append(p.dbArgs, args...)
	}
	argv := append([]string{p.bin, "serve", "--data-dir", dir, "--http", "127.0.0.1:0",
		"--capture", "127.0.0.1:0", "--smtp-starttls", "127.0.0.1:0", "--smtp-tls", "127.0.0.1:0", "--email-api", "127.0.0.1:0"}, args...)
	argv = append(slices.Clone(under), argv...)
	p.cmd = exec.Command(argv[0], argv[1:]...)
	var err error
	if p.stdout, err = p.cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = stderrWriter{p}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *serveProc) awaitBanner() {
	t, stdout := p.t, p.stdout
	t.Helper()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := bannerRow.FindStringSubmatch(sc.Text()); m != nil {
			p.banner[m[1]] = strings.Fields(m[2])[0]
			if m := smtpPorts.FindStringSubmatch(m[2]); m != nil {
				p.smtp = "127.0.0.1:" + m[1]
			}
			if m := tlsPorts.FindStringSubmatch(m[2]); m != nil {
				p.smtpTLS = "127.0.0.1:" + m[1]
			}
		}
		if strings.HasPrefix(strings.TrimSpace(sc.Text()), "CA certificate") {
			break
		}
	}
	go io.Copy(io.Discard, stdout)
	if p.banner["Read API"] == "" || p.smtp == "" {
		t.Fatalf("serve printed no banner; stderr:\n%s", p.logs())
	}
}

// stderrWriter keeps what serve logs, and tells awaitLog of each write.
type stderrWriter struct{ p *serveProc }

func (w stderrWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	close(w.p.logged)
	w.p.logged = make(chan struct{})
	return w.p.stderr.Write(b)
}

// awaitLog waits until serve has logged a line holding s, and returns it.
func (p *serveProc) awaitLog(s string) string {
	p.t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		p.mu.Lock()
		logs, logged := p.stderr.String(), p.logged
		p.mu.Unlock()
		for line := range strings.Lines(logs) {
			if strings.Contains(line, s) && strings.HasSuffix(line, "\n") {
				return strings.TrimSuffix(line, "\n")
			}
		}
		select {
		case <-logged:
		case <-timeout:
			p.t.Fatalf("serve did not log %q; stderr:\n%s", s, logs)
		}
	}
}

func (p *serveProc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// stop signals serve and waits for it to exit.
func (p *serveProc) stop(sig os.Signal) {
	p.t.Helper()
	p.cmd.Process.Signal(sig)
	if err := p.exited(30 * time.Second); err != nil {
		p.t.Errorf("serve exited with %v; stderr:\n%s", err, p.logs())
	}
}

// exited waits up to bound for serve to exit, and returns how it did.
func (p *serveProc) exited(bound time.Duration) error {
	p.t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(bound):
		p.t.Fatalf("serve did not stop within %s; stderr:\n%s", bound, p.logs())
		return nil
	}
}

// admin runs an administration command on the data dir.
func (p *serveProc) admin(args ...string) string {
	p.t.Helper()
	out, err := exec.Command(p.bin, append(append(args, "--data-dir", p.dir), p.dbArgs...)...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("capture %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (p *serveProc) captureURL() string { return p.banner["Capture URL"] }

// endpointID is the id of the default endpoint, the last segment of its
// capture URL.
func (p *serveProc) endpointID() string {
	u := p.captureURL()
	return u[strings.LastIndex(u, "/")+1:]
}

// smtpSession is an SMTP client over STARTTLS, authenticated as user.
func (p *serveProc) smtpSession(user, pass string) (*textproto.Conn, error) {
	return smtpSession(p.smtp, []byte(p.admin("ca")), user, pass)
}

// smtpSession is an SMTP client of the STARTTLS listener at addr, which
// trusts the CA certificate caPEM, authenticated as user.
func smtpSession(addr string, caPEM []byte, user, pass string) (*textproto.Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	tp := textproto.NewConn(nc)
	step := func(code int, format string, args ...any) error {
		if format != "" {
			if err := tp.PrintfLine(format, args...); err != nil {
				return err
			}
		}
		_, _, err := tp.ReadResponse(code)
		return err
	}
	if err := step(220, ""); err != nil {
		return nil, err
	}
	if err := step(250, "EHLO client.test"); err != nil {
		return nil, err
	}
	if err := step(220, "STARTTLS"); err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	tc := tls.Client(nc, &tls.Config{RootCAs: roots, ServerName: "localhost"})
	if err := tc.Handshake(); err != nil {
		return nil, err
	}
	tp = textproto.NewConn(tc)
	if err := step(250, "EHLO client.test"); err != nil {
		return nil, err
	}
	ir := base64.StdEncoding.EncodeToString([]byte("\x00" + user + "\x00" + pass))
	if err := step(235, "AUTH PLAIN %s", ir); err != nil {
		return tp, err
	}
	return tp, nil
}

// sendData runs one transaction on tp and returns the reply to its DATA.
func sendData(tp *textproto.Conn, body string) (int, string, error) {
	for _, cmd := range []string{"MAIL FROM:<a@example.com>", "RCPT TO:<b@example.com>"} {
		if err := tp.PrintfLine("%s", cmd); err != nil {
			return 0, "", err
		}
		if _, _, err := tp.ReadResponse(250); err != nil {
			return 0, "", err
		}
	}
	if err := tp.PrintfLine("DATA"); err != nil {
		return 0, "", err
	}
	if _, _, err := tp.ReadResponse(354); err != nil {
		return 0, "", err
	}
	w := tp.DotWriter()
	io.WriteString(w, body)
	if err := w.Close(); err != nil {
		return 0, "", err
	}
	return tp.ReadResponse(0)
}

// post sends a webhook and returns its status, headers and body.
func post(url, body string) (int, http.Header, string, error) {
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}

// databases maps a data dir of these tests to the PostgreSQL database its
// serve runs on when the tests run on PostgreSQL.
var databases sync.Map

// database is what dir's serve stores in: its SQLite file, or the
// PostgreSQL database made for it.
func database(t testing.TB, dir string) string {
	t.Helper()
	if !pgtest.Requested() {
		return filepath.Join(dir, store.DBFile)
	}
	if url, ok := databases.Load(dir); ok {
		return url.(string)
	}
	url := storetest.PostgresDatabase(t)
	databases.Store(dir, url)
	return url
}

// databaseArgs are the flags that run a command on dir's database.
func databaseArgs(t testing.TB, dir string) []string {
	if !pgtest.Requested() {
		return nil
	}
	return []string{"--database", database(t, dir)}
}

// requestsStored counts an endpoint's captured requests, straight from the
// database once serve has stopped.
func requestsStored(t *testing.T, dir, endpointID string) []string {
	t.Helper()
	st, err := store.Open(t.Context(), database(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l, err := st.Requests(t.Context(), endpointID, store.RequestFilter{}, store.Page{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, r := range l.Items {
		paths = append(paths, r.Path)
	}
	return paths
}

// isUnavailable checks a refusal: 503, Retry-After, the error envelope
// with code "unavailable".
func isUnavailable(status int, h http.Header, body string) bool {
	var env struct{ Error struct{ Code string } }
	return status == http.StatusServiceUnavailable && h.Get("Retry-After") != "" &&
		json.Unmarshal([]byte(body), &env) == nil && env.Error.Code == "unavailable"
}

// Nothing is acknowledged that was not committed: with the database locked
// by another process past 5 s a webhook gets 503 and a message 451 4.3.0;
// senders still waiting when serve stops get 503, never an empty 200; a
// delayed custom response already committed gets its own status at once.
func TestServeNeverAcknowledgesWhatItCannotCommit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, dir)
	defaultEndpoint := p.endpointID()
	var slow struct{ ID string }
	if err := json.Unmarshal([]byte(p.admin("endpoint", "create", "--name", "slow", "--json")), &slow); err != nil {
		t.Fatal(err)
	}
	p.admin("endpoint", "set", slow.ID, "--response-status", "202", "--response-body", "later", "--response-delay", "10s")
	captureBase := p.captureURL()[:strings.LastIndex(p.captureURL(), "/")]

	type answer struct {
		status int
		header http.Header
		body   string
		err    error
	}
	delayed := make(chan answer, 1)
	go func() {
		s, h, b, err := post(captureBase+"/"+slow.ID+"/delayed", "{}")
		delayed <- answer{s, h, b, err}
	}()
	// It is committed (and acknowledged after its delay) before the lock.
	req, _ := http.NewRequest("GET", p.banner["Read API"]+"/endpoints/"+slow.ID+"/requests?wait=20", nil)
	req.Header.Set("Authorization", "Bearer "+p.banner["API key"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	// Another process takes the write lock and keeps it: SQLite's, or on
	// PostgreSQL the row every write transaction reads.
	driver, source, take := "sqlite", "file:"+filepath.Join(dir, store.DBFile), "BEGIN EXCLUSIVE"
	if pgtest.Requested() {
		driver, source, take = "pgx", database(t, dir), "BEGIN; LOCK TABLE settings_version IN ACCESS EXCLUSIVE MODE"
	}
	db, err := sql.Open(driver, source)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lock, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(t.Context(), take); err != nil {
		t.Fatal(err)
	}
	unlocked := false
	unlock := func() {
		if !unlocked {
			lock.ExecContext(context.Background(), "ROLLBACK")
			lock.Close()
			unlocked = true
		}
	}
	defer unlock()

	var wg sync.WaitGroup
	wg.Go(func() {
		status, h, body, err := post(p.captureURL()+"/locked", "{}")
		if err != nil || !isUnavailable(status, h, body) {
			t.Errorf("webhook under a held lock: %d %v %q %v, want 503 unavailable with Retry-After", status, h, body, err)
		}
	})
	wg.Go(func() {
		tp, err := p.smtpSession(p.banner["Inbox"], p.banner["SMTP password"])
		if err != nil {
			t.Errorf("smtp: %v", err)
			return
		}
		defer tp.Close()
		code, msg, _ := sendData(tp, "Subject: locked\r\n\r\nbody\r\n")
		if code != 451 || !strings.HasPrefix(msg, "4.3.0") {
			t.Errorf("DATA under a held lock: %d %q, want 451 4.3.0", code, msg)
		}
	})
	wg.Wait()

	// Senders that are waiting for their commit when serve stops.
	answers := make(chan answer, 20)
	var sent sync.WaitGroup
	// The body waits for "100 Continue", which net/http sends once the
	// handler reads it: a request merely on the wire may not have been
	// read yet when the stop begins, and a connection that has not begun
	// a request is closed then, unanswered, as it should be.
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{ExpectContinueTimeout: time.Minute}}
	for i := range cap(answers) {
		sent.Add(1)
		go func() {
			// Wait below until serve is reading every request, so that
			// it holds them all when it is told to stop.
			reading := sync.OnceFunc(sent.Done)
			defer reading() // also if serve answers without reading
			ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
				Got100Continue: reading,
			})
			req, _ := http.NewRequestWithContext(ctx, "POST", fmt.Sprintf("%s/stopping/%d", p.captureURL(), i), strings.NewReader("{}"))
			req.Header.Set("Expect", "100-continue")
			resp, err := client.Do(req)
			if err != nil {
				answers <- answer{err: err}
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers <- answer{resp.StatusCode, resp.Header, string(b), err}
		}()
	}
	sent.Wait()
	p.stop(syscall.SIGTERM)
	unlock()
	refused := 0
	for range cap(answers) {
		a := <-answers
		switch {
		case a.err != nil:
			t.Logf("a sender lost its connection: %v", a.err)
		case isUnavailable(a.status, a.header, a.body):
			refused++
		default:
			t.Errorf("sender waiting at shutdown got %d %q, want 503 unavailable", a.status, a.body)
		}
	}
	if refused == 0 {
		t.Error("no sender was told 503")
	}
	if a := <-delayed; a.err != nil || a.status != 202 || a.body != "later" {
		t.Errorf("delayed custom response at shutdown: %d %q %v, want 202 \"later\"", a.status, a.body, a.err)
	}
	if got := requestsStored(t, dir, defaultEndpoint); len(got) != 0 {
		t.Errorf("refused requests stored: %v", got)
	}
	if got := requestsStored(t, dir, slow.ID); len(got) != 1 {
		t.Errorf("the acknowledged delayed request: stored %v", got)
	}
}

// An SMTP session still open when serve stops is told 421 4.3.2 before the
// connection closes, authenticated or not.
func TestServeTellsOpenSMTPSessionsAtShutdown(t *testing.T) {
	p := startServe(t, filepath.Join(t.TempDir(), "data"))
	authed, err := p.smtpSession(p.banner["Inbox"], p.banner["SMTP password"])
	if err != nil {
		t.Fatal(err)
	}
	defer authed.Close()
	code, msg, err := sendData(authed, "Subject: before\r\n\r\nbody\r\n")
	if err != nil || code != 250 {
		t.Fatalf("send: %d %q %v", code, msg, err)
	}
	plain, err := net.Dial("tcp", p.smtp)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plain.SetDeadline(time.Now().Add(30 * time.Second))
	fresh := textproto.NewConn(plain)
	if _, _, err := fresh.ReadResponse(220); err != nil {
		t.Fatal(err)
	}

	p.stop(syscall.SIGINT)
	for name, tp := range map[string]*textproto.Conn{"authenticated": authed, "unauthenticated": fresh} {
		code, msg, err := tp.ReadResponse(0)
		if code != 421 || !strings.HasPrefix(msg, "4.3.2") {
			t.Errorf("%s session at shutdown: %d %q %v, want 421 4.3.2", name, code, msg, err)
		}
		if _, err := tp.ReadLine(); err == nil {
			t.Errorf("%s session left open", name)
		}
	}
}

// Idle and NOOPing clients that never authenticate cannot lock senders
// out: past half the slots each new one displaces the oldest.
func TestServeIdleSMTPConnectionsNeverLockSendersOut(t *testing.T) {
	p := startServe(t, filepath.Join(t.TempDir(), "data"))
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range 300 { // more than the 256 slots
		c, err := net.Dial("tcp", p.smtp)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	tp, err := p.smtpSession(p.banner["Inbox"], p.banner["SMTP password"])
	if err != nil {
		t.Fatalf("a sender among 300 idle connections: %v", err)
	}
	defer tp.Close()
	if code, msg, err := sendData(tp, "Subject: through\r\n\r\nbody\r\n"); err != nil || code != 250 {
		t.Fatalf("send: %d %q %v", code, msg, err)
	}
}

// Under a low open-file limit serve says so, and sizes SMTP's connection
// slots to fit it: idle connections that never sign in cannot take the
// descriptors a webhook needs (before, 50 of them held one off until
// their 30 s sign-in deadline freed descriptors).
func TestServeUnderALowFileLimit(t *testing.T) {
	// The limit is set by a shell in the child alone, not in this process.
	p := launchServeUnder(t, filepath.Join(t.TempDir(), "data"), []string{"sh", "-c", `ulimit -n 64 && exec "$@"`, "sh"})
	p.awaitBanner()
	p.awaitLog("the open-file limit is 64: SMTP takes at most 8 connections (4 before signing in)")
	p.awaitLog("max_connections=8")
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range 50 {
		c, err := net.Dial("tcp", p.smtp)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	// Well inside the 30 s the idle connections could otherwise hold
	// their descriptors for.
	client := &http.Client{Timeout: 15 * time.Second}
	resp, err := client.Post(p.banner["Capture URL"], "text/plain", strings.NewReader("through"))
	if err != nil {
		t.Fatalf("webhook among 50 idle SMTP connections under a 64-file limit: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("webhook = %d, want 200", resp.StatusCode)
	}
	tp, err := p.smtpSession(p.banner["Inbox"], p.banner["SMTP password"])
	if err != nil {
		t.Fatalf("a sender among 50 idle connections under a 64-file limit: %v", err)
	}
	defer tp.Close()
	if code, msg, err := sendData(tp, "Subject: through\r\n\r\nbody\r\n"); err != nil || code != 250 {
		t.Fatalf("send: %d %q %v", code, msg, err)
	}
}

// A data dir others may enter is tightened with one warning; the database
// files are the owner's only; and at debug level no log line holds a
// password or a key, even when a client swaps user name and password.
func TestServeFilesAndLogsKeepSecrets(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	p := startServe(t, dir, "--log-level", "debug")
	inbox, password := p.banner["Inbox"], p.banner["SMTP password"]
	if tp, err := p.smtpSession(password, inbox); err == nil || !strings.Contains(err.Error(), "535") {
		t.Errorf("swapped credentials: %v, want 535", err)
	} else if tp != nil {
		tp.Close()
	}
	if tp, err := p.smtpSession(inbox, password+"x"); err == nil {
		t.Error("wrong password accepted")
	} else if tp != nil {
		tp.Close()
	}
	tp, err := p.smtpSession(inbox, password)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, err := sendData(tp, "Subject: s\r\n\r\nbody\r\n"); err != nil || code != 250 {
		t.Fatalf("send: %d %v", code, err)
	}
	tp.Close()
	if status, _, _, err := post(p.captureURL(), `{"password":"not logged either"}`); err != nil || status != 200 {
		t.Fatalf("webhook: %d %v", status, err)
	}

	// On PostgreSQL serve keeps no files: the data dir is not its.
	if !pgtest.Requested() {
		for _, name := range []string{store.DBFile, store.DBFile + "-wal", store.DBFile + "-shm"} {
			if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: %v %v, want mode 0600", name, fi.Mode(), err)
			}
		}
		if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
			t.Errorf("data dir mode %v, want 0700", fi.Mode().Perm())
		}
	}
	p.stop(syscall.SIGTERM)
	logs := p.logs()
	if n := strings.Count(logs, "data dir "+dir); !pgtest.Requested() && (n != 1 || !strings.Contains(logs, "tightened to 0700")) {
		t.Errorf("want one warning about the data dir, got %d:\n%s", n, logs)
	}
	for what, secret := range map[string]string{"SMTP password": password, "API key": p.banner["API key"],
		"webhook body": "not logged either"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the %s is in the log:\n%s", what, logs)
		}
	}
	if !strings.Contains(logs, "smtp auth failed") {
		t.Errorf("debug log without the failed logins:\n%s", logs)
	}
}

// `capture endpoint set` from another process reaches the very next
// capture.
func TestServeEndpointSettingsTakeEffectAtOnce(t *testing.T) {
	p := startServe(t, filepath.Join(t.TempDir(), "data"))
	id := p.endpointID()
	if status, _, body, err := post(p.captureURL(), "{}"); err != nil || status != 200 || !strings.Contains(body, `"id":"req_`) {
		t.Fatalf("default: %d %q %v", status, body, err)
	}
	for i, want := range []struct {
		args   []string
		status int
		body   string
	}{
		{[]string{"--response-status", "201", "--response-body", "made"}, 201, "made"},
		{[]string{"--response-status", "418", "--response-body", "teapot"}, 418, "teapot"},
		{[]string{"--response-status", "200", "--response-body", ""}, 200, `{"id":"req_`},
	} {
		p.admin(append([]string{"endpoint", "set", id}, want.args...)...)
		status, _, body, err := post(p.captureURL(), "{}")
		if err != nil || status != want.status || !strings.HasPrefix(body, want.body) {
			t.Errorf("change %d: the next capture got %d %q %v, want %d %q", i, status, body, err, want.status, want.body)
		}
	}
}

// BenchmarkServeStop measures how long serve takes to stop on SIGINT when
// idle but for connections that never sent anything (a browser's
// preconnect, a client about to send): SPEC §3 wants under 1 s.
//
//	go test -run '^$' -bench ServeStop -benchtime 5x ./server/
func BenchmarkServeStop(b *testing.B) {
	bin := captureBinary(b)
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		cmd := exec.Command(bin, "serve", "--data-dir", dir, "--http", "127.0.0.1:0", "--capture", "127.0.0.1:0",
			"--smtp-starttls", "127.0.0.1:0", "--smtp-tls", "127.0.0.1:0", "--email-api", "127.0.0.1:0")
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		var addrs []string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := bannerRow.FindStringSubmatch(sc.Text()); m != nil && (m[1] == "Read API" || m[1] == "Capture URL") {
				u := strings.Fields(m[2])[0]
				addrs = append(addrs, strings.SplitN(strings.TrimPrefix(u, "http://"), "/", 2)[0])
			}
			if strings.Contains(sc.Text(), "CA certificate") {
				break
			}
		}
		go io.Copy(io.Discard, stdout)
		var conns []net.Conn
		for _, a := range addrs {
			c, err := net.Dial("tcp", a)
			if err != nil {
				b.Fatal(err)
			}
			conns = append(conns, c)
		}
		b.StartTimer()
		cmd.Process.Signal(syscall.SIGINT)
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		for _, c := range conns {
			c.Close()
		}
	}
}

// TestServeOneServerPerDataDir: a second serve on a data dir already
// served is refused before it announces anything, so the clients keep
// following the first; once the first has stopped, it may start.
func TestServeOneServerPerDataDir(t *testing.T) {
	if pgtest.Requested() {
		t.Skip("replicas of a shared database may run side by side")
	}
	t.Parallel()
	dir := t.TempDir()
	first := startServe(t, dir)
	creds, err := os.ReadFile(filepath.Join(dir, "credentials.json"))
	if err != nil {
		t.Fatal(err)
	}
	second := launchServe(t, dir)
	select {
	case err := <-second.done:
		second.done <- err
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("second serve exited with %v, want code 1", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("second serve on the same data dir kept running")
	}
	if logs := second.logs(); !strings.Contains(logs, "in use by another `capture serve`") || strings.Count(logs, "\n") != 1 {
		t.Errorf("second serve said %q, want one line saying the data dir is in use", logs)
	}
	if now, err := os.ReadFile(filepath.Join(dir, "credentials.json")); err != nil || !bytes.Equal(now, creds) {
		t.Errorf("credentials.json changed: %s (%v), was %s", now, err, creds)
	}
	if out := first.admin("inbox", "list"); !strings.Contains(out, strings.TrimPrefix(first.smtp, "127.0.0.1:")) {
		t.Errorf("inbox list no longer names the first serve's SMTP port %s:\n%s", first.smtp, out)
	}

	first.stop(os.Interrupt)
	third := startServe(t, dir)
	third.stop(os.Interrupt)
}

// TestServeInUseWhileTheFirstOpensItsDatabase: a serve still opening its
// database (an upgrade's migrations hold SQLite's write lock) already holds
// the data dir, so a second one says the dir is in use at once instead of
// waiting out the database's lock and reporting it locked.
func TestServeInUseWhileTheFirstOpensItsDatabase(t *testing.T) {
	if pgtest.Requested() {
		t.Skip("replicas of a shared database may run side by side")
	}
	t.Parallel()
	dir := t.TempDir()
	startServe(t, dir).stop(os.Interrupt)

	// Stand in for the first serve mid-upgrade: its data-dir lock, and a
	// write transaction open on its database.
	release, err := datadir.Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	db, err := sql.Open("sqlite", filepath.Join(dir, store.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), "ROLLBACK")

	second := launchServe(t, dir)
	select {
	case err := <-second.done:
		second.done <- err
	case <-time.After(30 * time.Second):
		t.Fatal("second serve kept running")
	}
	if logs := second.logs(); !strings.Contains(logs, "in use by another `capture serve`") {
		t.Errorf("second serve said %q, want that the data dir is in use", logs)
	}
}
