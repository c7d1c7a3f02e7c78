package mcp_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/forward/mcp"
	"github.com/capturedev/capture/forward/mcp/mcptest"
)

// answer is a line the server wrote: a result or an error.
type answer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// overStdio writes lines to a server on the stdio transport, closes its
// input, and returns every line it wrote and what Run returned.
func overStdio(t *testing.T, e *mcptest.Env, lines ...string) ([]string, error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	server := mcp.New(apiclient.New(e.APIBase, e.Key, nil), "test")
	ran := make(chan error, 1)
	go func() {
		ran <- server.Run(t.Context(), mcp.StdioTransport(inR, outW))
		outW.Close()
	}()
	go func() {
		for _, l := range lines {
			io.WriteString(inW, l+"\n")
		}
		inW.Close()
	}()
	var out []string
	sc := bufio.NewScanner(outR)
	for sc.Scan() {
		if !json.Valid(sc.Bytes()) {
			t.Errorf("not JSON on the output: %q", sc.Text())
		}
		out = append(out, sc.Text())
	}
	select {
	case err := <-ran:
		return out, err
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not end after its input did")
		return nil, nil
	}
}

// initialize opens a session of the protocol version.
func initialize(version string) []string {
	return []string{
		fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`, version),
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}
}

// A line that is not a JSON-RPC message is answered with JSON-RPC's error
// for it and skipped; the calls around it are answered as usual.
func TestStdioSkipsWhatIsNotAMessage(t *testing.T) {
	e := mcptest.Start(t)
	lines, err := overStdio(t, e, append(initialize("2025-06-18"),
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_inboxes","arguments":{}}}`,
		`garbage`,
		`{"jsonrpc":"2.0","id":3,"method":"ping"`,
		`42`,
		`{"jsonrpc":"1.0","id":"five","method":"ping"}`,
		`[{"jsonrpc":"2.0","id":6,"method":"ping"}]`,
		"\r",
		`{"jsonrpc":"2.0","id":7,"method":"ping"}`,
	)...)
	if err != nil && err != io.EOF {
		t.Errorf("Run: %v", err)
	}
	results := map[string]bool{}
	var refusals []string
	for _, l := range lines {
		var a answer
		json.Unmarshal([]byte(l), &a)
		switch {
		case a.Result != nil:
			results[string(a.ID)] = true
		case a.Error != nil && (a.Error.Code == -32700 || a.Error.Code == -32600):
			refusals = append(refusals, string(a.ID)+" "+a.Error.Message)
		default:
			t.Errorf("unexpected answer: %+v", a)
		}
	}
	for _, id := range []string{"1", "2", "7"} {
		if !results[id] {
			t.Errorf("call %s unanswered; answers:\n%s", id, strings.Join(lines, "\n"))
		}
	}
	want := []string{
		"null Parse error: a line that is not JSON",
		"null Parse error: a line that is not JSON",
		"null Invalid Request: the line is JSON but not",
		`"five" Invalid Request: the line is JSON but not`,
		"null Invalid Request: protocol version 2025-06-18 has no batches",
	}
	if len(refusals) != len(want) {
		t.Fatalf("refusals %q, want %d", refusals, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(refusals[i], w) {
			t.Errorf("refusal %d = %q, want %q…", i, refusals[i], w)
		}
	}
}

// Before 2025-06-18 a batch is a line of its own, answered as a batch.
func TestStdioPassesBatchesOfOlderVersions(t *testing.T) {
	e := mcptest.Start(t)
	lines, err := overStdio(t, e, append(initialize("2025-03-26"),
		`[]`,
		`[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`,
		`[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","id":4,"method":"ping"}]`)...)
	if err != nil && err != io.EOF {
		t.Errorf("Run: %v", err)
	}
	// Refusals are written as their lines are read, answers as their
	// calls end: in no particular order.
	if len(lines) != 4 {
		t.Fatalf("answers:\n%s", strings.Join(lines, "\n"))
	}
	var batchLine string
	for _, want := range []string{`"id":1,"result"`, `"error":{"code":-32600,"message":"Invalid Request: an empty batch`,
		`"error":{"code":-32600,"message":"Invalid Request: a batch using one id twice`, `[`} {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, want) || (want != "[" && strings.Contains(l, want)) {
				found = true
				if want == "[" {
					batchLine = l
				}
			}
		}
		if !found {
			t.Errorf("no answer with %s:\n%s", want, strings.Join(lines, "\n"))
		}
	}
	var batch []answer
	if err := json.Unmarshal([]byte(batchLine), &batch); err != nil || len(batch) != 2 || batch[0].Result == nil || batch[1].Result == nil {
		t.Errorf("batch answer = %s", batchLine)
	}
}

// A line longer than the SDK takes is answered once and dropped whole;
// the next line is read as usual.
func TestStdioSkipsALineTooLong(t *testing.T) {
	e := mcptest.Start(t)
	long := `{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"` + strings.Repeat("a", 17<<20) + `"}}`
	lines, err := overStdio(t, e, append(initialize("2025-06-18"), long, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)...)
	if err != nil && err != io.EOF {
		t.Errorf("Run: %v", err)
	}
	var refused, answered []string
	for _, l := range lines {
		var a answer
		json.Unmarshal([]byte(l), &a)
		if a.Error != nil {
			refused = append(refused, a.Error.Message)
		} else {
			answered = append(answered, string(a.ID))
		}
	}
	if len(refused) != 1 || !strings.Contains(refused[0], "a line longer than 16 MiB was skipped") {
		t.Errorf("refusals: %q", refused)
	}
	if !slices.Equal(answered, []string{"1", "3"}) {
		t.Errorf("answered %q, want 1 and 3", answered)
	}
}
