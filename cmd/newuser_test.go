package cmd

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// apiGet calls the read API of a running serve with key.
func apiGet(t *testing.T, api, key, path string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", api+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// A first start that fails on a port in use, or on a certificate it cannot
// use, writes nothing, so the next
// start is still the first: it shows the key and writes credentials.json
// (SPEC §3).
func TestFailedFirstStartLeavesAFirstStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, flag := range []string{"--http", "--capture", "--smtp-starttls", "--smtp-tls", "--email-api"} {
		r := capture(t, "serve", "--data-dir", dir, "--http", "127.0.0.1:0", "--capture", "127.0.0.1:0",
			"--smtp-starttls", "127.0.0.1:0", "--smtp-tls", "127.0.0.1:0", "--email-api", "127.0.0.1:0", flag, busy.Addr().String())
		if r.code != 1 || !strings.Contains(r.stderr, busy.Addr().String()) || strings.Contains(r.stdout, "cap_") {
			t.Errorf("%s in use: %+v", flag, r)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("a failed start (%s in use) created the data dir: %v", flag, err)
		}
	}
	// So does a start whose own certificate cannot be used.
	junk := filepath.Join(t.TempDir(), "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, files := range [][2]string{{junk, junk}, {junk + ".missing", junk}} {
		r := capture(t, "serve", "--data-dir", dir, "--http", "127.0.0.1:0", "--capture", "127.0.0.1:0",
			"--smtp-starttls", "127.0.0.1:0", "--smtp-tls", "127.0.0.1:0", "--email-api", "127.0.0.1:0",
			"--tls-cert", files[0], "--tls-key", files[1])
		if r.code != 1 || strings.Contains(r.stdout, "cap_") {
			t.Errorf("unusable certificate %s: %+v", files[0], r)
		}
		if _, err := os.Stat(filepath.Join(dir, "capture.db")); !os.IsNotExist(err) {
			t.Fatalf("a failed start (certificate %s) created the database: %v", files[0], err)
		}
	}
	_, banner := startServeProcess(t, dir)
	key := banner["API key"]
	b, err := os.ReadFile(filepath.Join(dir, "credentials.json"))
	if !strings.HasPrefix(key, "cap_") || err != nil || !strings.Contains(string(b), key) {
		t.Fatalf("the start after a failed one: banner %v, credentials.json %s %v", banner, b, err)
	}
}

