//go:build linux

package cmd

import (
	"strings"
	"testing"
)

// On a terminal `wait request --print body` ends a text body's line, so
// that the prompt does not run on after it; into a pipe or a file the body
// stays byte for byte (TestWaitRequest), a signature over it still checks.
func TestWaitBodyEndsItsLineOnATerminal(t *testing.T) {
	s := serveBinary(t)
	s.hook(t, "POST", "/term", []byte(`{"hello":"wörld"}`))
	t.Setenv("CAPTURE_API_KEY", s.key)
	t.Setenv("CAPTURE_DATA_DIR", t.TempDir())
	term := runOnTerminal(t, "wait", "request", "--api", s.api, "--since", "1m", "--print", "body")
	code, screen := term.exit()
	if code != 0 || !strings.HasSuffix(screen, `{"hello":"wörld"}`+"\r\n") {
		t.Errorf("exit %d, terminal shows %q; want the body and a line end", code, screen)
	}
}

// A capture's sender must not act on the terminal that `capture wait`
// prints it on (set the clipboard with OSC 52, the window title, erase the
// screen, reverse the line): on a terminal every part is shown with its
// controls visible, ^[ for ESC, U+FFFD for a C1 control or a bidi
// override; into a pipe it stays byte for byte
// (TestWaitPrintsHostileCapturesByteForByte).
func TestWaitShowsCapturesHarmlessOnATerminal(t *testing.T) {
	s := serveBinary(t)
	s.rawHook(t, hostilePath, hostile)
	s.mail(t, "eve@example.com", "=?utf-8?Q?Invoice_=E2=80=AEfdp.exe?=", hostile)
	t.Setenv("CAPTURE_API_KEY", s.key)
	t.Setenv("CAPTURE_DATA_DIR", t.TempDir())
	shownBody := "build ok^[]52;c;cm0gLXJmIH4K^G^[]0;owned^G^[[2J^[[3J\r\n"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"request", "--path", "/term/", "--print", "body"}, shownBody},
		{[]string{"request", "--path", "/term/", "--print", "path"}, "/term/\uFFFD2J\uFFFD0;owned\uFFFD\uFFFDexe.pdf\r\n"},
		// Still JSON, and the same: the controls are written as escapes.
		{[]string{"request", "--path", "/term/", "--print", "json"}, `"path": "/term/\u009b2J\u009d0;owned\u009c\u202eexe.pdf"`},
		{[]string{"request", "--path", "/term/", "--print", "json"}, `"body": "build ok\u001b]52;c;cm0gLXJmIH4K\u0007`},
		{[]string{"email", "--to", "eve@", "--print", "text"}, shownBody},
		{[]string{"email", "--to", "eve@", "--print", "subject"}, "Invoice \uFFFDfdp.exe\r\n"},
	} {
		term := runOnTerminal(t, append(append([]string{"wait"}, tt.args...), "--api", s.api, "--since", "1m")...)
		code, screen := term.exit()
		if code != 0 || !strings.Contains(screen, tt.want) || strings.ContainsAny(screen, "\x1b\x07\u009b\u009d\u009c\u202e") {
			t.Errorf("wait %s: exit %d, the terminal shows %q; want %q and no controls", strings.Join(tt.args, " "), code, screen, tt.want)
		}
	}
}
