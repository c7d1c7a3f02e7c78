package cmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/pgtest"
)

// binary is the real capture binary, built once for the tests that run it.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "capture-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "capture")
	build := exec.Command("go", "build", "-o", binary, "..")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic("build capture: " + err.Error())
	}
	code := pgtest.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

// capture runs the binary with args and returns what it printed.
func capture(t *testing.T, args ...string) result {
	t.Helper()
	return captureIn(t, "", args...)
}

// captureIn runs the binary with args and stdin.
func captureIn(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), binary, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

// withDatabase returns dir holding a database, as the first `capture serve`
// leaves it: administration commands refuse a data dir without one.
func withDatabase(t *testing.T, dir string) string {
	t.Helper()
	st, err := store.OpenDir(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.EnsureBootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestAdministration(t *testing.T) {
	dir := withDatabase(t, t.TempDir())
	d := "--data-dir=" + dir

	r := capture(t, "project", "create", "staging", "--plan", "pro", "--json", d)
	var proj map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &proj) != nil || proj["plan"] != "pro" {
		t.Fatalf("project create: %+v", r)
	}
	if r := capture(t, "project", "create", "staging", d); r.code != 1 || !strings.Contains(r.stderr, "already exists") {
		t.Errorf("duplicate project: %+v", r)
	}
	if r := capture(t, "project", "create", "x", "--plan", "gold", d); r.code != 2 || !strings.Contains(r.stderr, "unknown plan") {
		t.Errorf("bad plan: %+v", r)
	}
	if r := capture(t, "project", "list", "--json", d); !strings.Contains(r.stdout, `"items"`) || !strings.Contains(r.stdout, "staging") {
		t.Errorf("project list: %+v", r)
	}

	r = capture(t, "key", "create", "--project", "staging", "--json", d)
	var key map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &key) != nil || !strings.HasPrefix(key["key"].(string), "cap_") {
		t.Fatalf("key create: %+v", r)
	}
	if r := capture(t, "key", "list", "--project", "staging", d); strings.Contains(r.stdout, key["key"].(string)) || !strings.Contains(r.stdout, key["id"].(string)) {
		t.Errorf("key list shows the secret or misses the key: %+v", r)
	}
	if r := capture(t, "key", "revoke", key["id"].(string), d); r.code != 0 {
		t.Errorf("revoke: %+v", r)
	}
	if r := capture(t, "key", "revoke", "key_nope", d); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("revoke unknown: %+v", r)
	}
	if r := capture(t, "key", "create", "--project", "nope", d); r.code != 1 || !strings.Contains(r.stderr, "no project") {
		t.Errorf("unknown project: %+v", r)
	}

	r = capture(t, "inbox", "create", "--project", "staging", "--name", "signup", "--json", d)
	var inbox map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &inbox) != nil || len(inbox["smtp_password"].(string)) < 24 {
		t.Fatalf("inbox create: %+v", r)
	}
	id := inbox["id"].(string)
	pw := capture(t, "inbox", "password", id, d)
	if strings.TrimSpace(pw.stdout) != inbox["smtp_password"] {
		t.Errorf("password: %+v", pw)
	}
	rot := capture(t, "inbox", "password", id, "--rotate", d)
	if rot.code != 0 || strings.TrimSpace(rot.stdout) == inbox["smtp_password"] || strings.Count(rot.stdout, "\n") != 1 {
		t.Errorf("rotate: %+v", rot)
	}
	if r := capture(t, "inbox", "password", "inb_nope", d); r.code != 1 {
		t.Errorf("unknown inbox: %+v", r)
	}

	r = capture(t, "endpoint", "create", "--project", "staging", "--name", "stripe", "--target", "http://localhost:3000", "--json", d)
	var ep map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &ep) != nil || ep["target_url"] != "http://localhost:3000" {
		t.Fatalf("endpoint create: %+v", r)
	}
	epID := ep["id"].(string)
	r = capture(t, "endpoint", "set", epID, "--response-status", "202", "--response-header", "X-Test: yes",
		"--response-body", "ok", "--response-delay", "250ms", "--no-target", "--json", d)
	if r.code != 0 || !strings.Contains(r.stdout, `"delay_ms": 250`) || !strings.Contains(r.stdout, `"target_url": null`) {
		t.Errorf("endpoint set: %+v", r)
	}
	for _, bad := range [][]string{
		{"--response-status", "99"},
		{"--response-delay", "11s"},
		{"--response-header", "no colon"},
		{"--response-header", "Set-Cookie: a=1", "--response-header", "set-cookie: b=2"},
		{"--response-header", "Content-Length: 99"},
		{"--response-header", "Transfer-Encoding: chunked"},
		{"--target", "localhost:3000"},
		{"--target", "http://x", "--no-target"},
		{"--target", "http://localhost:99999"},
		// The endpoint's saved body is "ok": a 204 sends none.
		{"--response-status", "204"},
		{},
	} {
		if r := capture(t, append([]string{"endpoint", "set", epID, d}, bad...)...); r.code != 2 {
			t.Errorf("endpoint set %v: %+v", bad, r)
		}
	}
	if r := capture(t, "endpoint", "set", "whe_nope", "--response-status", "200", d); r.code != 1 {
		t.Errorf("unknown endpoint: %+v", r)
	}
	if r := capture(t, "endpoint", "list", "--project", "staging", d); !strings.Contains(r.stdout, "stripe") {
		t.Errorf("endpoint list: %+v", r)
	}

	// Quotas: a free project allows five inboxes.
	capture(t, "project", "create", "small", d)
	for i := range 6 {
		r := capture(t, "inbox", "create", "--project", "small", d)
		if (i < 5) != (r.code == 0) {
			t.Fatalf("inbox %d on free: %+v", i+1, r)
		}
		if i == 5 && !strings.Contains(r.stderr, "quota_exceeded") {
			t.Errorf("sixth inbox: %+v", r)
		}
	}
}

