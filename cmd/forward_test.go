package cmd

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capturedev/capture/forward"
)

// syncBuffer is written by a running command while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitOutput polls a command's output until it holds want.
func waitOutput(t *testing.T, b *syncBuffer, want string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(b.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 30 s in:\n%s", want, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return b.String()
}

// clearCaptureEnv keeps the machine's own capture settings out of a test.
func clearCaptureEnv(t *testing.T) {
	for _, name := range []string{"CAPTURE_API_KEY", "CAPTURE_KEY", "CAPTURE_DATA_DIR"} {
		t.Setenv(name, "")
	}
}

// startServe runs `capture serve` on free ports over dir and returns its
// banner.
func startServe(t *testing.T, dir string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--data-dir", dir, "--http", "127.0.0.1:0", "--capture", "127.0.0.1:0",
			"--smtp-starttls", "127.0.0.1:0", "--smtp-tls", "127.0.0.1:0", "--email-api", "127.0.0.1:0", "--log-level", "error"}, nil, &stdout, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("serve exited %d: %s", code, stderr.String())
			}
		case <-time.After(15 * time.Second):
			t.Error("serve did not stop")
		}
	})
	return waitOutput(t, &stdout, "Capture URL")
}

func TestForwardUsage(t *testing.T) {
	clearCaptureEnv(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"interval 0", []string{"--endpoint", "whe_x", "--to", "localhost", "--interval", "0"}, "--interval 0"},
		{"interval 61", []string{"--endpoint", "whe_x", "--to", "localhost", "--interval", "61"}, "--interval 61"},
		{"no endpoint", []string{"--to", "localhost"}, "--endpoint is required"},
		{"no target", []string{"--endpoint", "whe_x"}, "--to is required"},
		{"bad target", []string{"--endpoint", "whe_x", "--to", "ftp://x"}, "--to"},
		{"bad output", []string{"--endpoint", "whe_x", "--to", "localhost", "--output", "xml"}, "--output"},
		{"negative replay", []string{"--endpoint", "whe_x", "--to", "localhost", "--replay-last", "-1"}, "--replay-last"},
		{"unknown flag", []string{"--endpoint", "whe_x", "--to", "localhost", "--bogus"}, "bogus"},
		{"argument", []string{"--endpoint", "whe_x", "--to", "localhost", "extra"}, "extra"},
		{"no key", []string{"--data-dir", t.TempDir(), "--endpoint", "whe_x", "--to", "localhost"}, "no API key"},
		{"API unreachable", []string{"--api", "http://127.0.0.1:1/api/v1", "--endpoint", "whe_x", "--to", "localhost"}, "cannot reach the API"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "API unreachable" {
				t.Setenv("CAPTURE_API_KEY", "cap_whatever")
			}
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), append([]string{"forward"}, tt.args...), nil, &stdout, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), tt.want)
			}
		})
	}
}

