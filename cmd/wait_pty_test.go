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