// A serve flag no listener, certificate or capture URL can use is a usage
// error, one line naming the flag, before anything is bound or written.
func TestBadServeFlagsWriteNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	long := strings.Repeat("a", 64)
	for _, tt := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--smtp-host", "bad host!"}, `--smtp-host "bad host!"`},
		{[]string{"--smtp-host", ""}, `--smtp-host ""`},
		{[]string{"--smtp-host", "-mail.test"}, `--smtp-host "-mail.test"`},
		{[]string{"--smtp-host", "*.test"}, `--smtp-host "*.test"`},
		{[]string{"--smtp-host", long + ".test"}, "longer than 63"},
		{[]string{"--smtp-host", strings.Repeat("abcdefgh.", 30) + "test"}, "253"},
		{[]string{"--public-url", "http://example.com/base?x=1"}, `--public-url "http://example.com/base?x=1": want no query`},
		{[]string{"--public-url", "http://example.com/base?"}, "want no query"},
		{[]string{"--public-url", "http://example.com#frag"}, "want no fragment"},
		{[]string{"--public-url", "http://user:pw@example.com"}, "--public-url: want no user:password@"},
		{[]string{"--public-url", "ftp://example.com"}, `--public-url "ftp://example.com"`},
		{[]string{"--public-url", "http:///path"}, "want a host"},
		{[]string{"--smtp-starttls", "127.0.0.1:23456,127.0.0.1:23456"}, "--smtp-starttls lists 127.0.0.1:23456 twice"},
		{[]string{"--smtp-tls", "127.0.0.1:23457", "--http", "127.0.0.1:23457"}, "--smtp-tls 127.0.0.1:23457 is also given to --http"},
		{[]string{"--http", "0.0.0.0:23458", "--capture", "127.0.0.1:23458"}, "--capture 127.0.0.1:23458 is also given to --http as 0.0.0.0:23458"},
		{[]string{"--capture", "[::1]:23458", "--email-api", ":23458"}, "--email-api :23458 is also given to --capture as [::1]:23458"},
		{[]string{"--smtp-starttls", "127.0.0.1:23459,[::]:23459"}, "--smtp-starttls lists 127.0.0.1:23459 and [::]:23459"},
		{[]string{"--email-api", "127.0.0.1:99999"}, `--email-api "127.0.0.1:99999": port "99999"`},
		{[]string{"--http", "127.0.0.1"}, `--http "127.0.0.1": want HOST:PORT`},
		{[]string{"--public-url", "https://hooks.example.test/a b"}, `--public-url "https://hooks.example.test/a b": ' ' cannot stand in a URL`},
		{[]string{"--public-url", "https://hooks.example.test/{id}"}, `'{' cannot stand in a URL`},
	} {
		args := append([]string{"serve", "--data-dir", dir, "--http", "127.0.0.1:0", "--capture", "127.0.0.1:0",
			"--smtp-starttls", "127.0.0.1:0", "--smtp-tls", "127.0.0.1:0", "--email-api", "127.0.0.1:0"}, tt.flags...)
		r := capture(t, args...)
		if r.code != 2 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, tt.want) || strings.Contains(r.stderr, "pw") {
			t.Errorf("%v: %+v", tt.flags, r)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("serve %v created the data dir: %v", tt.flags, err)
		}
	}
	// Names and addresses that are fine still start.
	_, banner := startServeProcess(t, dir, "--smtp-host", "Mail-1.example.test", "--public-url", "https://hooks.example.test/base/")
	if got := banner["Capture URL"]; !strings.HasPrefix(got, "https://hooks.example.test/base/whe_") {
		t.Errorf("capture URL under --public-url: %q", got)
	}
}

// Administration commands on a data dir without a database fail, say
// what to do, and create nothing (SPEC §2a).
func TestAdministrationNeedsADatabase(t *testing.T) {
	empty := t.TempDir()
	missing := filepath.Join(t.TempDir(), "typo")
	for _, dir := range []string{empty, missing} {
		for _, args := range [][]string{
			{"project", "list"}, {"project", "create", "x"}, {"project", "set-plan", "default", "pro"},
			{"key", "create"}, {"key", "list"}, {"key", "revoke", "key_x"},
			{"inbox", "create"}, {"inbox", "list"}, {"inbox", "password", "inb_x"},
			{"endpoint", "create"}, {"endpoint", "list"}, {"endpoint", "set", "whe_x", "--response-status", "201"},
		} {
			r := capture(t, append(args, "--data-dir", dir)...)
			want := "capture: no capture data in " + dir + ": run `capture serve` first (or pass --data-dir)\n"
			if r.code != 1 || r.stderr != want {
				t.Errorf("%v on %s: %+v", args, dir, r)
			}
		}
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("created in an empty data dir: %v", entries)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("a mistyped data dir was created: %v", err)
	}
}