func TestBadInvocations(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, []byte("x"), 0o600)
	if r := capture(t, "project", "list", "--data-dir", file); r.code != 1 || !strings.Contains(r.stderr, "not a directory") {
		t.Errorf("data dir is a file: %+v", r)
	}
	if r := capture(t, "serve", "--nope"); r.code != 2 || !strings.Contains(r.stderr, "unknown flag") {
		t.Errorf("bad flag: %+v", r)
	}
	if r := capture(t, "frobnicate"); r.code == 0 {
		t.Errorf("unknown command: %+v", r)
	}
	if r := capture(t, "key", "revoke"); r.code != 2 {
		t.Errorf("missing argument: %+v", r)
	}
	if r := capture(t, "ca", "--data-dir", t.TempDir()); r.code != 1 || !strings.Contains(r.stderr, "capture serve") {
		t.Errorf("ca before serve: %+v", r)
	}
	if r := capture(t, "--help"); r.code != 0 || !strings.Contains(r.stdout, "serve") {
		t.Errorf("help: %+v", r)
	}
	if r := capture(t, "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "capture ") {
		t.Errorf("version: %+v", r)
	}
}

var bannerLine = regexp.MustCompile(`(?m)^\s+(Read API|API key|Inbox|Capture URL|Web UI|CA certificate)\s+(\S+)`)

// readBanner reads serve's banner up to its last line, then keeps draining
// stdout so that serve never blocks on it.
func readBanner(stdout io.Reader) map[string]string {
	banner := map[string]string{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := bannerLine.FindStringSubmatch(sc.Text()); m != nil {
			banner[m[1]] = m[2]
		}
		if _, ok := banner["CA certificate"]; ok {
			break
		}
	}
	go io.Copy(io.Discard, stdout)
	return banner
}

