package forward_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capturedev/capture/forward"
	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/server/api/contract"
)

// waitTimeout bounds every wait of these tests; the bursts and the rate
// limit they meet take a few seconds, nothing should take this long.
const waitTimeout = 60 * time.Second

// hit is one request the local handler received.
type hit struct {
	Method string
	URI    string
	Host   string
	Header http.Header
	Body   []byte
	Length int64
}

// handler is a real local HTTP handler that records what it receives.
type handler struct {
	URL  string
	Host string

	mu      sync.Mutex
	hits    []hit
	changed chan struct{}
	respond func(w http.ResponseWriter, r *http.Request)
}

func newHandler(t *testing.T, respond func(w http.ResponseWriter, r *http.Request)) *handler {
	h := &handler{changed: make(chan struct{}), respond: respond}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	h.URL = srv.URL
	h.Host = strings.TrimPrefix(srv.URL, "http://")
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.hits = append(h.hits, hit{Method: r.Method, URI: r.RequestURI, Host: r.Host, Header: r.Header.Clone(), Body: body, Length: r.ContentLength})
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
	if h.respond != nil {
		h.respond(w, r)
		return
	}
	w.Write([]byte("ok"))
}

func (h *handler) got() []hit {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hit(nil), h.hits...)
}

// waitFor returns the hits once there are at least n.
func (h *handler) waitFor(t *testing.T, n int) []hit {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		hits, changed := append([]hit(nil), h.hits...), h.changed
		h.mu.Unlock()
		if len(hits) >= n {
			return hits
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("handler got %d requests within %s, want %d: %v", len(hits), waitTimeout, n, uris(hits))
		}
	}
}

func uris(hits []hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Method + " " + h.URI
	}
	return out
}

// output collects what a client writes, and wakes waiters on every write.
type output struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newOutput() *output { return &output{changed: make(chan struct{})} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	close(o.changed)
	o.changed = make(chan struct{})
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// has says whether the output holds sub, waiting (within waitTimeout)
// for it to come. It may be called outside the test's goroutine.
func (o *output) has(sub string) bool { return o.hasWithin(sub, waitTimeout) }

// hasWithin is has waiting at most d: for a check made while the client
// waits on the caller (a handler's answer), which must end well before
// the client gives up waiting.
func (o *output) hasWithin(sub string, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		o.mu.Lock()
		s, changed := o.buf.String(), o.changed
		o.mu.Unlock()
		if strings.Contains(s, sub) {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

// waitFor waits until ok holds for the whole output so far.
func (o *output) waitFor(t *testing.T, what string, ok func(string) bool) string {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		o.mu.Lock()
		s, changed := o.buf.String(), o.changed
		o.mu.Unlock()
		if ok(s) {
			return s
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("no %s within %s; output so far:\n%s", what, waitTimeout, s)
		}
	}
}

func (o *output) waitContains(t *testing.T, sub string, count int) string {
	t.Helper()
	return o.waitFor(t, strconv.Quote(sub), func(s string) bool { return strings.Count(s, sub) >= count })
}

// session is one running client, Go or Python.
type session struct {
	stdout, stderr *output
	interrupt      func()
	kill           func()
	exited         chan struct{}
	code           int
}

func newSession() *session {
	return &session{stdout: newOutput(), stderr: newOutput(), exited: make(chan struct{})}
}

// stop interrupts the client as Ctrl-C would and returns its exit code.
func (s *session) stop(t *testing.T) int {
	t.Helper()
	select {
	case <-s.exited:
		return s.code
	default:
	}
	s.interrupt()
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		s.kill()
		<-s.exited
		t.Errorf("client did not stop within 20 s of an interrupt")
	}
	return s.code
}

func (s *session) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-s.exited:
		return s.code
	case <-time.After(waitTimeout):
		t.Fatalf("client still running after %s; stderr:\n%s", waitTimeout, s.stderr)
	}
	return 0
}

type event map[string]any

func (s *session) events(t *testing.T) []event {
	t.Helper()
	var out []event
	for _, line := range strings.Split(s.stdout.String(), "\n") {
		if line == "" {
			continue
		}
		var e event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("stdout line is not JSON: %q", line)
		}
		out = append(out, e)
	}
	return out
}

func (s *session) deliveries(t *testing.T) []event {
	var out []event
	for _, e := range s.events(t) {
		if e["type"] == "delivery" {
			out = append(out, e)
		}
	}
	return out
}

// ready waits for the ready object, and fails at once if the client exits
// without one.
func (s *session) ready(t *testing.T) event {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		s.stdout.mu.Lock()
		out, changed := s.stdout.buf.String(), s.stdout.changed
		s.stdout.mu.Unlock()
		if strings.Contains(out, `"type":"ready"`) {
			return s.events(t)[0]
		}
		select {
		case <-changed:
		case <-s.exited:
			if !strings.Contains(s.stdout.String(), `"type":"ready"`) {
				t.Fatalf("client exited %d before it was ready; stderr:\n%s", s.code, s.stderr)
			}
		case <-deadline.C:
			t.Fatalf("no ready object within %s; stderr:\n%s", waitTimeout, s.stderr)
		}
	}
}

// waitDeliveries waits for n delivery objects.
func (s *session) waitDeliveries(t *testing.T, n int) []event {
	t.Helper()
	s.stdout.waitContains(t, `"type":"delivery"`, n)
	return s.deliveries(t)
}

