package wait

import (
	"io"
	"os"
	"unicode/utf8"

	"github.com/capturedev/capture/forward/termtext"
	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// visibleJSON is indented JSON as it is safe to show on a terminal, and
// still the same JSON: what a terminal acts on can only be inside its
// strings (the C0 controls never are, JSON escapes them), and is written
// there as a \u escape; a byte that is not UTF-8 becomes \ufffd, as a
// JSON decoder reads it.
func visibleJSON(js []byte) []byte {
	var b []byte
	for i := 0; i < len(js); {
		r, n := utf8.DecodeRune(js[i:])
		if !(r == utf8.RuneError && n == 1) && !termtext.ActsOnTerminal(r) {
			if b != nil {
				b = append(b, js[i:i+n]...)
			}
			i += n
			continue
		}
		if b == nil {
			b = append(make([]byte, 0, len(js)+16), js[:i]...)
		}
		if r == utf8.RuneError {
			r = 0xfffd
		}
		const hex = "0123456789abcdef"
		b = append(b, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
		i += n
	}
	if b == nil {
		return js
	}
	return b
}
