// Package termtext shows captured text on a terminal as text: what a
// sender wrote cannot act on the terminal (set the clipboard or the title,
// erase the screen, reverse the line).
package termtext

import (
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"golang.org/x/term"
)

// IsTerminal reports whether w is a terminal: where captured text is
// shown, as Visible and VisibleJSON make it, rather than passed on byte
// for byte.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// ActsOnTerminal reports whether a terminal acts on r rather than draws
// it: the C0 controls but tab and line feed, DEL, the C1 controls (U+009B
// starts a sequence as ESC [ does on many terminals), and the bidi
// embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069),
// with which a terminal that lays out bidi text reverses the rest of the
// line. The bidi marks (U+200E, U+200F, U+061C) only steer the text
// around them and stay, as do right-to-left letters.
func ActsOnTerminal(r rune) bool {
	switch {
	case r < 0x20:
		return r != '\t' && r != '\n'
	case r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// Visible is captured text s as it is safe to show on a terminal, where a
// sender's escape sequence could otherwise set the clipboard (OSC 52),
// the window title, or erase the screen. A C0 control shows as ^X (ESC
// as ^[, BEL as ^G), but tab and line feed stay, and so does a carriage
// return before a line feed; DEL, a C1 control, a bidi embedding,
// override or isolate and a byte that is not UTF-8 show as U+FFFD. Text
// with none of them is s itself. The viewer (`capture tui`) marks the
// same characters (ActsOnTerminal) the same way, but lays its pane out
// itself: a tab there becomes spaces, and a lone carriage return ends a
// line.
func Visible(s string) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || ActsOnTerminal(r) && !(r == '\r' && strings.HasPrefix(s[i+1:], "\n")) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\r' && strings.HasPrefix(s[i+1:], "\n"):
			b.WriteByte('\r')
		case r < 0x20 && ActsOnTerminal(r):
			b.WriteByte('^')
			b.WriteByte(byte(r) + '@')
		case r == utf8.RuneError && n == 1, ActsOnTerminal(r):
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// VisibleJSON is JSON as it is safe to show on a terminal, and
// still the same JSON: what a terminal acts on can only be inside its
// strings (the C0 controls never are, JSON escapes them), and is written
// there as a \u escape; a byte that is not UTF-8 becomes \ufffd, as a
// JSON decoder reads it.
func VisibleJSON(js []byte) []byte {
	var b []byte
	for i := 0; i < len(js); {
		r, n := utf8.DecodeRune(js[i:])
		if !(r == utf8.RuneError && n == 1) && !ActsOnTerminal(r) {
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
