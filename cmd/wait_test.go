package cmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capturedev/capture/cmd/bench"
)

// served is a `capture serve` process of the real binary, on free
// loopback ports in a throwaway data dir, as `capture bench` runs one.
type served struct {
	*bench.Target
	api, key, inbox string
}

func serveBinary(t *testing.T) *served {
	t.Helper()
	target, err := bench.Start(t.Context(), binary)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := target.Stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &served{Target: target, api: target.API, key: target.Key, inbox: target.InboxID}
}

// mail sends one message over STARTTLS, trusting the server's local CA,
// and returns once the server acknowledged it (after its commit).
func (s *served) mail(t *testing.T, to, subject, body string) {
	t.Helper()
	if err := s.send(to, subject, body); err != nil {
		t.Fatal(err)
	}
}

func (s *served) send(to, subject, body string) error {
	msg := "From: App <app@example.com>\r\nTo: " + to + "\r\nSubject: " + subject + "\r\n\r\n" +
		strings.ReplaceAll(body, "\n", "\r\n")
	return s.SendMail("app@example.com", strings.Trim(to[strings.LastIndex(to, " ")+1:], "<>"), []byte(msg))
}

// hook posts a webhook to the endpoint and returns its id.
func (s *served) hook(t *testing.T, method, target string, body []byte) string {
	t.Helper()
	req, _ := http.NewRequest(method, s.CaptureURL+target, bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != 200 {
		t.Fatalf("capture answered %d, %v", resp.StatusCode, err)
	}
	return v.ID
}

// get calls the read API directly.
func (s *served) get(t *testing.T, path string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", s.api+path, nil)
	req.Header.Set("Authorization", "Bearer "+s.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// run is one `capture wait` as a script runs it: environment with the key,
// stdout and stderr apart.
type waitRun struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	code           int
}

func (s *served) start(t *testing.T, api string, args ...string) *waitRun {
	t.Helper()
	r := &waitRun{done: make(chan struct{})}
	r.cmd = exec.Command(binary, append(append([]string{"wait"}, args...), "--api", api)...)
	r.cmd.Env = append(cleanEnv(), "CAPTURE_API_KEY="+s.key, "CAPTURE_DATA_DIR="+t.TempDir())
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r.cmd.Wait()
		r.code = r.cmd.ProcessState.ExitCode()
		close(r.done)
	}()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		<-r.done
	})
	return r
}

func (r *waitRun) wait(t *testing.T) *waitRun {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("capture wait still running after 60 s; stderr: %s", r.stderr.String())
	}
	return r
}

// waitNow runs `capture wait` to its end against the server.
func (s *served) waitNow(t *testing.T, args ...string) *waitRun {
	t.Helper()
	return s.start(t, s.api, args...).wait(t)
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CAPTURE_") {
			env = append(env, kv)
		}
	}
	return env
}

// holding is a proxy to the read API that says when a list call asking to
// hold arrives: a `capture wait` started through it is then past its start
// and waiting, so what is captured next is certainly new to it.
type holding struct {
	api   string
	calls chan string
}

