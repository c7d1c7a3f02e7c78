package forward_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/capturedev/capture/forward"
	"github.com/capturedev/capture/forward/internal/capturetest"
	"github.com/capturedev/capture/forward/termtext"
)

// The Python client's visible() shows text as termtext.Visible does, on
// every kind of character either acts on or keeps.
func TestVisibleAgrees(t *testing.T) {
	py := python3(t)
	var in []string
	for r := rune(0); r <= 0xa0; r++ { // C0, DEL, C1 and their neighbours
		in = append(in, "a"+string(r)+"b")
	}
	for _, r := range []rune{0x200e, 0x200f, 0x061c, 0x2029, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x202f, 0x2065, 0x2066, 0x2067, 0x2068, 0x2069, 0x206a, 0xfffd} {
		in = append(in, "a"+string(r)+"b")
	}
	in = append(in,
		"", "plain é ✓ 日本", "lone\rcr", "end cr\r", "\rstart", "crlf\r\nkept", "cr cr lf\r\r\n", "lf cr\n\r",
		"tab\there", "\x1b]52;c;AAAA\x07", "\x1b[2J\x1b[H",
		"שלום עולם \u200fمرحبا\u200e \u061c", "\u202eevil\u202c", "\u2067isolate\u2069",
	)
	want := make([]string, len(in))
	for i, s := range in {
		want[i] = termtext.Visible(s)
	}
	table, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", `import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("capture_forward", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
print(json.dumps([m.visible(s) for s in json.load(sys.stdin)]))`, pythonScript(t))
	cmd.Stdin = bytes.NewReader(table)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	var got []string
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(in) {
		t.Fatalf("python3 wrote %q (%v), want %d strings", out, err, len(in))
	}
	for i := range in {
		if got[i] != want[i] {
			t.Errorf("visible(%q): Python %q, Go %q", in[i], got[i], want[i])
		}
	}
}

// A reason phrase the handler writes with controls in it (an escape
// sequence, BEL, DEL, a lone CR, C1 bytes) is shown on the delivery line,
// not acted on by the terminal.
func TestForwardReasonControls(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		h := newRawHandlerAnswering(t, "HTTP/1.1 200 OK\x1b]0;pwned\x07 \x9b2J\x7f\r\tdone")
		s := c.start(t, opts{api: srv.APIBase, key: srv.Key, endpoint: srv.EndpointID, to: h.URL, output: forward.OutputText})
		s.stdout.waitContains(t, "Press Ctrl-C to stop.", 1)
		id := srv.Post(t, "POST", "/hook", nil, nil)
		out := s.stdout.waitContains(t, " → ", 2)
		line := regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d ` + id + ` POST /hook → ` +
			regexp.QuoteMeta("200 OK^[]0;pwned^G \uFFFD2J\uFFFD^M\tdone") + ` \d+ ms 0 B$`)
		if !line.MatchString(out) {
			t.Errorf("no delivery line with the reason made visible in:\n%q", out)
		}
		if strings.ContainsAny(out, "\x1b\x07\x7f\u009b") || strings.Contains(out, "\r\tdone") {
			t.Errorf("controls of the reason reach the terminal:\n%q", out)
		}
	})
}

// In JSON lines, a path the sender wrote with C1 controls and a bidi
// override is written with \u escapes: the same string to a program that
// reads the line, and nothing a terminal showing it acts on.
func TestForwardJSONControls(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		h := newHandler(t, nil)
		s := c.start(t, opts{api: srv.APIBase, key: srv.Key, endpoint: srv.EndpointID, to: h.URL})
		s.ready(t)
		path := "/c1\u009b2J\u009d0;TITLE\u009c\u202eevil\u2066x\u2069"
		srv.PostRaw(t, "POST /{endpoint}"+path+" HTTP/1.1\r\nHost: sender.example\r\nContent-Length: 0\r\n\r\n")
		ds := s.waitDeliveries(t, 1)
		if got := ds[0]["path"]; got != path {
			t.Errorf("path read back from the JSON line: %q, want %q", got, path)
		}
		if out := s.stdout.String(); strings.ContainsAny(out, "\u009b\u009d\u009c\u202e\u2066\u2069") {
			t.Errorf("controls of the path reach the terminal in JSON:\n%q", out)
		}
	})
}