// Usage errors are one line that names the mistake and points to --help,
// with exit code 2; other errors one "capture: …" line with exit code 1.
func TestUsageErrorsAreOneLine(t *testing.T) {
	dir := withDatabase(t, t.TempDir())
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"bogus"}, 2, "capture: unknown command \"bogus\" for \"capture\" (see 'capture --help')\n"},
		{[]string{"--bogus"}, 2, "capture: unknown flag: --bogus (see 'capture --help')\n"},
		{[]string{"key", "frob"}, 2, "capture: unknown command \"frob\" for \"capture key\" (see 'capture key --help')\n"},
		{[]string{"wait"}, 2, "capture: wait for what? \"email\" or \"request\" (see 'capture wait --help')\n"},
		{[]string{"wait", "sms"}, 2, "capture: unknown command \"sms\" for \"capture wait\" (see 'capture wait --help')\n"},
		{[]string{"serve", "--nope"}, 2, "capture: unknown flag: --nope (see 'capture serve --help')\n"},
		{[]string{"serve", "--http", "127.0.0.1:99999", "--data-dir", dir}, 2, "capture: --http \"127.0.0.1:99999\": port \"99999\" is not a number from 0 to 65535 (see 'capture serve --help')\n"},
		{[]string{"help", "frob"}, 2, "capture: unknown help topic \"frob\" for \"capture\" (see 'capture --help')\n"},
		{[]string{"key", "revoke"}, 2, "capture: missing key id: capture key revoke KEY_ID [flags] (see 'capture key revoke --help')\n"},
		{[]string{"endpoint", "set"}, 2, "capture: missing endpoint id: capture endpoint set ENDPOINT_ID [flags] (see 'capture endpoint set --help')\n"},
		{[]string{"project", "set-plan", "multi"}, 2, "capture: missing plan: capture project set-plan PROJECT PLAN [flags] (see 'capture project set-plan --help')\n"},
		{[]string{"inbox", "password", "inb_a", "inb_b"}, 2, "capture: unexpected argument \"inb_b\": capture inbox password INBOX_ID [flags] (see 'capture inbox password --help')\n"},
		{[]string{"endpoint", "set", "whe_x", "--response-status", "abc", "--data-dir", dir}, 2,
			"capture: --response-status abc: want a whole number (see 'capture endpoint set --help')\n"},
		// A delay is capped at 10s: the hint suggests values inside it.
		{[]string{"endpoint", "set", "whe_x", "--response-delay", "1.5", "--data-dir", dir}, 2,
			"capture: --response-delay 1.5: want a duration from 0 to 10s, such as 250ms or 2s (see 'capture endpoint set --help')\n"},
		{[]string{"serve", "extra", "--data-dir", dir}, 2, "capture: no arguments expected, got \"extra\" (see 'capture serve --help')\n"},
		{[]string{"wait", "email", "--timeout", "1.5"}, 2,
			"capture: --timeout 1.5: want a duration such as 30s, 2m or 1h30m (see 'capture wait email --help')\n"},
		{[]string{"bench", "smtp", "--msgs", "0"}, 2, "capture: --msgs 0: want 1 or more (see 'capture bench smtp --help')\n"},
		{[]string{"bench", "list", "--captures", "-1"}, 2, "capture: --captures -1: want 0 or more (see 'capture bench list --help')\n"},
		{[]string{"bench", "smtp", "--mode", "ssl"}, 2, "capture: --mode \"ssl\": want starttls or tls (see 'capture bench smtp --help')\n"},
		{[]string{"key", "revoke", "key_nope", "--data-dir", dir}, 1, "capture: not found: no key \"key_nope\"\n"},
	} {
		r := capture(t, tt.args...)
		if r.code != tt.code || !strings.HasPrefix(r.stderr, "capture: ") || strings.Count(r.stderr, "\n") != 1 ||
			!strings.Contains(r.stderr, tt.want) || strings.Contains(r.stderr, "Error:") {
			t.Errorf("%v: %+v", tt.args, r)
		}
	}
	v := capture(t, "version")
	if r := capture(t, "--version"); r.code != 0 || r.stdout != v.stdout || !strings.HasPrefix(r.stdout, "capture ") {
		t.Errorf("--version: %+v, version: %+v", r, v)
	}
}

// A custom response status is a final one: 200–599. Anything else is
// refused with exit code 2 and the endpoint stays as it was.
func TestEndpointResponseStatusIsFinal(t *testing.T) {
	dir := withDatabase(t, t.TempDir())
	r := capture(t, "endpoint", "list", "--json", "--data-dir", dir)
	var eps struct{ Items []struct{ ID string } }
	if json.Unmarshal([]byte(r.stdout), &eps) != nil || len(eps.Items) != 1 {
		t.Fatalf("endpoint list: %+v", r)
	}
	id := eps.Items[0].ID
	for _, status := range []string{"100", "101", "199", "600", "0"} {
		r := capture(t, "endpoint", "set", id, "--response-status", status, "--data-dir", dir)
		if r.code != 2 || !strings.Contains(r.stderr, "response status "+status+": want a final status from 200 to 599") {
			t.Errorf("--response-status %s: %+v", status, r)
		}
	}
	for _, status := range []string{"200", "599"} {
		if r := capture(t, "endpoint", "set", id, "--response-status", status, "--data-dir", dir); r.code != 0 {
			t.Errorf("--response-status %s: %+v", status, r)
		}
	}
	r = capture(t, "endpoint", "list", "--json", "--data-dir", dir)
	if !strings.Contains(r.stdout, `"status": 599`) {
		t.Errorf("after refused settings: %s", r.stdout)
	}
}

