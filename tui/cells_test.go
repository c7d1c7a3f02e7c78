package tui

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// tricky holds text whose width terminals and measures disagree on: emoji
// joined by U+200D, a flag, a skin tone, a keycap, a heart with and
// without VS16, a combining accent, Hindi and Thai, CJK, and characters
// of no width.
var tricky = []string{
	"family 👨‍👩‍👧‍👦 trip",
	"flag 🇯🇵 and a lone 🇯 letter",
	"thumbs 👍🏽 up",
	"keycap 1️⃣ first",
	"heart ❤️ or ❤ and ©️",
	"rainbow 🏳️‍🌈 flag",
	"café e\u0301 résumé",
	"Hindi नमस्ते हिन्दी का",
	"Thai กำแพง",
	"CJK 日本語の件名",
	"zero\u200bwidth\u2060joiner\ufeffsoft\u00adhyphen",
	"joined\u200dletters and ü",
	"tone alone 🏽 here",
}

// screenCells is how many cells a terminal that draws code point by code
// point, as tmux 3.3 does, gives a line of the screen.
func screenCells(line string) int {
	line = ansi.Strip(line)
	n := 0
	for line != "" {
		c, _ := ansi.FirstGraphemeCluster(line, ansi.GraphemeWidth)
		n += terminalCells(c)
		line = line[len(c):]
	}
	return n
}

// checkCells fails unless every line of the screen is w cells wide by the
// layout's measure and by the terminal's, and the pane borders of every
// body row fall on the same columns.
func checkCells(t *testing.T, what, screen string, w int) {
	t.Helper()
	lines := strings.Split(screen, "\n")
	var borders string
	for i, l := range lines {
		if got := ansi.StringWidth(l); got != w {
			t.Errorf("%s: line %d is %d cells wide by the layout, not %d: %q", what, i, got, w, l)
		}
		if got := screenCells(l); got != w {
			t.Errorf("%s: line %d is %d cells wide in the terminal, not %d: %q", what, i, got, w, l)
		}
		if i == 0 || i >= len(lines)-2 {
			continue
		}
		var cols []string
		for j := strings.Index(l, "│"); j >= 0; {
			cols = append(cols, fmt.Sprint(screenCells(l[:j])))
			k := strings.Index(l[j+len("│"):], "│")
			if k < 0 {
				break
			}
			j += len("│") + k
		}
		if got := strings.Join(cols, ","); borders == "" {
			borders = got
		} else if got != borders {
			t.Errorf("%s: line %d has its borders at columns %s, not %s: %q", what, i, got, borders, l)
		}
	}
}

// TestWideCharactersKeepTheLayout lays out subjects, senders, paths and
// bodies full of text terminals draw wider or narrower than it looks, and
// checks that no line of the list, the detail or the request list grows
// or shrinks, nor any border moves.
func TestWideCharactersKeepTheLayout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, s := range tricky {
		e.insert(mail{from: "shop@example.test", to: "👍🏽नमस्ते@example.test", subject: s,
			text: strings.Repeat(s+" ", 12)})
	}
	for _, s := range tricky[:6] {
		e.post("POST", "/hooks/"+url.PathEscape(s)+"?q="+url.QueryEscape(s), "application/json", `{"note":"`+s+`"}`)
	}
	u := e.run(e.config())
	u.waitText("tone alone", "● live")
	for _, sz := range [][2]int{{80, 24}, {132, 30}, {60, 20}} {
		u.resize(sz[0], sz[1])
		checkCells(t, fmt.Sprintf("messages at %dx%d", sz[0], sz[1]), u.screen(), sz[0])
	}
	// The detail of every message, beside the list and alone.
	u.resize(132, 30)
	u.keys("tab", "enter", "shift+tab")
	for i := range tricky {
		s := u.waitText("Subject   " + strings.Fields(clean(tricky[len(tricky)-1-i]))[0])
		checkCells(t, fmt.Sprintf("detail %d", i), s, 132)
		u.keys("j")
	}
	u.keys("shift+tab", "j", "tab")
	u.waitText("Requests · default", "/hooks/")
	for _, sz := range [][2]int{{80, 24}, {132, 30}} {
		u.resize(sz[0], sz[1])
		checkCells(t, fmt.Sprintf("requests at %dx%d", sz[0], sz[1]), u.screen(), sz[0])
	}
	u.keys("enter")
	s := u.waitText(`"note"`)
	checkCells(t, "request detail", s, 132)
}

