package cmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capturedev/capture/forward/mcp/mcptest"
)

// mcpCommand is `capture mcp` with args and a clean environment: the
// machine's own capture settings stay out, key is the only one it sees.
func mcpCommand(t *testing.T, key string, args ...string) *exec.Cmd {
	cmd := exec.Command(binary, append([]string{"mcp", "--data-dir", t.TempDir()}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CAPTURE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if key != "" {
		cmd.Env = append(cmd.Env, "CAPTURE_API_KEY="+key)
	}
	return cmd
}

// The whole tool suite, through the real binary over stdio.
func TestMCPStdio(t *testing.T) {
	e := mcptest.Start(t)
	mcptest.Run(t, e, func(t *testing.T, key string) *mcpsdk.ClientSession {
		cmd := mcpCommand(t, key, "--api", e.APIBase)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "mcp-test", Version: "v0"}, nil)
		sess, err := client.Connect(t.Context(), &mcpsdk.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("connect: %v (stderr: %s)", err, &stderr)
		}
		t.Cleanup(func() {
			// Closing stdin is how a client ends the server: quietly, exit 0.
			sess.Close()
			if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 0 || stderr.Len() > 0 {
				t.Errorf("capture mcp ended with %v, stderr %q", cmd.ProcessState, &stderr)
			}
		})
		return sess
	})
}

// stdout carries the protocol and nothing else, or the client would choke
// on it; closing stdin ends the server quietly.
func TestMCPStdoutIsProtocolOnly(t *testing.T) {
	e := mcptest.Start(t)
	cmd := mcpCommand(t, e.Key, "--api", e.APIBase)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	io.WriteString(stdin, strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_inboxes","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_message","arguments":{"message_id":"msg_nope"}}}`,
	}, "\n")+"\n")

	answers := map[float64]map[string]any{}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	for len(answers) < 3 && sc.Scan() {
		var msg map[string]any
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil || msg["jsonrpc"] != "2.0" {
			t.Fatalf("stdout line is not JSON-RPC: %q", sc.Text())
		}
		if id, ok := msg["id"].(float64); ok {
			answers[id] = msg
		}
	}
	stdin.Close()
	if rest, _ := io.ReadAll(stdout); len(rest) > 0 {
		t.Errorf("more on stdout after the answers: %q", rest)
	}
	if err := cmd.Wait(); err != nil || stderr.Len() > 0 {
		t.Errorf("capture mcp after stdin closed: %v, stderr %q", err, &stderr)
	}

	init, _ := answers[1]["result"].(map[string]any)
	info, _ := init["serverInfo"].(map[string]any)
	if instructions, _ := init["instructions"].(string); info["name"] != "capture" || !strings.Contains(instructions, "untrusted") {
		t.Errorf("initialize answer: %v", answers[1])
	}
	for id, want := range map[float64]string{2: e.InboxID, 3: "not_found (HTTP 404)"} {
		res, _ := answers[id]["result"].(map[string]any)
		if b, _ := json.Marshal(res); !strings.Contains(string(b), want) {
			t.Errorf("answer %v: %v, want %q in the result", id, answers[id], want)
		}
	}
}