func (s *served) holdingProxy(t *testing.T) *holding {
	u, _ := url.Parse(strings.TrimSuffix(s.api, "/api/v1"))
	rp := httputil.NewSingleHostReverseProxy(u)
	h := &holding{calls: make(chan string, 100)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if w := r.URL.Query().Get("wait"); w != "" && w != "0" {
			h.calls <- r.URL.RawQuery
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	h.api = srv.URL + "/api/v1"
	return h
}

func (h *holding) held(t *testing.T) string {
	t.Helper()
	select {
	case q := <-h.calls:
		return q
	case <-time.After(30 * time.Second):
		t.Fatal("capture wait never started a held poll")
	}
	return ""
}

func (r *waitRun) expect(t *testing.T, code int, stdout, stderrContains string) {
	t.Helper()
	if r.code != code || r.stdout.String() != stdout || !strings.Contains(r.stderr.String(), stderrContains) {
		t.Errorf("capture %s\nexit %d, stdout %q, stderr %q\nwant exit %d, stdout %q, stderr containing %q",
			strings.Join(r.cmd.Args[1:], " "), r.code, r.stdout.String(), r.stderr.String(), code, stdout, stderrContains)
	}
	if code == 0 && r.stderr.Len() > 0 {
		t.Errorf("stderr on success: %q", r.stderr.String())
	}
}

func TestWaitEmail(t *testing.T) {
	s := serveBinary(t)
	s.mail(t, "alice@example.com", "Old news", "From before the wait.")

	// What was there before the start never counts.
	s.waitNow(t, "email", "--to", "alice@example.com", "--timeout", "1s").
		expect(t, 1, "", "no email to alice@example.com within 1s")

	// A --timeout shorter than a round trip to the API is the wait's own:
	// it ends as any wait that found nothing (exit 1), after one look at
	// what is there, and an inbox that does not exist is still named.
	s.waitNow(t, "email", "--to", "alice@example.com", "--timeout", "1ms").
		expect(t, 1, "", "capture: no email to alice@example.com within 1ms\n")
	s.waitNow(t, "email", "--to", "alice@example.com", "--since", "1m", "--print", "subject", "--timeout", "1ns").
		expect(t, 0, "Old news\n", "")
	s.waitNow(t, "email", "--inbox", "nope", "--timeout", "1ms").expect(t, 2, "", `no inbox "nope"`)
	// An --api that is another listener says so.
	other := s.CaptureURL[:strings.Index(s.CaptureURL, "/whe_")] + "/api/v1"
	s.start(t, other, "email", "--timeout", "1s").wait(t).
		expect(t, 2, "", other+" does not serve the read API (want a URL ending in /api/v1)")

	// The confirmation email arrives while the wait holds: its link is
	// printed alone. The timeout is beyond one long-poll.
	p := s.holdingProxy(t)
	r := s.start(t, p.api, "email", "--to", "alice@example.com", "--print", "link", "--match", "/confirm", "--timeout", "90s")
	if q := p.held(t); !strings.Contains(q, "wait=30") || !strings.Contains(q, "since=") {
		t.Errorf("held poll %q: want wait=30 with since", q)
	}
	s.mail(t, "Alice <alice@example.com>", "Confirm your address",
		"Welcome!\nhttps://app.test/home\nConfirm: https://app.test/confirm?t=abc123\n")
	r.wait(t).expect(t, 0, "https://app.test/confirm?t=abc123\n", "")

	// --since reaches back; of several matches the oldest is printed.
	s.waitNow(t, "email", "--to", "alice@", "--since", "1m", "--print", "subject").expect(t, 0, "Old news\n", "")
	s.waitNow(t, "email", "--subject", "confirm", "--since", "1m", "--print", "text").
		expect(t, 0, "Welcome!\nhttps://app.test/home\nConfirm: https://app.test/confirm?t=abc123\n", "")

	// A subject whose encoded words hold line breaks and a NUL still
	// prints on one line.
	s.mail(t, "alice@example.com", "=?utf-8?Q?Line_one=0D=0Aline=00two=0A?=", "Split.")
	s.waitNow(t, "email", "--subject", "line one", "--since", "1m", "--print", "subject").
		expect(t, 0, "Line one line two\n", "")

	r = s.waitNow(t, "email", "--subject", "confirm", "--since", "1m", "--print", "json")
	var m map[string]any
	if err := json.Unmarshal(r.stdout.Bytes(), &m); err != nil || m["subject"] != "Confirm your address" || m["body"] == nil {
		t.Errorf("--print json: %v, %s", err, r.stdout.String())
	}
	id, _ := m["id"].(string)
	s.waitNow(t, "email", "--subject", "confirm", "--since", "1m").expect(t, 0, id+"\n", "")

	// Arrived, but without the part: exit 3 and its id on stderr.
	s.waitNow(t, "email", "--subject", "confirm", "--since", "1m", "--print", "link", "--match", "/reset").
		expect(t, 3, "", id)
	s.waitNow(t, "email", "--subject", "confirm", "--since", "1m", "--print", "html").expect(t, 3, "", id)

	// Wrong usage and configuration: exit 2 and one line.
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"email", "--print", "body"}, "--print"},
		{[]string{"email", "--kind", "verify"}, "--print link"},
		{[]string{"email", "--print", "link", "--kind", "confirm"}, "--kind"},
		{[]string{"email", "--since", "yesterday"}, "--since"},
		// Read as the read API reads since=: RFC 3339's offsets stop at
		// 23 hours, and its fraction follows a period.
		{[]string{"email", "--since", "2026-01-02T15:04:05+24:00", "--timeout", "1s"}, `--since "2026-01-02T15:04:05+24:00": want an RFC 3339 time`},
		{[]string{"email", "--since", "2026-01-02T15:04:05,5Z", "--timeout", "1s"}, `--since "2026-01-02T15:04:05,5Z": want an RFC 3339 time`},
		// Well formed, but longer than a duration can be.
		{[]string{"email", "--since", "3000000h"}, `--since "3000000h": too far back: a duration back is at most 2562047h (about 292 years)`},
		{[]string{"email", "--timeout", "0s"}, "--timeout"},
		{[]string{"email", "--bogus"}, "bogus"},
		{[]string{"request", "--to", "x"}, "unknown flag"},
		{[]string{"email", "--inbox", "nope", "--timeout", "1s"}, `no inbox "nope"`},
	} {
		r := s.waitNow(t, tt.args...)
		if r.code != 2 || r.stdout.Len() > 0 || !strings.Contains(r.stderr.String(), tt.want) {
			t.Errorf("capture wait %v: exit %d, stdout %q, stderr %q; want 2 and %q", tt.args, r.code, r.stdout.String(), r.stderr.String(), tt.want)
		}
	}
	if r := capture(t, "wait", "message"); r.code != 2 || !strings.Contains(r.stderr, `unknown command "message"`) {
		t.Errorf("wait message: %+v", r)
	}
	noKey := exec.Command(binary, "wait", "email", "--data-dir", t.TempDir())
	noKey.Env = cleanEnv()
	out, err := noKey.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "no API key") {
		t.Errorf("no key: %v, %s", err, out)
	}
	// In PostgreSQL mode there is no credentials.json to save a key in.
	noKey = exec.Command(binary, "wait", "email", "--data-dir", t.TempDir())
	noKey.Env = append(cleanEnv(), "CAPTURE_DATABASE_URL=postgres://capture@localhost/capture")
	out, err = noKey.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 ||
		!strings.Contains(string(out), "no API key: set CAPTURE_API_KEY; with $CAPTURE_DATABASE_URL set, serve writes no credentials.json") {
		t.Errorf("no key in PostgreSQL mode: %v, %s", err, out)
	}
	s.start(t, "http://127.0.0.1:1/api/v1", "email", "--timeout", "5s").wait(t).expect(t, 2, "", "cannot reach the API")
}