// TestCellTextCutsBetweenClusters checks that cutting a line with an
// ellipsis never splits what the terminal draws in one cell or pair of
// cells: every cut of every text ends on a whole cluster of cellText's.
func TestCellTextCutsBetweenClusters(t *testing.T) {
	for _, s := range tricky {
		shown := clean(s)
		var ends []string
		for rest := shown; rest != ""; {
			// The layout, as a terminal, reads printable ASCII byte by
			// byte: a mark after a space is a cluster of its own there.
			c := rest[:1]
			if rest[0] >= 0x80 {
				c, _ = ansi.FirstGraphemeCluster(rest, ansi.GraphemeWidth)
			}
			rest = rest[len(c):]
			ends = append(ends, shown[:len(shown)-len(rest)])
		}
		for w := 1; w < ansi.StringWidth(shown); w++ {
			cut := strings.TrimSuffix(strings.TrimRight(fit(shown, w), " "), "…")
			if cut != "" && !containsString(ends, cut) && !strings.HasSuffix(shown, cut) {
				t.Errorf("%q cut at %d is %q, inside a cluster", s, w, cut)
			}
			if got := screenCells(fit(shown, w)); got != w {
				t.Errorf("%q cut at %d is %d cells in the terminal", s, w, got)
			}
		}
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// bidiControls are the bidi embeddings, overrides and isolates: on a
// terminal that lays out bidi text, each turns the rest of its line
// around, pane borders included.
const bidiControls = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"

// TestBidiControlsShowAsReplacement puts bidi overrides and isolates in a
// subject, a body and a webhook path: the list rows and the detail show
// each as U+FFFD, as other controls, and never send one to the terminal,
// while Hebrew and Arabic letters show as they are.
func TestBidiControlsShowAsReplacement(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.insert(mail{from: "shop@example.test", to: "eve@example.test", subject: "Invoice \u202efdp.exe שלום",
		text: "body \u2066isolated\u2069 and \u202bembedded\u202c مرحبا"})
	// The path raw in the request line, as a sender can write it.
	base, _ := url.Parse(e.srv.CaptureBase())
	conn, err := net.Dial("tcp", base.Host)
	if err != nil {
		t.Fatal(err)
	}
	body := "x\u2067y\u2069"
	fmt.Fprintf(conn, "POST %s/%s/bidi/\u202eexe.pdf HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		base.Path, e.boot.Endpoint.ID, base.Host, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("capture answered %v, %v", resp, err)
	}
	conn.Close()
	u := e.run(e.config())
	check := func(what, screen string, want ...string) {
		t.Helper()
		if strings.ContainsAny(screen, bidiControls) {
			t.Errorf("%s: a bidi control reaches the terminal:\n%q", what, screen)
		}
		for _, w := range want {
			if !strings.Contains(screen, w) {
				t.Errorf("%s: no %q on the screen:\n%s", what, w, screen)
			}
		}
		checkCells(t, what, screen, 80)
	}
	check("messages", u.waitText("Invoice", "● live"), "Invoice \uFFFDfdp.exe שלום")
	u.keys("enter")
	check("message detail", u.waitText("Subject   Invoice"), "Subject   Invoice \uFFFDfdp.exe שלום",
		"body \uFFFDisolated\uFFFD and \uFFFDembedded\uFFFD مرحبا")
	u.keys("esc", "shift+tab", "j", "tab")
	check("requests", u.waitText("Requests · default", "/bidi/"), "/bidi/\uFFFDexe.pdf")
	u.keys("enter")
	check("request detail", u.waitText("x\uFFFDy\uFFFD"), "/bidi/\uFFFDexe.pdf")
}