func TestServeEndToEnd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data") // serve creates it
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "serve", "--data-dir", dir, "--http", "127.0.0.1:0", "--capture", "127.0.0.1:0",
		"--smtp-starttls", "127.0.0.1:0", "--smtp-tls", "127.0.0.1:0", "--email-api", "127.0.0.1:0")
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	banner := readBanner(stdout)
	api, key := banner["Read API"], banner["API key"]
	if api == "" || !strings.HasPrefix(key, "cap_") || !strings.HasPrefix(banner["Inbox"], "inb_") ||
		!strings.Contains(banner["Capture URL"], "/whe_") {
		t.Fatalf("banner %v\nstderr: %s", banner, stderr.String())
	}
	var creds struct{ API, Key string }
	b, _ := os.ReadFile(filepath.Join(dir, "credentials.json"))
	fi, _ := os.Stat(filepath.Join(dir, "credentials.json"))
	if json.Unmarshal(b, &creds) != nil || creds.Key != key || creds.API != api || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials.json %s %v", b, fi.Mode())
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir mode %v", fi.Mode())
	}

	get := func(key, path string) (int, string) {
		code, body := apiGet(t, api, key, path)
		return code, string(body)
	}
	if code, body := get(key, "/me"); code != 200 || !strings.Contains(body, `"name":"default"`) {
		t.Fatalf("/me: %d %s", code, body)
	}

	// Administration works on the same database while serve runs.
	if r := capture(t, "key", "create", "--data-dir", dir); r.code != 1 || !strings.Contains(r.stderr, "quota_exceeded") {
		t.Errorf("second key on free: %+v", r)
	}
	capture(t, "project", "create", "second", "--data-dir", dir)
	r := capture(t, "key", "create", "--project", "second", "--json", "--data-dir", dir)
	var other map[string]any
	json.Unmarshal([]byte(r.stdout), &other)
	endpointID := banner["Capture URL"][strings.LastIndex(banner["Capture URL"], "/")+1:]
	if code, body := get(other["key"].(string), "/endpoints/"+endpointID+"/requests"); code != 404 || !strings.Contains(body, "not_found") {
		t.Errorf("another project's endpoint: %d %s", code, body)
	}
	if r := capture(t, "ca", "--data-dir", dir); !strings.HasPrefix(r.stdout, "-----BEGIN CERTIFICATE-----") {
		t.Errorf("ca: %+v", r)
	}

	// SIGTERM stops it cleanly.
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, stderr.String())
	}

	// A later start shows ids but never the key again.
	cmd = exec.CommandContext(ctx, binary, "serve", "--data-dir", dir, "--http", "127.0.0.1:0", "--capture", "127.0.0.1:0",
		"--smtp-starttls", "127.0.0.1:0", "--smtp-tls", "127.0.0.1:0", "--email-api", "127.0.0.1:0")
	stdout, _ = cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	cmd.Start()
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "CA certificate") {
			break
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	go io.Copy(io.Discard, stdout)
	cmd.Wait()
	if strings.Contains(out.String(), key) || !strings.Contains(out.String(), banner["Inbox"]) {
		t.Errorf("second banner:\n%s", out.String())
	}

	// A port in use is named.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r = capture(t, "serve", "--data-dir", dir, "--http", l.Addr().String())
	if r.code == 0 || !strings.Contains(r.stderr, l.Addr().String()) || !strings.Contains(r.stderr, "in use") {
		t.Errorf("port in use: %+v", r)
	}
}

func TestBenchAgainstItsOwnServer(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "wait", "--n", "3"},
		{"bench", "list", "--n", "20", "--captures", "5", "--conns", "2"},
		{"bench", "webhook", "--duration", "300ms", "--conns", "4"},
		{"bench", "smtp", "--msgs", "40", "--conns", "2"},
		{"bench", "smtp", "--msgs", "10", "--conns", "1", "--mode", "tls"},
		{"bench", "slowread", "--clients", "3", "--size", "300000", "--links", "2000"},
	} {
		r := capture(t, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "server peak RSS") || strings.Contains(r.stdout, "errors 1") {
			t.Errorf("%v: %+v", args, r)
		}
		// The ingest benchmarks also report the server's CPU time per capture.
		if (args[1] == "smtp" || args[1] == "webhook") && !regexp.MustCompile(`server CPU: \d+\.\d{3} ms per (message|request)\n`).MatchString(r.stdout) {
			t.Errorf("%v: no CPU figure in %q", args, r.stdout)
		}
	}
	if r := capture(t, "bench", "smtp", "--mode", "pigeon"); r.code != 2 {
		t.Errorf("bad mode: %+v", r)
	}
}