func TestWaitRequest(t *testing.T) {
	s := serveBinary(t)
	earlier := s.hook(t, "POST", "/ci/1/hook", []byte("earlier run"))

	p := s.holdingProxy(t)
	r := s.start(t, p.api, "request", "--path", "/ci/2/", "--method", "put", "--print", "body", "--endpoint", "default")
	p.held(t)
	binaryBody := []byte{0xff, 0x00, 'a', '\n', 0xfe}
	s.hook(t, "POST", "/ci/2/hook", []byte("wrong method"))
	id := s.hook(t, "PUT", "/ci/2/hook?x=1", binaryBody)
	r.wait(t)
	if r.code != 0 || !bytes.Equal(r.stdout.Bytes(), binaryBody) {
		t.Errorf("--print body: exit %d, stdout %q, stderr %q; want the body byte for byte", r.code, r.stdout.Bytes(), r.stderr.String())
	}

	s.waitNow(t, "request", "--method", "PUT", "--since", "1m").expect(t, 0, id+"\n", "")
	s.waitNow(t, "request", "--method", "PUT", "--since", "1m", "--print", "path").expect(t, 0, "/ci/2/hook\n", "")
	r = s.waitNow(t, "request", "--path", "/ci/2/", "--since", time.Now().Add(-time.Minute).UTC().Format(time.RFC3339), "--print", "json")
	var m map[string]any
	if json.Unmarshal(r.stdout.Bytes(), &m) != nil || m["method"] != "POST" || m["body"] != "wrong method" {
		t.Errorf("--print json: %s", r.stdout.String())
	}
	// The earliest time there is still reaches back, as any other --since.
	s.waitNow(t, "request", "--path", "/ci/1/", "--since", "0001-01-01T00:00:00Z", "--timeout", "5s").expect(t, 0, earlier+"\n", "")
	s.waitNow(t, "request", "--path", "/ci/3/", "--timeout", "1500ms").
		expect(t, 1, "", "no request under /ci/3/ within 1.5s")
	s.waitNow(t, "request", "--endpoint", "whe_nope", "--timeout", "1s").expect(t, 2, "", `no endpoint "whe_nope"`)
	s.waitNow(t, "request", "--print", "subject").expect(t, 2, "", "--print")
}