// A plan the project does not fit is refused, naming each quota over, and
// the message counts in good grammar.
func TestSetPlanRefusesWhatDoesNotFit(t *testing.T) {
	dir := withDatabase(t, t.TempDir())
	d := "--data-dir=" + dir
	// The refusal says what to do, naming the project by its id (no
	// quoting needed) and the next larger plan.
	hint := regexp.MustCompile("^capture: quota_exceeded: the free plan allows 1 active API key; revoke one first " +
		"\\(`capture key list --project (proj_\\w+)`, then `capture key revoke KEY_ID`\\), or move the project to a larger plan " +
		"\\(`capture project set-plan (proj_\\w+) pro`\\)\n$")
	if r := capture(t, "key", "create", d); r.code != 1 || !hint.MatchString(r.stderr) {
		t.Errorf("second key on free: %+v", r)
	}
	if r := capture(t, "project", "set-plan", "default", "pro", d); r.code != 0 {
		t.Fatal(r)
	}
	capture(t, "key", "create", d)
	for range 5 {
		capture(t, "inbox", "create", d)
	}
	r := capture(t, "project", "set-plan", "default", "free", d)
	want := "capture: quota_exceeded: project default holds more than the free plan allows: " +
		"2 active API keys (it allows 1), 6 inboxes (it allows 5); it stays on plan pro\n"
	if r.code != 1 || r.stderr != want {
		t.Errorf("set-plan free with 2 keys and 6 inboxes: %+v", r)
	}
	if r := capture(t, "project", "list", d); !strings.Contains(r.stdout, "pro") {
		t.Errorf("the plan changed anyway: %+v", r)
	}
}

// Administration commands print the addresses the running serve bound and
// announces, and with none running, the last one's (SPEC §2a).
func TestAdministrationPrintsLiveAddresses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cmd, banner := startServeProcess(t, dir, "--public-url", "https://hooks.example.test/base/", "--smtp-host", "mail.test")
	api, key := banner["Read API"], banner["API key"]
	_, served := apiGet(t, api, key, "/inboxes")
	_, servedEndpoints := apiGet(t, api, key, "/endpoints")
	var inboxes struct {
		Items []struct {
			SMTP json.RawMessage `json:"smtp"`
		}
	}
	if json.Unmarshal(served, &inboxes) != nil || len(inboxes.Items) != 1 {
		t.Fatalf("GET /inboxes: %s", served)
	}
	var endpoints struct {
		Items []struct {
			CaptureURL string `json:"capture_url"`
		}
	}
	if json.Unmarshal(servedEndpoints, &endpoints) != nil || len(endpoints.Items) != 1 ||
		!strings.HasPrefix(endpoints.Items[0].CaptureURL, "https://hooks.example.test/base/whe_") {
		t.Fatalf("GET /endpoints: %s", servedEndpoints)
	}
	check := func(when string) {
		r := capture(t, "inbox", "list", "--json", "--data-dir", dir)
		var got struct {
			Items []struct {
				SMTP json.RawMessage `json:"smtp"`
			}
		}
		if json.Unmarshal([]byte(r.stdout), &got) != nil || len(got.Items) != 1 ||
			compactJSON(got.Items[0].SMTP) != compactJSON(inboxes.Items[0].SMTP) {
			t.Errorf("%s: inbox list %s, the API says %s", when, r.stdout, inboxes.Items[0].SMTP)
		}
		r = capture(t, "endpoint", "list", "--data-dir", dir)
		if !strings.Contains(r.stdout, endpoints.Items[0].CaptureURL) {
			t.Errorf("%s: endpoint list %s, want %s", when, r.stdout, endpoints.Items[0].CaptureURL)
		}
		r = capture(t, "endpoint", "create", "--name", "second", "--data-dir", dir)
		if !strings.Contains(r.stdout, "capture URL: https://hooks.example.test/base/whe_") {
			t.Errorf("%s: endpoint create %s", when, r.stdout)
		}
		r = capture(t, "inbox", "list", "--data-dir", dir)
		if !strings.Contains(r.stdout, "SMTP: mail.test  STARTTLS: ") || strings.Contains(r.stdout, "STARTTLS: 587, 2587") {
			t.Errorf("%s: inbox list %s", when, r.stdout)
		}
	}
	check("while serve runs")
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	check("after serve stopped")
}