// opts are the flags both clients are started with.
type opts struct {
	api, key, endpoint, to string
	interval               int // seconds; 0 means 1
	replayLast             int
	output                 string // "" means json
	dataDir                string // Python only: where credentials.json is looked for
}

type client struct {
	name  string
	start func(t *testing.T, o opts) *session
}

var clients = []client{{"go", startGo}, {"python", startPython}}

// both runs fn for the Go and the Python client, in parallel.
func both(t *testing.T, fn func(t *testing.T, c client)) {
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fn(t, c)
		})
	}
}

func (o opts) withDefaults() opts {
	if o.interval == 0 {
		o.interval = 1
	}
	if o.output == "" {
		o.output = forward.OutputJSON
	}
	return o
}

func startGo(t *testing.T, o opts) *session {
	o = o.withDefaults()
	s := newSession()
	ctx, cancel := context.WithCancel(context.Background())
	s.interrupt, s.kill = cancel, cancel
	go func() {
		err := forward.Run(ctx, forward.Config{
			Endpoint:   o.endpoint,
			To:         o.to,
			Interval:   time.Duration(o.interval) * time.Second,
			ReplayLast: o.replayLast,
			Output:     o.output,
			Stdout:     s.stdout,
			Stderr:     s.stderr,
			Client:     apiclient.New(o.api, o.key, nil),
		})
		// As `capture forward` maps it.
		var se *forward.StartError
		switch {
		case errors.As(err, &se):
			io.WriteString(s.stderr, "capture: "+err.Error()+"\n")
			s.code = 2
		case err != nil:
			io.WriteString(s.stderr, "capture: "+err.Error()+"\n")
			s.code = 1
		}
		close(s.exited)
	}()
	t.Cleanup(func() { s.stop(t) })
	return s
}

var (
	pythonOnce sync.Once
	pythonSkip string
)

// python3 returns the interpreter, or skips the test saying why.
func python3(t *testing.T) string {
	t.Helper()
	pythonOnce.Do(func() {
		path, err := exec.LookPath("python3")
		if err != nil {
			pythonSkip = "python3 not found on PATH: the Python forwarding client is NOT tested"
			return
		}
		out, err := exec.Command(path, "-c", "import sys; print(sys.version_info >= (3, 10))").Output()
		if err != nil || strings.TrimSpace(string(out)) != "True" {
			pythonSkip = "python3 is older than 3.10: the Python forwarding client is NOT tested"
		}
	})
	if pythonSkip != "" {
		t.Log(pythonSkip)
		t.Skip(pythonSkip)
	}
	return "python3"
}

// pythonScript writes the embedded client, the very bytes the server
// serves for download, to a file.
func pythonScript(t *testing.T) string {
	path := filepath.Join(t.TempDir(), forward.PythonClientName)
	if err := os.WriteFile(path, forward.PythonClient, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// pythonEnv is the environment without any capture settings of the
// machine running the tests.
func pythonEnv(t *testing.T, key, dataDir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CAPTURE_") {
			env = append(env, kv)
		}
	}
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	env = append(env, "CAPTURE_DATA_DIR="+dataDir)
	if key != "" {
		env = append(env, "CAPTURE_API_KEY="+key)
	}
	return env
}

func startPython(t *testing.T, o opts) *session {
	o = o.withDefaults()
	args := []string{pythonScript(t), "--endpoint", o.endpoint, "--to", o.to,
		"--interval", strconv.Itoa(o.interval), "--output", o.output}
	if o.api != "" {
		args = append(args, "--api", o.api)
	}
	if o.replayLast > 0 {
		args = append(args, "--replay-last", strconv.Itoa(o.replayLast))
	}
	return runPython(t, pythonEnv(t, o.key, o.dataDir), args...)
}

func runPython(t *testing.T, env []string, args ...string) *session {
	cmd := exec.Command(python3(t), args...)
	cmd.Env = env
	s := newSession()
	cmd.Stdout, cmd.Stderr = s.stdout, s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.interrupt = func() { cmd.Process.Signal(os.Interrupt) }
	s.kill = func() { cmd.Process.Kill() }
	go func() {
		cmd.Wait()
		s.code = cmd.ProcessState.ExitCode()
		close(s.exited)
	}()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// eventually polls cond until it holds, for conditions only visible
// through the API.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, waitTimeout)
		}
		<-tick.C
	}
}

// getRequest reads a capture, waiting out the rate limit the clients under
// test may be using up.
func getRequest(t *testing.T, c *apiclient.Client, id string) contract.Request {
	t.Helper()
	r, err := apiclient.Retry(t.Context(), func() (contract.Request, error) { return c.Request(t.Context(), id) }, nil)
	if err != nil {
		t.Fatalf("GET /requests/%s: %v", id, err)
	}
	return r
}

// waitRecorded waits until the capture's history holds n deliveries.
func waitRecorded(t *testing.T, c *apiclient.Client, id string, n int) []contract.Delivery {
	t.Helper()
	var ds []contract.Delivery
	eventually(t, "delivery of "+id+" recorded", func() bool {
		ds = getRequest(t, c, id).Deliveries
		return len(ds) >= n
	})
	return ds
}