// A webhook sent as soon as `capture wait … &` is started can be stored
// before the program has read the clock (loading it takes milliseconds);
// it still counts, as it came after the command was launched. The test
// makes that order certain: the wait is stopped as soon as it is started,
// the webhook is sent more than the kernel's 10 ms tick later, and only
// then does the wait go on.
func TestWaitCountsFromItsLaunch(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the launch time is read from /proc")
	}
	s := serveBinary(t)
	r := s.start(t, s.api, "request", "--path", "/ci/early/", "--timeout", "5s")
	launched := time.Now()
	if err := r.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for deadline := launched.Add(10 * time.Second); ; <-tick.C {
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.cmd.Process.Pid))
		i := bytes.LastIndexByte(stat, ')')
		if i > 0 && len(stat) > i+2 && stat[i+2] == 'T' && time.Since(launched) > 20*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the wait never stopped")
		}
	}
	id := s.hook(t, "POST", "/ci/early/hook", []byte("sent first"))
	if err := r.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	r.wait(t).expect(t, 0, id+"\n", "")
}

// --print code and --kind read what the server found at ingest (SPEC §15)
// from mail sent over SMTP; --q searches it (SPEC §16).
func TestWaitCodesKindsSearch(t *testing.T) {
	s := serveBinary(t)
	s.mail(t, "bob@example.com", "Your sign-in code",
		"Hi Bob,\n\nYour verification code is 482915. It expires in 10 minutes.\n\n"+
			"Or verify your email address: https://app.test/verify?token=Zq81xKp4\n"+
			"Unsubscribe: https://app.test/unsubscribe?u=1\n")
	s.mail(t, "bob@example.com", "Your receipt", "Order #77812 total $42.00. Thanks, zebra-quartz customer.\n")
	_, list := s.get(t, "/inboxes/"+s.inbox+"/messages?limit=2")
	items, _ := list["items"].([]any)
	if len(items) != 2 {
		t.Fatalf("messages: %v", list)
	}
	codeID := items[1].(map[string]any)["id"].(string)

	t.Run("code", func(t *testing.T) {
		s.waitNow(t, "email", "--subject", "sign-in", "--since", "1m", "--print", "code").expect(t, 0, "482915\n", "")
		s.waitNow(t, "email", "--subject", "receipt", "--since", "1m", "--print", "code").expect(t, 3, "", "no verification code")
	})
	t.Run("kind", func(t *testing.T) {
		s.waitNow(t, "email", "--subject", "sign-in", "--since", "1m", "--print", "link", "--kind", "verify").
			expect(t, 0, "https://app.test/verify?token=Zq81xKp4\n", "")
		s.waitNow(t, "email", "--subject", "sign-in", "--since", "1m", "--print", "link", "--kind", "unsubscribe").
			expect(t, 0, "https://app.test/unsubscribe?u=1\n", "")
		s.waitNow(t, "email", "--subject", "sign-in", "--since", "1m", "--print", "link", "--kind", "reset").
			expect(t, 3, "", codeID)
	})
	t.Run("q", func(t *testing.T) {
		s.waitNow(t, "email", "--q", "quartz", "--since", "1m", "--print", "subject").expect(t, 0, "Your receipt\n", "")
		s.waitNow(t, "email", "--q", "nowhere-to-be-found", "--since", "1m", "--timeout", "1s").
			expect(t, 1, "", `matching "nowhere-to-be-found"`)
		id := s.hook(t, "POST", "/search", []byte(`{"customer":"zebra-quartz"}`))
		s.waitNow(t, "request", "--q", "quartz", "--since", "1m").expect(t, 0, id+"\n", "")
		// A query the server cannot read is a usage error, named at once.
		s.waitNow(t, "email", "--q", `"unclosed`, "--timeout", "20s").expect(t, 2, "", "q: a quotation mark is not closed")
	})
}