func compactJSON(b []byte) string {
	var v any
	json.Unmarshal(b, &v)
	out, _ := json.Marshal(v)
	return string(out)
}

// Revoking the key credentials.json holds says so, and `key create --save`
// puts a working key in its place (SPEC §2a).
func TestRevokeTheSavedKeyAndSaveANewOne(t *testing.T) {
	clearCaptureEnv(t)
	dir := filepath.Join(t.TempDir(), "data")
	_, banner := startServeProcess(t, dir)
	api, old := banner["Read API"], banner["API key"]
	r := capture(t, "key", "list", "--json", "--data-dir", dir)
	var keys struct{ Items []struct{ ID string } }
	if json.Unmarshal([]byte(r.stdout), &keys) != nil || len(keys.Items) != 1 {
		t.Fatalf("key list: %+v", r)
	}
	r = capture(t, "key", "revoke", keys.Items[0].ID, "--data-dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "it was the key in "+filepath.Join(dir, "credentials.json")) ||
		!strings.Contains(r.stdout, "capture key create --save") {
		t.Errorf("revoke the saved key: %+v", r)
	}
	if code, _ := apiGet(t, api, old, "/me"); code != 401 {
		t.Errorf("revoked key: %d", code)
	}
	// The clients that read it say where the refused key came from and
	// how to replace it.
	saved := filepath.Join(dir, "credentials.json")
	for _, args := range [][]string{
		{"wait", "email", "--timeout", "5s"},
		{"forward", "--endpoint", "whe_nope", "--to", "localhost:1"},
		{"tui"},
	} {
		r := capture(t, append(args, "--data-dir", dir)...)
		if r.code != 2 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "refused the key in "+saved+" (unknown or revoked)") ||
			!strings.Contains(r.stderr, "`capture key create --save` replaces it") {
			t.Errorf("%s with the revoked saved key: %+v", args[0], r)
		}
	}
	t.Setenv("CAPTURE_KEY", "garbage")
	for _, args := range [][]string{
		{"wait", "email", "--timeout", "5s"},
		{"forward", "--endpoint", "whe_nope", "--to", "localhost:1"},
		{"tui"},
	} {
		r := capture(t, append(args, "--data-dir", dir)...)
		if r.code != 2 || !strings.Contains(r.stderr, "refused the key in $CAPTURE_KEY (unknown or revoked): set it to an active key") {
			t.Errorf("%s with CAPTURE_KEY=garbage: %+v", args[0], r)
		}
	}
	// A key no API could be sent, named before any call.
	t.Setenv("CAPTURE_API_KEY", "cap_x\nInjected: y")
	for _, args := range [][]string{
		{"wait", "email", "--timeout", "5s"},
		{"forward", "--endpoint", "whe_nope", "--to", "localhost:1"},
		{"tui"},
		{"mcp"},
	} {
		r := capture(t, append(args, "--data-dir", dir)...)
		if r.code != 2 || r.stderr != "capture: the key in $CAPTURE_API_KEY contains characters a key never has (a key is cap_ followed by letters and digits)\n" {
			t.Errorf("%s with a line break in the key: %+v", args[0], r)
		}
	}
	clearCaptureEnv(t)
	r = capture(t, "key", "create", "--save", "--json", "--data-dir", dir)
	var created struct{ Key string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &created) != nil || !strings.HasPrefix(created.Key, "cap_") {
		t.Fatalf("key create --save: %+v", r)
	}
	var creds struct{ API, Key string }
	b, _ := os.ReadFile(filepath.Join(dir, "credentials.json"))
	if json.Unmarshal(b, &creds) != nil || creds.Key != created.Key || creds.API != api {
		t.Errorf("credentials.json after --save: %s", b)
	}
	// The clients that read credentials.json work again.
	r = capture(t, "forward", "--data-dir", dir, "--endpoint", "whe_nope", "--to", "localhost:1")
	if r.code != 2 || !strings.Contains(r.stderr, "whe_nope not found") {
		t.Errorf("forward with the saved key: %+v", r)
	}
	// Revoking another key says nothing of credentials.json.
	r = capture(t, "key", "list", "--json", "--data-dir", dir)
	json.Unmarshal([]byte(r.stdout), &keys)
	if r := capture(t, "key", "revoke", keys.Items[0].ID, "--data-dir", dir); r.code != 1 || strings.Contains(r.stdout, "credentials.json") {
		t.Errorf("revoke an already revoked key: %+v", r)
	}
}