// Every usage error of `capture forward` and of the Python client is one
// line in the same words, naming the flag and pointing to --help, exit 2
// (SPEC §1): the parsers' own texts (cobra's strconv errors, argparse's
// usage block) never show.
func TestForwardUsageSameInPython(t *testing.T) {
	clearCaptureEnv(t)
	base := []string{"--endpoint", "whe_x", "--to", "localhost"}
	with := func(args ...string) []string { return append(append([]string(nil), base...), args...) }
	tests := []struct {
		args []string
		want string
	}{
		{with("--bogus"), "unknown flag: --bogus"},
		{with("--bogus=1"), "unknown flag: --bogus"},
		{with("-x"), "unknown shorthand flag: 'x' in -x"},
		{with("extra-arg"), `no arguments expected, got "extra-arg"`},
		{[]string{"--to", "localhost"}, "--endpoint is required (an endpoint id, whe_…; `capture endpoint list` shows them)"},
		{[]string{"--endpoint", "whe_x"}, "--to is required (the local handler's base URL, e.g. localhost:3000)"},
		{nil, "--endpoint is required (an endpoint id, whe_…; `capture endpoint list` shows them)"},
		{[]string{"--endpoint", "x", "--to", "localhost"}, `--endpoint "x": want an endpoint id (whe_…)`},
		{[]string{"--endpoint", "x\x01\t\"é\u200b\xff", "--to", "localhost"}, `--endpoint "x\x01\t\"é\u200b\xff": want an endpoint id (whe_…)`},
		{[]string{"--endpoint", "whe_x", "--to", "ftp://x"}, `--to: "ftp://x" is not an http:// or https:// URL of a local handler (e.g. localhost:3000)`},
		{[]string{"--endpoint", "whe_x", "--to", "localhost:99999"}, `--to: "http://localhost:99999" is not an http:// or https:// URL of a local handler (e.g. localhost:3000)`},
		{[]string{"--endpoint", "whe_x", "--to", "localhost:0"}, `--to: "http://localhost:0" is not an http:// or https:// URL of a local handler (e.g. localhost:3000)`},
		{[]string{"--endpoint", "whe_x", "--to", "localhost:3000?x=1"}, `--to: "http://localhost:3000?x=1": give the handler's base URL without query, fragment or user info`},
		{with("--interval", "0"), "--interval 0: want 1 to 60 seconds"},
		{with("--interval", "61"), "--interval 61: want 1 to 60 seconds"},
		// Both read a number as Go does: 0x3d is 61.
		{with("--interval", "0x3d"), "--interval 61: want 1 to 60 seconds"},
		{with("--interval", "1.5"), "--interval 1.5: want a whole number of seconds from 1 to 60"},
		{with("--interval", "abc"), "--interval abc: want a whole number of seconds from 1 to 60"},
		{with("--interval", "1__0"), "--interval 1__0: want a whole number of seconds from 1 to 60"},
		{with("--interval"), "flag needs an argument: --interval"},
		{with("--replay-last", "-1"), "--replay-last -1: want 0 or more"},
		{with("--replay-last", "abc"), "--replay-last abc: want a whole number, 0 or more"},
		{with("--output", "xml"), `--output "xml": want text or json`},
	}
	goLine := regexp.MustCompile(`^capture: (.*) \(see 'capture forward --help'\)\n$`)
	pyLine := regexp.MustCompile(`^capture-forward\.py: (.*) \(see 'capture-forward\.py --help'\)\n$`)

	python, err := exec.LookPath("python3")
	if err != nil {
		t.Log("python3 not found on PATH: the Python client's usage errors are NOT tested")
	}
	script := filepath.Join(t.TempDir(), forward.PythonClientName)
	if err := os.WriteFile(script, forward.PythonClient, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		name := strings.Join(tt.args, " ")
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), append([]string{"forward"}, tt.args...), nil, &stdout, &stderr)
		if m := goLine.FindStringSubmatch(stderr.String()); code != 2 || m == nil || m[1] != tt.want {
			t.Errorf("capture forward %s: exit %d, stderr %q; want 2 and one line %q", name, code, stderr.String(), tt.want)
		}
		if python == "" {
			continue
		}
		cmd := exec.CommandContext(t.Context(), python, append([]string{script}, tt.args...)...)
		cmd.Env = append(os.Environ(), "CAPTURE_DATA_DIR="+t.TempDir())
		var pyOut, pyErr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &pyOut, &pyErr
		cmd.Run()
		if m := pyLine.FindStringSubmatch(pyErr.String()); cmd.ProcessState.ExitCode() != 2 || m == nil || m[1] != tt.want || pyOut.Len() != 0 {
			t.Errorf("capture-forward.py %s: exit %d, stderr %q; want 2 and one line %q", name, cmd.ProcessState.ExitCode(), pyErr.String(), tt.want)
		}
	}
}

// The example of the issue: against a local `capture serve`, with no other
// setup than its data dir, `capture forward --endpoint whe_… --to HOST:PORT`
// works.
func TestForwardAgainstServe(t *testing.T) {
	clearCaptureEnv(t)
	dir := t.TempDir()
	banner := startServe(t, dir)
	m := regexp.MustCompile(`Capture URL\s+(http://\S+)/(whe_\w+)`).FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("no capture URL in the banner:\n%s", banner)
	}
	captureBase, endpoint := m[1], m[2]

	got := make(chan *http.Request, 1)
	handler := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r }))
	defer handler.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"forward", "--data-dir", dir, "--endpoint", endpoint,
			"--to", strings.TrimPrefix(handler.URL, "http://"), "--interval", "1"}, nil, &stdout, &stderr)
	}()
	waitOutput(t, &stdout, "Press Ctrl-C to stop.")

	resp, err := http.Post(captureBase+"/"+endpoint+"/ci/7/hook?run=1", "application/json", strings.NewReader(`{"ok":true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case r := <-got:
		if r.Method != "POST" || r.RequestURI != "/ci/7/hook?run=1" {
			t.Errorf("handler got %s %s", r.Method, r.RequestURI)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("nothing delivered; stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	waitOutput(t, &stdout, "POST /ci/7/hook?run=1 → 200 OK")
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d after interrupt; stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "1 forwarded") {
		t.Errorf("no summary:\n%s", stdout.String())
	}

	// A key the API does not know: exit 2 and one line.
	t.Setenv("CAPTURE_API_KEY", "cap_notakey")
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"forward", "--data-dir", dir, "--endpoint", endpoint, "--to", "localhost"}, nil, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "refused the key") || strings.Count(errOut.String(), "\n") != 1 {
		t.Errorf("bad key: exit %d, stderr %q", code, errOut.String())
	}
	t.Setenv("CAPTURE_API_KEY", "")
	errOut.Reset()
	code = run(t.Context(), []string{"forward", "--data-dir", dir, "--endpoint", "whe_unknown", "--to", "localhost"}, nil, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "whe_unknown not found") {
		t.Errorf("unknown endpoint: exit %d, stderr %q", code, errOut.String())
	}
}
