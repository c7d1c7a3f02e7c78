package tui

import (
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

const (
	zwj  = '\u200d'
	zwsp = '\u200b'
)

// cellText rewrites captured text so that a terminal which gives every
// code point its own cells, as tmux 3.3 does, draws it as wide as
// ansi.StringWidth measures it; the whole layout, lipgloss's and the
// viewport's included, measures and cuts with that one function. A
// grapheme cluster on which both agree is kept as it is: plain text,
// marks that combine, CJK, flags, keycaps, emoji joined by U+200D. One
// on which they disagree loses its presentation selectors (❤️ is drawn
// one cell wide by such terminals) and a soft hyphen; if they still
// disagree, its code points that take cells of their own in the
// terminal (a skin tone after its emoji, a spacing vowel sign after its
// consonant) are set apart by a zero-width space, so that the measure
// counts them as the terminal does; failing that it shows as U+FFFD.
func cellText(s string) string {
	i := 0
	for i < len(s) && s[i] < utf8.RuneSelf {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for rest := s[i:]; rest != ""; {
		c, w := ansi.FirstGraphemeCluster(rest, ansi.GraphemeWidth)
		rest = rest[len(c):]
		// tmux joins a code point after U+200D to the cell before it even
		// when plain ASCII comes between: a joiner that ends a cluster
		// joins nothing and goes.
		c = strings.TrimRight(c, string(zwj))
		if len(c) <= 1 || w == terminalCells(c) {
			b.WriteString(c)
			continue
		}
		b.WriteString(inStep(c))
	}
	return b.String()
}

// inStep is cluster c, which the measure and the terminal see at
// different widths, rewritten so that they agree.
func inStep(c string) string {
	c = strings.Map(func(r rune) rune {
		if r == '\ufe0e' || r == '\ufe0f' || r == '\u00ad' {
			return -1
		}
		return r
	}, c)
	want := terminalCells(c)
	if ansi.StringWidth(c) == want {
		return c
	}
	var b strings.Builder
	joined := false
	for i, r := range c {
		if i > 0 && !joined && codePointCells(r) > 0 {
			b.WriteRune(zwsp)
		}
		joined = r == zwj
		b.WriteRune(r)
	}
	if split := b.String(); ansi.StringWidth(split) == want {
		return split
	}
	return "\uFFFD"
}

// terminalCells is how many cells a terminal that draws code point by
// code point gives c: each code point its own width, but for one after a
// joiner, which tmux draws in the joiner's cell.
func terminalCells(c string) int {
	n, joined := 0, false
	for _, r := range c {
		if !joined {
			n += codePointCells(r)
		}
		joined = r == zwj
	}
	return n
}

// codePointCells is the width of r alone, as wcwidth gives it. The
// measure's own width of one code point agrees but for three: a
// regional indicator, wide only in a pair, is one cell on its own; a
// Hangul vowel or final consonant jamo joins the syllable before it; and
// a soft hyphen is drawn.
func codePointCells(r rune) int {
	switch {
	case r >= 0x1f1e6 && r <= 0x1f1ff:
		return 1
	case r >= 0x1160 && r <= 0x11ff, r >= 0xd7b0 && r <= 0xd7ff:
		return 0
	case r == '\u00ad':
		return 1
	}
	return ansi.StringWidth(string(r))
}