// A script writes its calls and closes stdin at once (printf … | capture
// mcp): every call read is answered before the server ends, a wait
// included, and one the client cancelled is not waited for.
func TestMCPStdioAnswersWhatItReadBeforeEOF(t *testing.T) {
	e := mcptest.Start(t)
	for range 3 {
		// A wait of 30 s is cancelled by its client: the end must not
		// wait for it.
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		base := mcpCommand(t, e.Key, "--api", e.APIBase)
		cmd := exec.CommandContext(ctx, base.Path, base.Args[1:]...)
		cmd.Env = base.Env
		cmd.Stdin = strings.NewReader(strings.Join([]string{
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
			`{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"list_inboxes","arguments":{}}}`,
			`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"list_requests","arguments":{"path":"/nothing/","wait":1}}}`,
			`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"list_requests","arguments":{"path":"/nothing/","wait":30}}}`,
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`,
			// Ids the server writes back in another spelling, and an id
			// used again while its first call may still run (the server
			// answers one of the two).
			`{"jsonrpc":"2.0","id":7.0,"method":"ping"}`,
			`{"jsonrpc":"2.0","id":"\u0041","method":"ping"}`,
			`{"jsonrpc":"2.0","id":4,"method":"ping"}`,
			// The last line has no newline.
			`{"jsonrpc":"2.0","id":6,"method":"ping"}`,
		}, "\n"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || stderr.Len() > 0 {
			t.Fatalf("capture mcp: %v, stderr %q", err, &stderr)
		}
		answered := map[string]bool{}
		for line := range strings.Lines(string(out)) {
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Result json.RawMessage `json:"result"`
			}
			// The cancelled call may be answered so, or not at all.
			if json.Unmarshal([]byte(line), &msg) != nil || (msg.Result == nil && string(msg.ID) != "5") {
				t.Errorf("not an answer: %q", line)
			}
			answered[string(msg.ID)] = true
		}
		for _, id := range []string{"1", "2", `"three"`, "4", "6", "7", `"A"`} {
			if !answered[id] {
				t.Errorf("call %s unanswered; stdout:\n%s", id, out)
			}
		}
	}
}

func TestMCPStartErrors(t *testing.T) {
	e := mcptest.Start(t)
	for _, tt := range []struct {
		name string
		key  string
		args []string
		want string
	}{
		{"wrong key", "cap_0000000000000000000000000000wrong", []string{"--api", e.APIBase}, "refused the key in $CAPTURE_API_KEY (unknown or revoked)"},
		{"malformed key", "nonsense", []string{"--api", e.APIBase}, "refused the key in $CAPTURE_API_KEY"},
		{"no key", "", []string{"--api", e.APIBase}, "no API key"},
		{"API unreachable", e.Key, []string{"--api", "http://127.0.0.1:1/api/v1"}, "cannot reach the API at http://127.0.0.1:1/api/v1"},
		{"not an API URL", e.Key, []string{"--api", "ftp://example.test"}, "want an absolute http:// or https:// URL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := mcpCommand(t, tt.key, tt.args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if code != 2 || stdout.Len() > 0 || len(lines) != 1 || !strings.HasPrefix(lines[0], "capture: ") ||
				!strings.Contains(lines[0], tt.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2, nothing, and one line with %q", code, &stdout, &stderr, tt.want)
			}
		})
	}

	r := capture(t, "mcp", "extra")
	if r.code != 2 || !strings.Contains(r.stderr, "extra") || r.stdout != "" {
		t.Errorf("mcp with an argument: %+v", r)
	}
}

// SIGTERM (or SIGINT) ends `capture mcp` at once, waits in flight
// included: each is cancelled, answered so, and gives its slot back,
// rather than holding the process up until its own timeout.
func TestMCPStdioSignalCancelsCalls(t *testing.T) {
	e := mcptest.Start(t)
	for _, sig := range []os.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := mcpCommand(t, e.Key, "--api", e.APIBase)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			var waitErr error
			go func() { waitErr = cmd.Wait(); close(exited) }()
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
			})
			io.WriteString(stdin, strings.Join([]string{
				`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
				`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
				`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"wait_for_message","arguments":{"subject":"never","timeout_seconds":30}}}`,
				`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_requests","arguments":{"path":"/never/","wait":30}}}`,
			}, "\n")+"\n")
			awaitHeldWaits(t, e, 2)

			cmd.Process.Signal(sig)
			select {
			case <-exited:
				if waitErr != nil || stderr.Len() > 0 {
					t.Errorf("capture mcp after %v: %v, stderr %q", sig, waitErr, &stderr)
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("capture mcp still running 15 s after %v, its waits (30 s) holding it", sig)
			}
			answered := 0
			for line := range strings.Lines(stdout.String()) {
				var msg struct {
					ID     int `json:"id"`
					Result struct {
						IsError bool `json:"isError"`
						Content []struct {
							Text string `json:"text"`
						} `json:"content"`
					} `json:"result"`
				}
				if json.Unmarshal([]byte(line), &msg) == nil && msg.ID >= 2 &&
					(!msg.Result.IsError || len(msg.Result.Content) == 0 || !strings.Contains(msg.Result.Content[0].Text, "cancelled")) {
					t.Errorf("call %d at %v answered %s, want a tool error: cancelled", msg.ID, sig, line)
				}
				if msg.ID >= 2 {
					answered++
				}
			}
			if answered != 2 {
				t.Errorf("%d of the 2 calls in flight answered at %v:\n%s", answered, sig, &stdout)
			}
			awaitHeldWaits(t, e, 0)
		})
	}
}

// awaitHeldWaits waits until the API holds n waits of e's project.
func awaitHeldWaits(t *testing.T, e *mcptest.Env, n int) {
	t.Helper()
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for deadline := time.Now().Add(10 * time.Second); ; <-poll.C {
		held, err := e.HeldWaits()
		if err != nil {
			t.Fatal(err)
		}
		if held == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waits held after 10 s, want %d", held, n)
		}
	}
}