// A mistyped command is named as such, whatever flags follow it, and never
// answered with help and exit 0 (SPEC §1).
func TestUnknownCommandBeforeItsFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"wiat", "email", "--to", "x"}, `capture: unknown command "wiat" for "capture"; did you mean "wait"? (see 'capture --help')` + "\n"},
		{[]string{"wait", "emial", "--to", "x"}, `capture: unknown command "emial" for "capture wait"; did you mean "email"? (see 'capture wait --help')` + "\n"},
		{[]string{"key", "craete", "--project", "x"}, `capture: unknown command "craete" for "capture key"; did you mean "create"? (see 'capture key --help')` + "\n"},
		{[]string{"--data-dir", "/nonexistent", "wiat"}, `capture: unknown command "wiat" for "capture"; did you mean "wait"?`},
		{[]string{"bogus", "--help"}, `capture: unknown command "bogus" for "capture" (see 'capture --help')` + "\n"},
		{[]string{"status", "--help"}, `capture: unknown command "status" for "capture" (see 'capture --help')` + "\n"},
		{[]string{"completion", "bogus"}, `capture: unknown command "bogus" for "capture completion" (see 'capture completion --help')` + "\n"},
	} {
		r := capture(t, tt.args...)
		if r.code != 2 || r.stdout != "" || !strings.HasPrefix(r.stderr, tt.want) {
			t.Errorf("%v: %+v", tt.args, r)
		}
	}
	// What is a command still runs, flags and all.
	if r := capture(t, "completion", "bash"); r.code != 0 || !strings.Contains(r.stdout, "bash completion") {
		t.Errorf("completion bash: code %d, stderr %q", r.code, r.stderr)
	}
	if r := capture(t, "wait", "email", "--help"); r.code != 0 || !strings.Contains(r.stdout, "--to") {
		t.Errorf("wait email --help: %+v", r)
	}
	if r := capture(t, "__complete", "wa"); r.code != 0 || !strings.Contains(r.stdout, "wait") {
		t.Errorf("shell completion: %+v", r)
	}
}

// The clients of the read API refuse --database rather than ignore it.
func TestReadAPIClientsRefuseDatabase(t *testing.T) {
	for _, args := range [][]string{
		{"wait", "email", "--database", "postgres://127.0.0.1:1/x"},
		{"--database", "postgres://127.0.0.1:1/x", "forward", "--endpoint", "whe_x", "--to", "localhost:1"},
		{"tui", "--database", "postgres://127.0.0.1:1/x"},
		{"mcp", "--database", "postgres://127.0.0.1:1/x"},
	} {
		r := capture(t, args...)
		if r.code != 2 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "capture: --database is for serve and the administration commands") {
			t.Errorf("%v: %+v", args, r)
		}
	}
}
