package tui

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeTmux puts a tmux first on PATH that runs script (sh) and claims to
// be inside tmux; what it is given on standard input goes to the file
// it names in $BUF.
func fakeTmux(t *testing.T, script string) (buf string) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tmux"), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	buf = filepath.Join(dir, "buffer")
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("TMUX", "/tmp/fake,1,0")
	t.Setenv("BUF", buf)
	return buf
}

// TestCopyInOldTmux copies inside a tmux older than 3.2, which has no
// load-buffer -w: the text goes to its paste buffer all the same.
func TestCopyInOldTmux(t *testing.T) {
	buf := fakeTmux(t, `[ "$2" = -w ] && { echo "load-buffer: unknown flag -w" >&2; exit 1; }; cat >"$BUF"`)
	var out bytes.Buffer
	how, err := copyText(&out, "482915")
	if err != nil || how != copiedTmux {
		t.Fatalf("copied to %v, %v; want tmux's buffer", how, err)
	}
	if b, _ := os.ReadFile(buf); string(b) != "482915" {
		t.Errorf("the buffer holds %q", b)
	}
	if out.Len() > 0 {
		t.Errorf("wrote %q to the terminal as well", out.String())
	}
}

// TestCopyWhenTmuxRefuses copies inside a tmux that takes no buffer, or
// does not answer: the text goes out as OSC 52 wrapped for tmux's
// passthrough, which an unwrapped one its default set-clipboard ignores.
func TestCopyWhenTmuxRefuses(t *testing.T) {
	for _, script := range []string{"exit 1", "exec sleep 60"} {
		fakeTmux(t, script)
		defer func(d time.Duration) { tmuxTimeout = d }(tmuxTimeout)
		tmuxTimeout = 100 * time.Millisecond
		var out bytes.Buffer
		how, err := copyText(&out, "482915")
		if err != nil || how != copiedPassthrough {
			t.Fatalf("%s: copied to %v, %v; want OSC 52 through tmux", script, how, err)
		}
		if s := out.String(); !strings.HasPrefix(s, "\x1bPtmux;") || !strings.Contains(s, "NDgyOTE1") {
			t.Errorf("%s: wrote %q, want OSC 52 of the code wrapped for tmux", script, s)
		}
	}
}
