package tui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/forward/termtext"
	"github.com/capturedev/capture/server/api/contract"
)

func TestParseFilter(t *testing.T) {
	for _, tc := range []struct {
		kind    sourceKind
		in      string
		want    filter
		wantErr string
	}{
		{kindInbox, "", filter{}, ""},
		{kindInbox, "to:bob@x.test", filter{To: "bob@x.test"}, ""},
		{kindInbox, "from:shop TO:bob", filter{From: "shop", To: "bob"}, ""},
		{kindInbox, "password reset", filter{Q: "password reset"}, ""},
		{kindInbox, `  "password reset"   link `, filter{Q: `"password reset" link`}, ""},
		{kindInbox, "subject:reset your password to:bob", filter{Subject: "reset", Q: "your password", To: "bob"}, ""},
		{kindInbox, `subject:"reset your password" to:bob`, filter{Subject: "reset your password", To: "bob"}, ""},
		{kindInbox, `"order:1042" https://shop.test/o/1042`, filter{Q: `"order:1042" https://shop.test/o/1042`}, ""},
		{kindInbox, `code é`, filter{Q: "code é"}, ""},
		{kindInbox, "method:POST", filter{}, `unknown filter "method:"`},
		{kindInbox, "order:1042", filter{}, "quote it"},
		{kindInbox, "to:", filter{}, "needs a value"},
		{kindInbox, `to:""`, filter{}, "needs a value"},
		{kindInbox, `"sign in`, filter{}, "quotation mark is not closed"},
		{kindInbox, `to:bob -- "!"`, filter{}, "nothing to search for"},
		{kindEndpoint, "POST /hooks", filter{Method: "POST", Path: "/hooks"}, ""},
		{kindEndpoint, "put", filter{Method: "PUT"}, ""},
		{kindEndpoint, "/a:b", filter{Path: "/a:b"}, ""},
		{kindEndpoint, "method:delete path:/api", filter{Method: "DELETE", Path: "/api"}, ""},
		{kindEndpoint, "post /hooks invoice.paid cus_42", filter{Method: "POST", Path: "/hooks", Q: "invoice.paid cus_42"}, ""},
		{kindEndpoint, `"delete" method:propfind`, filter{Method: "PROPFIND", Q: `"delete"`}, ""},
		{kindEndpoint, "GET POST", filter{}, "one method and one path"},
		{kindEndpoint, "/a /b", filter{}, "one method and one path"},
		{kindEndpoint, "to:bob", filter{}, `unknown filter "to:"`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseFilter(tc.kind, tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func testModel(t *testing.T, r *lipgloss.Renderer) *Model {
	t.Helper()
	m := NewModel(t.Context(), Config{Client: apiclient.New("http://127.0.0.1:1/api/v1", "cap_x", nil), Renderer: r,
		Location: time.UTC})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	return m
}

func TestFormatBody(t *testing.T) {
	m := testModel(t, asciiRenderer())
	for _, tc := range []struct {
		name, ct  string
		body      []byte
		raw       bool
		label     string
		contains  []string
		layout    bodyLayout
		notExists string
	}{
		{"empty", "", nil, false, "Body", []string{"(empty)"}, wrapWords, ""},
		{"json", "application/json; charset=utf-8", []byte(`{"a":[1,true,null],"b":"x"}`), false, "Body · JSON",
			[]string{"{\n  \"a\": [\n    1,\n    true,\n    null\n  ],\n  \"b\": \"x\"\n}"}, wrapHard, ""},
		{"json without its type", "text/plain", []byte(` [1, 2]`), false, "Body · JSON", []string{"[\n  1,\n  2\n]"}, wrapHard, ""},
		{"raw json", "application/json", []byte(`{"a":1}`), true, "Body · raw", []string{`{"a":1}`}, wrapHard, ""},
		{"form", "application/x-www-form-urlencoded", []byte("b=2&a=x+y&a=%C3%A9"), false, "Body · form",
			[]string{"b = 2\na = x y\na = é"}, wrapWords, ""},
		{"text", "text/plain", []byte("hello\tworld"), false, "Body", []string{"hello    world"}, wrapWords, ""},
		{"binary", "application/octet-stream", []byte{0xff, 0x00, 'A'}, false, "Body · binary, 3 B",
			[]string{"00000000  ff 00 41", "|..A|"}, laidOut, ""},
		{"escape in text", "text/plain", []byte("a\x1b[2Jb"), false, "Body", []string{"a^[[2Jb"}, wrapWords, "\x1b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			label, text, layout := m.formatBody(tc.body, tc.ct, tc.raw, 78)
			if label != tc.label || layout != tc.layout {
				t.Errorf("label %q layout %v; want %q %v", label, layout, tc.label, tc.layout)
			}
			for _, c := range tc.contains {
				if !strings.Contains(text, c) {
					t.Errorf("text %q lacks %q", text, c)
				}
			}
			if tc.notExists != "" && strings.Contains(text, tc.notExists) {
				t.Errorf("text %q holds %q", text, tc.notExists)
			}
		})
	}
}

func TestColorJSON(t *testing.T) {
	r := lipgloss.NewRenderer(&bytes.Buffer{})
	r.SetColorProfile(termenv.ANSI256)
	m := testModel(t, r)
	out := m.colorJSON("{\n  \"k\": \"v\\\"x\",\n  \"n\": -1.5e3,\n  \"b\": false\n}")
	if ansi.Strip(out) != "{\n  \"k\": \"v\\\"x\",\n  \"n\": -1.5e3,\n  \"b\": false\n}" {
		t.Errorf("colouring changed the text: %q", ansi.Strip(out))
	}
	for _, tok := range []string{`"k"`, `"v\"x"`, "-1.5e3", "false"} {
		if !strings.Contains(out, tok+"\x1b[0m") {
			t.Errorf("%s is not coloured on its own in %q", tok, out)
		}
	}
	if m.st.jsonKey.Render(`"k"`) == m.st.jsonString.Render(`"k"`) {
		t.Error("keys and strings look the same")
	}
}

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"plain é ✓":                         "plain é ✓",
		"a\x1b]52;c;AAAA\x07b":              "a^[]52;c;AAAA^Gb",
		"line\r\nnext\rlast":                "line\nnext\nlast",
		"tab\there":                         "tab    here",
		"c1\u009bx":                         "c1\uFFFDx",
		"bad\xffutf8":                       "bad\uFFFDutf8",
		"rlo\u202eexe.pdf":                  "rlo\uFFFDexe.pdf",
		"\u202a\u202b\u202c\u202d":          "\uFFFD\uFFFD\uFFFD\uFFFD",
		"\u2066lri\u2067rli\u2068fsi\u2069": "\uFFFDlri\uFFFDrli\uFFFDfsi\uFFFD",
		"שלום \u200fمرحبا":                  "שלום \u200fمرحبا",
	} {
		if got := clean(in); got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
	}
}

// The viewer escapes exactly the characters termtext.ActsOnTerminal names
// (and lays out tab and carriage return its own way), so a change of
// that rule reaches the viewer too.
func TestEscapeControlsFollowsTermtext(t *testing.T) {
	for r := rune(0); r <= 0x3000; r++ {
		if r == utf8.RuneError {
			continue
		}
		in := "a" + string(r) + "b"
		changed := escapeControls(in) != in
		if want := termtext.ActsOnTerminal(r) || r == '\t'; changed != want {
			t.Errorf("escapeControls(%q) = %q: changed %v, want %v", in, escapeControls(in), changed, want)
		}
	}
}

func TestSafeNameAndWriteNew(t *testing.T) {
	for in, want := range map[string]string{
		"report.pdf":          "report.pdf",
		"../../etc/passwd":    "passwd",
		`C:\Users\x\evil.exe`: "evil.exe",
		".bashrc":             "bashrc",
		"a\x00b:c.txt":        "a_b_c.txt",
		"":                    "att_1",
		"..":                  "att_1",
	} {
		if got := safeName(in, "att_1"); got != want {
			t.Errorf("safeName(%q) = %q, want %q", in, got, want)
		}
	}
	dir := t.TempDir()
	for i, want := range []string{"r.pdf", "r-1.pdf", "r-2.pdf"} {
		path, err := writeNew(dir, "r.pdf", []byte{byte(i)})
		if err != nil || path != filepath.Join(dir, want) {
			t.Fatalf("writeNew #%d = %q, %v; want %s", i, path, err, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "r.pdf")); !bytes.Equal(b, []byte{0}) {
		t.Errorf("the first file was overwritten: %v", b)
	}
}

func TestDescribe(t *testing.T) {
	c := apiclient.New("http://127.0.0.1:1/api/v1", "cap_x", nil)
	_, err := c.Me(t.Context())
	if got := describe(err); got != "cannot reach the API: connection refused" {
		t.Errorf("describe(refused) = %q", got)
	}
	waits := &contract.Error{Status: 429, Code: contract.CodeTooManyWaits, Message: "busy"}
	if got := describe(fmt.Errorf("poll: %w", waits)); !strings.Contains(got, "wait slots are busy (429)") {
		t.Errorf("describe(too_many_waits) = %q", got)
	}
}

// TestNoColor checks that NO_COLOR takes every colour away, leaving the
// marks that carry meaning.
func TestNoColor(t *testing.T) {
	t.Setenv("TERM", "xterm-256color")
	draw := func() string {
		r := lipgloss.NewRenderer(&bytes.Buffer{}, termenv.WithTTY(true))
		m := testModel(t, r)
		m.Update(sourcesMsg{inboxes: []contract.Inbox{{ID: "inb_1", Name: "default", MessageCount: 1}}})
		subject := "Hello"
		m.Update(pageMsg{gen: m.list.gen, items: []capture{{msg: &contract.MessageSummary{ID: "msg_1",
			Subject: subject, ReceivedAt: contract.Time{Time: time.Now()}}}}})
		m.stop()
		return m.View()
	}
	t.Setenv("NO_COLOR", "")
	if colored := draw(); !strings.Contains(colored, "\x1b[38;") {
		t.Fatalf("without NO_COLOR the screen should have colours:\n%q", colored)
	}
	t.Setenv("NO_COLOR", "1")
	plain := draw()
	if strings.Contains(plain, "\x1b[") {
		t.Errorf("with NO_COLOR the screen has escape sequences:\n%q", plain)
	}
	if !strings.Contains(plain, "› default") || !strings.Contains(plain, "› ") {
		t.Errorf("the selection must still show:\n%s", plain)
	}
}

func TestStartErrors(t *testing.T) {
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/api/v1"
	ln.Close()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"bad key", Config{Client: apiclient.New(e.srv.APIBase(), "cap_wrong", nil)}, "refused the key"},
		// Unreachable is no reason not to start (TestStartBeforeServer):
		// what stops it here is the missing terminal.
		{"unreachable", Config{Client: apiclient.New(closed, e.boot.Secret, nil), Output: &bytes.Buffer{}}, "needs a terminal"},
		{"not the API", Config{Client: apiclient.New(e.srv.APIBase()+"/nope", e.boot.Secret, nil)}, "does not serve the read API"},
		{"no terminal", Config{Client: e.client, Output: &bytes.Buffer{}}, "needs a terminal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			err := Run(ctx, tc.cfg)
			var se *StartError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, want a StartError saying %q", err, tc.want)
			}
		})
	}
}