// asNobody runs the binary as an unprivileged user, so that what needs
// root (ports below 1024, other users' files) is refused as on a laptop.
func asNobody(t *testing.T) (dir string, run func(args ...string) *exec.Cmd) {
	t.Helper()
	setpriv, err := exec.LookPath("setpriv")
	if os.Geteuid() != 0 || err != nil {
		t.Skip("needs root and setpriv to run as an unprivileged user")
	}
	dir = t.TempDir()
	// Both TempDir levels are 0700; nobody needs to reach the binary.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "capture")
	b, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, func(args ...string) *exec.Cmd {
		return exec.CommandContext(t.Context(), setpriv,
			append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", bin}, args...)...)
	}
}

// A loopback address of its own keeps 2465 clear of anything else on
// this machine.
func TestPrivilegedPortsFallBackWithoutRoot(t *testing.T) {
	dir, run := asNobody(t)
	cmd := run("serve", "--data-dir", filepath.Join(dir, "data"), "--http", "127.0.0.1:0", "--capture", "127.0.0.1:0",
		"--smtp-starttls", "127.38.1.6:587,127.38.1.6:0", "--smtp-tls", "127.38.1.6:465", "--email-api", "127.0.0.1:0")
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var smtpLine string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "STARTTLS:") {
			smtpLine = sc.Text()
			break
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	go io.Copy(io.Discard, stdout)
	cmd.Wait()
	if strings.Contains(smtpLine, "587,") || strings.Contains(smtpLine, " 587") || !strings.Contains(smtpLine, "TLS: 2465") {
		t.Errorf("SMTP ports without root: %q", smtpLine)
	}
	logs := stderr.String()
	// One warning line names both (SPEC §3).
	if !strings.Contains(logs, "127.38.1.6:587 needs root; skipped") || !strings.Contains(logs, "using 127.38.1.6:2465 instead") ||
		strings.Count(logs, "level=WARN") != 1 {
		t.Errorf("warnings: %s", logs)
	}
}

func TestUnusableDataDir(t *testing.T) {
	_, run := asNobody(t)
	private := t.TempDir()
	os.Chmod(private, 0o700) // owned by root: nobody may not look inside
	out, err := run("project", "list", "--data-dir", filepath.Join(private, "data")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "permission denied") || !strings.Contains(string(out), private) {
		t.Errorf("data dir nobody may not create: %v %s", err, out)
	}

	// A database nobody may read but not write: a clear error, nothing changed.
	shared := withDatabase(t, filepath.Join(t.TempDir(), "data"))
	if r := capture(t, "project", "create", "before", "--data-dir", shared); r.code != 0 {
		t.Fatal(r)
	}
	os.Chmod(filepath.Dir(shared), 0o755)
	os.Chmod(shared, 0o755)
	out, err = run("project", "create", "after", "--data-dir", shared).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "capture.db") {
		t.Errorf("read-only database: %v %s", err, out)
	}
	if r := capture(t, "project", "list", "--data-dir", shared); strings.Contains(r.stdout, "after") || !strings.Contains(r.stdout, "before") {
		t.Errorf("after a refused write: %+v", r)
	}

	// One nobody may not even read is not called read-only. (The data
	// dir is 0700 again: root's command above tightened it.)
	os.Chmod(shared, 0o755)
	os.Chmod(filepath.Join(shared, store.DBFile), 0o600)
	out, err = run("project", "list", "--data-dir", shared).CombinedOutput()
	if err == nil || !strings.Contains(string(out), store.DBFile+" cannot be read: this user cannot read it (permission denied)") {
		t.Errorf("unreadable database: %v %s", err, out)
	}
}

// startServeProcess runs the binary's `serve` on free ports in dir, as a
// process of its own that a test may kill, and returns it with its banner
// rows; flags given replace the default ones.
func startServeProcess(t *testing.T, dir string, flags ...string) (*exec.Cmd, map[string]string) {
	t.Helper()
	args := append([]string{"serve", "--data-dir", dir, "--http", "127.0.0.1:0", "--capture", "127.0.0.1:0",
		"--smtp-starttls", "127.0.0.1:0", "--smtp-tls", "127.0.0.1:0", "--email-api", "127.0.0.1:0"}, flags...)
	cmd := exec.Command(binary, args...)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	banner := readBanner(stdout)
	if banner["Read API"] == "" {
		t.Fatal("serve printed no banner")
	}
	return cmd, banner
}

func TestAcknowledgedCapturesSurviveKill9(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cmd, banner := startServeProcess(t, dir)
	key, captureURL := banner["API key"], banner["Capture URL"]

	// Capture from several clients at once and SIGKILL the server while
	// they are still sending.
	acked := make(chan string, 1000)
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				resp, err := http.Post(fmt.Sprintf("%s/kill/%d/%d", captureURL, c, i), "application/json", strings.NewReader(`{"n":1}`))
				if err != nil {
					return // the server is gone
				}
				var out struct{ ID string }
				err = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					return
				}
				acked <- out.ID
				if len(acked) > 200 {
					return
				}
			}
		})
	}
	for len(acked) < 50 {
		time.Sleep(time.Millisecond)
	}
	cmd.Process.Kill()
	wg.Wait()
	close(acked)

	// Reading every id back must not meet the free plan's rate limit.
	if r := capture(t, "project", "set-plan", "default", "team", "--data-dir", dir); r.code != 0 {
		t.Fatal(r)
	}
	_, banner = startServeProcess(t, dir)
	n := 0
	for id := range acked {
		n++
		req, _ := http.NewRequest("GET", banner["Read API"]+"/requests/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("acknowledged %s lost after kill -9: %d", id, resp.StatusCode)
		}
	}
	t.Logf("%d acknowledged captures checked after kill -9", n)
}