// The README's CI example, run by sh as it is written there: it signs up a
// user with a stand-in application, which sends the confirmation email, and
// follows the verify link that capture caught.
func TestWaitREADMEExample(t *testing.T) {
	for _, tool := range []string{"sh", "curl", "date"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: the README's CI example is NOT tested", tool)
		}
	}
	script := readmeBlock(t, "In CI")
	s := serveBinary(t)
	confirmed := make(chan string, 1)
	var app *httptest.Server
	app = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/signup":
			email := r.FormValue("email")
			err := s.send(email, "Confirm your email address",
				"Welcome!\nPlease verify your email address: "+app.URL+"/verify?token="+hex.EncodeToString([]byte(email))+"\n"+
					"Unsubscribe: "+app.URL+"/unsubscribe\n")
			if err != nil {
				t.Errorf("send the confirmation: %v", err)
				http.Error(w, err.Error(), 500)
				return
			}
			io.WriteString(w, "signed up\n")
		case "/verify":
			email, _ := hex.DecodeString(r.URL.Query().Get("token"))
			confirmed <- string(email)
			io.WriteString(w, "confirmed\n")
		default:
			http.NotFound(w, r)
		}
	}))
	defer app.Close()
	if !strings.Contains(script, "--kind verify") {
		t.Errorf("the README's CI example no longer follows the verify link by its kind:\n%s", script)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	dataDir := t.TempDir()
	// The script names no --api: on a CI machine credentials.json or --api
	// would; here the data dir's file names this serve.
	os.WriteFile(filepath.Join(dataDir, "credentials.json"), []byte(`{"api":"`+s.api+`","key":"`+s.key+`"}`), 0o600)
	cmd := exec.CommandContext(ctx, "sh", "-c", "set -eu\n"+script)
	cmd.Env = append(cleanEnv(), "CAPTURE_DATA_DIR="+dataDir, "APP="+app.URL, "RUN_ID=42",
		"PATH="+filepath.Dir(binary)+":"+os.Getenv("PATH"))
	res, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(res), "confirmed") {
		t.Fatalf("script: %v\n%s", err, res)
	}
	select {
	case token := <-confirmed:
		if token != "ci-42@example.com" {
			t.Errorf("followed the link of %q", token)
		}
	default:
		t.Error("the verify link was not followed")
	}
}

// readmeBlock returns the first sh code block after the README heading.
func readmeBlock(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "### "+heading+"\n")
	if !ok {
		t.Fatalf("README has no %q heading", heading)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatalf("README's %q section has no sh block", heading)
	}
	return block
}

// Inboxes and endpoints are counted in words that are words.
func TestWaitNamesSeveralEndpoints(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	_, banner := startServeProcess(t, dir)
	d := "--data-dir=" + dir
	if r := capture(t, "project", "create", "p2", "--plan", "team", d); r.code != 0 {
		t.Fatal(r)
	}
	for _, name := range []string{"stripe", "stripe", "github"} {
		if r := capture(t, "endpoint", "create", "--project", "p2", "--name", name, d); r.code != 0 {
			t.Fatal(r)
		}
	}
	r := capture(t, "key", "create", "--project", "p2", "--json", d)
	var key struct{ Key string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &key) != nil {
		t.Fatal(r)
	}
	wait := func(args ...string) result {
		cmd := exec.CommandContext(t.Context(), binary, append([]string{"wait", "request", "--timeout", "5s", "--api", banner["Read API"]}, args...)...)
		cmd.Env = append(cleanEnv(), "CAPTURE_API_KEY="+key.Key, "CAPTURE_DATA_DIR="+t.TempDir())
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Run()
		return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
	}
	if r := wait("--endpoint", "stripe"); r.code != 2 || !strings.Contains(r.stderr, `2 endpoints are named "stripe": pass --endpoint`) {
		t.Errorf("two endpoints named stripe: %+v", r)
	}
	if r := wait(); r.code != 2 || !strings.Contains(r.stderr, "the project has 3 endpoints and no single one named default: pass --endpoint") {
		t.Errorf("no default endpoint: %+v", r)
	}
}

// hostile is what a sender can put in a capture to act on the terminal
// that shows it: OSC 52 sets the clipboard, OSC 0 the window title, CSI 2J
// and 3J erase the screen and the scrollback.
const hostile = "build ok\x1b]52;c;cm0gLXJmIH4K\x07\x1b]0;owned\x07\x1b[2J\x1b[3J"

// hostilePath is a webhook path with C1 controls (CSI, OSC, ST), which
// many terminals act on as on ESC [, ESC ] and ESC \, and a right-to-left
// override, which reverses the rest of the line on a terminal that lays
// out bidi text.
const hostilePath = "/term/\u009b2J\u009d0;owned\u009c\u202eexe.pdf"

// rawHook posts body to the endpoint with path in the request line as it
// is, raw UTF-8 included, as no HTTP client sends it, and returns the
// capture's id.
func (s *served) rawHook(t *testing.T, path, body string) string {
	t.Helper()
	u, _ := url.Parse(s.CaptureURL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s%s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		u.Path, path, u.Host, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != 200 {
		t.Fatalf("capture answered %d, %v", resp.StatusCode, err)
	}
	return v.ID
}

// Into a pipe or a file, `capture wait` prints what was captured byte for
// byte, escape sequences and all: a script gets what the sender sent. On
// a terminal the same captures are shown harmless
// (TestWaitShowsCapturesHarmlessOnATerminal).
func TestWaitPrintsHostileCapturesByteForByte(t *testing.T) {
	s := serveBinary(t)
	id := s.rawHook(t, hostilePath, hostile)
	s.mail(t, "eve@example.com", "=?utf-8?Q?Invoice_=E2=80=AEfdp.exe?=", hostile)

	s.waitNow(t, "request", "--path", "/term/", "--since", "1m", "--print", "body").expect(t, 0, hostile, "")
	s.waitNow(t, "request", "--path", "/term/", "--since", "1m", "--print", "path").expect(t, 0, hostilePath+"\n", "")
	r := s.waitNow(t, "request", "--path", "/term/", "--since", "1m", "--print", "json")
	var m map[string]any
	if err := json.Unmarshal(r.stdout.Bytes(), &m); err != nil || m["id"] != id || m["path"] != hostilePath || m["body"] != hostile {
		t.Errorf("--print json: %v, %s", err, r.stdout.String())
	}
	s.waitNow(t, "email", "--to", "eve@", "--since", "1m", "--print", "text").expect(t, 0, hostile+"\n", "")
	s.waitNow(t, "email", "--to", "eve@", "--since", "1m", "--print", "subject").expect(t, 0, "Invoice \u202efdp.exe\n", "")
}
