package tui

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/capturedev/capture/store"
)

// paneRows is the inside of the rightmost box on each row of screen: the
// detail, beside the list or full screen.
func paneRows(screen string) []string {
	var out []string
	for _, l := range strings.Split(screen, "\n") {
		end := strings.LastIndex(l, "│")
		if end <= 0 {
			continue
		}
		l = l[:end]
		out = append(out, l[strings.LastIndex(l, "│")+len("│"):])
	}
	return out
}

// paneText is the rightmost box's text with its rows trimmed and joined,
// so that a value wrapped over several rows reads as one.
func paneText(screen string) string {
	var b strings.Builder
	for _, l := range paneRows(screen) {
		b.WriteString(strings.TrimSpace(l))
	}
	return b.String()
}

// detailText scrolls the focused detail from its top to its bottom, one
// row at a time, and returns every row of it once, trimmed and joined.
func (u *tui) detailText() string {
	u.t.Helper()
	u.keys("g")
	s := u.screen()
	rows := paneRows(s)
	var b strings.Builder
	for _, r := range rows {
		b.WriteString(strings.TrimSpace(r))
	}
	for i := 0; !strings.Contains(s, "100%") && strings.Contains(s, "%"); i++ {
		if i > 500 {
			u.t.Fatalf("the detail never reaches its bottom:\n%s", s)
		}
		u.keys("j")
		s = u.screen()
		rows = paneRows(s)
		b.WriteString(strings.TrimSpace(rows[len(rows)-1]))
	}
	return b.String()
}

var layoutSizes = [][2]int{{80, 24}, {120, 40}, {60, 20}}

// resize puts the viewer at w×h and waits until the screen is drawn so.
func (u *tui) resize(w, h int) {
	u.t.Helper()
	u.tm.Send(tea.WindowSizeMsg{Width: w, Height: h})
	u.waitFor(fmt.Sprintf("%d×%d", w, h), func(s string) bool {
		lines := strings.Split(s, "\n")
		return len(lines) == h && ansi.StringWidth(lines[0]) == w
	})
}

// TestLongValuesWrapWhole checks that a long header value, query value and
// delivery target keep every character on screen when they wrap: people
// copy signatures and tokens from the detail.
func TestLongValuesWrapWhole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(target.Close)
	var sig strings.Builder
	for i := range 200 {
		sig.WriteByte("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[i*7%62])
	}
	token := "eyJhbGciOiJIUzI1NiJ9." + strings.Repeat("eyJzdWIiOiJ1c2VyXzQyIn0", 5) + ".c2lnbmF0dXJl"
	longPath := "/" + strings.Repeat("deliveries/", 10) + "end"
	tgt := target.URL + longPath
	if _, err := e.st.UpdateEndpoint(t.Context(), e.boot.Endpoint.ID, store.EndpointUpdate{Target: &tgt}); err != nil {
		t.Fatal(err)
	}
	e.post("POST", "/hooks/signed?token="+token, "application/json", `{"a":1}`, "X-Long", sig.String())

	// Rows are joined without the space a wrap broke at: "23" and "ms"
	// may stand on two rows.
	delivery := regexp.MustCompile(`replay +200 delivered +\d+ ?ms` + regexp.QuoteMeta(tgt+"/hooks/signed?token="+token))

	u := e.run(e.config())
	u.waitText("● live")
	u.keys("shift+tab", "j", "tab")
	u.waitText("/hooks/signed")
	u.keys("r")
	u.waitText("replay → 200 OK")
	u.keys("tab")
	u.waitText("Request", "Received")
	for _, sz := range layoutSizes {
		u.resize(sz[0], sz[1])
		text := u.detailText()
		for _, want := range []string{"token =" + token, "X-Long:" + sig.String()} {
			if !strings.Contains(text, want) {
				t.Errorf("at %dx%d %.30q… is cut:\n%s", sz[0], sz[1], want, u.screen())
			}
		}
		if !delivery.MatchString(text) {
			t.Errorf("at %dx%d the delivery's target is cut:\n%s", sz[0], sz[1], u.screen())
		}
	}
}

// TestLongMessageValuesWrapWhole does the same for a message: a long
// subject among the headers, a long link, a long attachment name.
func TestLongMessageValuesWrapWhole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	subject := strings.TrimSpace(strings.Repeat("Your order 1042 has shipped and is on its way ", 5))
	link := "https://shop.test/track?sig=" + strings.Repeat("AbCdEf0123", 15)
	name := strings.Repeat("invoice-2026-01-", 6) + "final.pdf"
	e.insert(mail{from: "noreply@shop.test", to: "alice@example.test", subject: subject, text: "Tracking below.",
		links:       []store.Link{{URL: link, Origin: "https://shop.test"}},
		attachments: []store.NewAttachment{{Filename: name, ContentType: "application/pdf", Data: []byte("%PDF")}}})
	u := e.run(e.config())
	u.waitText("Your order 1042", "● live")
	u.keys("tab")
	u.waitText("Tracking below.")
	u.keys("h")
	u.waitText("Headers (h hides)")
	noSpace := func(s string) string { return strings.ReplaceAll(s, " ", "") }
	for _, sz := range layoutSizes {
		u.resize(sz[0], sz[1])
		text := noSpace(u.detailText())
		for _, want := range []string{"Subject:" + subject, link, name} {
			if !strings.Contains(text, noSpace(want)) {
				t.Errorf("at %dx%d %.30q… is cut:\n%s", sz[0], sz[1], want, u.screen())
			}
		}
	}
}

// TestHexDumpFits checks that each row of a binary body's dump stays one
// row of the pane, its ASCII column closed on the same row, at any size.
func TestHexDumpFits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := make([]byte, 64)
	for i := range body {
		body[i] = byte(i*37 + 0x80)
	}
	copy(body[20:], "signature")
	e.post("PUT", "/bin", "application/octet-stream", string(body))
	u := e.run(e.config())
	u.waitText("● live")
	u.keys("shift+tab", "j", "tab")
	u.waitText("/bin")
	u.keys("tab")
	u.waitText("Body · binary, 64 B")
	rowRE := regexp.MustCompile(`^[0-9a-f]{8}  `)
	for _, sz := range append(layoutSizes, [2]int{40, 10}) {
		u.resize(sz[0], sz[1])
		u.keys("g", "j", "j", "j", "j", "j", "j")
		s := u.waitText("00000000  ")
		rows := 0
		for _, l := range paneRows(s) {
			if !rowRE.MatchString(l) {
				continue
			}
			rows++
			if l = strings.TrimRight(l, " "); !strings.HasSuffix(l, "|") || strings.Count(l, "|") != 2 {
				t.Errorf("at %dx%d a dump row does not fit: %q\n%s", sz[0], sz[1], l, s)
			}
		}
		if rows == 0 {
			t.Errorf("at %dx%d no dump row:\n%s", sz[0], sz[1], s)
		}
	}
	// Where the whole width is the pane's, a row has all 16 bytes.
	u.resize(80, 24)
	u.waitFor("16 bytes a row", func(s string) bool {
		return strings.Contains(s, "00000010  ") && !strings.Contains(s, "00000008  ")
	})
}

// TestHelpFits checks the help at sizes down to the smallest: its border
// whole, no entry cut, and what does not fit reachable by scrolling.
func TestHelpFits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	u := e.run(e.config())
	u.waitText("Confirm your account", "● live")
	u.keys("?")
	u.waitText("this help")
	var descs []string
	for _, sec := range u.m.keys.helpSections() {
		for _, b := range sec.bindings {
			descs = append(descs, b.Help().Desc)
		}
	}
	scrollRE := regexp.MustCompile(`↑↓ scroll · \d+–(\d+) of (\d+)`)
	for _, sz := range [][2]int{{60, 20}, {50, 14}, {40, 10}, {80, 24}} {
		u.resize(sz[0], sz[1])
		u.keys("g")
		var seen strings.Builder
		for range 40 {
			s := u.screen()
			box := helpBoxRows(t, s)
			for _, l := range box[1 : len(box)-1] {
				seen.WriteString(l + "\n")
			}
			if m := scrollRE.FindStringSubmatch(s); m == nil || m[1] == m[2] {
				break // all of it fits, or the last row is shown
			}
			u.keys("j")
		}
		words := strings.Fields(seen.String())
		all := " " + strings.Join(words, " ") + " "
		for _, d := range descs {
			for _, w := range strings.Fields(d) {
				if !strings.Contains(all, " "+w+" ") {
					t.Errorf("at %dx%d the help never shows %q of %q:\n%s", sz[0], sz[1], w, d, seen.String())
				}
			}
		}
		if strings.Contains(seen.String(), "…") {
			t.Errorf("at %dx%d the help cuts an entry:\n%s", sz[0], sz[1], seen.String())
		}
	}
}

// helpBoxRows is the help overlay's rows, from its top border to its
// bottom one, each checked to be closed at the same column on both sides.
func helpBoxRows(t *testing.T, screen string) []string {
	t.Helper()
	lines := strings.Split(screen, "\n")
	top := -1
	var left int
	// The overlay is the only box without a title in its top border.
	topRE := regexp.MustCompile(`╭─+╮`)
	for i, l := range lines {
		if loc := topRE.FindStringIndex(l); loc != nil && top < 0 {
			top, left = i, ansi.StringWidth(l[:loc[0]])
		}
	}
	if top < 0 {
		t.Fatalf("no help box on screen:\n%s", screen)
	}
	topRow := ansi.Cut(lines[top], left, len(lines[top]))
	width := strings.Index(topRow, "╮")
	if width < 0 {
		t.Fatalf("the help box's top border is not closed: %q\n%s", topRow, screen)
	}
	width = ansi.StringWidth(topRow[:width]) + 1
	var out []string
	for _, l := range lines[top:] {
		r := ansi.Cut(l, left, left+width)
		out = append(out, r)
		first, last := []rune(r)[0], []rune(r)[len([]rune(r))-1]
		if first == '╰' && last == '╯' {
			return out
		}
		if !(first == '╭' && last == '╮') && !(first == '│' && last == '│') {
			t.Fatalf("the help box's border is broken on row %q:\n%s", r, screen)
		}
		out[len(out)-1] = strings.TrimSpace(strings.Trim(r, "│"))
	}
	t.Fatalf("the help box has no bottom border:\n%s", screen)
	return nil
}

// TestUnnamedAttachment checks that an attachment without a file name is
// listed as such and saved under a name with the extension of its type.
func TestUnnamedAttachment(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.insert(mail{from: "noreply@shop.test", to: "alice@example.test", subject: "Your invoice",
		attachments: []store.NewAttachment{{ContentType: "application/pdf", Data: []byte("%PDF-1.4 unnamed")}}})
	cfg := e.config()
	u := e.run(cfg)
	u.waitText("Your invoice", "● live")
	u.keys("enter")
	s := u.waitText("Attachments (a saves)")
	if l := row(t, s, "1. "); !strings.Contains(l, "1. (no name)  application/pdf") {
		t.Errorf("listed as %q", l)
	}
	u.keys("a")
	u.waitText("1. (no name)  application/pdf  16 B")
	u.keys("enter")
	s = u.waitText("saved ")
	files, err := filepath.Glob(filepath.Join(cfg.SaveDir, "*"))
	if err != nil || len(files) != 1 {
		t.Fatalf("saved %v, %v", files, err)
	}
	if !regexp.MustCompile(`^att_[0-9A-Za-z]+\.pdf$`).MatchString(filepath.Base(files[0])) {
		t.Errorf("saved as %s, want att_….pdf", files[0])
	}
	if b, _ := os.ReadFile(files[0]); string(b) != "%PDF-1.4 unnamed" {
		t.Errorf("saved %q", b)
	}
	if !strings.Contains(s, "saved "+filepath.Join(cfg.SaveDir, "att_")) {
		t.Errorf("the status should name %s:\n%s", files[0], s)
	}
}

// A bounce's null envelope sender shows as <>, as MTAs write it and the
// web shows it, not as nothing before the arrow.
func TestNullEnvelopeSender(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.st.InsertMessage(t.Context(), &store.NewMessage{InboxID: e.boot.Inbox.ID, ReceivedAt: time.Now(),
		EnvelopeTo: []string{"alice@example.test"}, From: &store.Address{Address: "mailer-daemon@mx.test"},
		Subject: "Undelivered Mail Returned to Sender", Raw: []byte("Subject: Undelivered Mail Returned to Sender\r\n\r\nbounce\r\n")}); err != nil {
		t.Fatal(err)
	}
	u := e.run(e.config())
	u.waitText("Undelivered Mail", "● live")
	u.keys("tab")
	u.waitText("<> → alice@example.test")
}

// TestTooSmallSaysTheSize shrinks the terminal below the smallest size the
// viewer draws in: what it needs must show, however narrow.
func TestTooSmallSaysTheSize(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.run(e.config())
	for _, sz := range [][2]int{{20, 5}, {12, 4}, {39, 9}} {
		u.tm.Send(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
		s := u.waitFor(fmt.Sprintf("%d×%d", sz[0], sz[1]), func(s string) bool {
			return len(strings.Split(s, "\n")) == sz[1]
		})
		if !strings.Contains(s, "40×10") {
			t.Errorf("at %d×%d the screen does not say the size needed:\n%s", sz[0], sz[1], s)
		}
		for _, l := range strings.Split(s, "\n") {
			if w := ansi.StringWidth(l); w != sz[0] {
				t.Errorf("at %d×%d a line is %d wide: %q", sz[0], sz[1], w, l)
			}
		}
	}
}

// TestOverlayOverWideText opens the help over rows of CJK text, whose
// wide characters fall under the overlay's edges: every line keeps the
// terminal's width, so no pane border moves.
func TestOverlayOverWideText(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Offset by one cell, so that one of them straddles each edge.
	e.insert(mail{from: "shop@example.jp", to: "bob@example.test", subject: "ご注文ありがとうございます。ご注文番号は12345です"})
	e.insert(mail{from: "shop@example.jp", to: "bob@example.test", subject: "aご注文ありがとうございます。ご注文番号は12345です"})
	u := e.run(e.config())
	u.waitText("ご注文", "● live")
	for _, sz := range [][2]int{{80, 24}, {81, 24}, {100, 30}, {121, 30}} {
		u.tm.Send(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
		u.keys("?")
		s := u.waitFor(fmt.Sprintf("help at %d×%d", sz[0], sz[1]), func(s string) bool {
			return len(strings.Split(s, "\n")) == sz[1] && strings.Contains(s, "quit")
		})
		for _, l := range strings.Split(s, "\n") {
			if w := ansi.StringWidth(l); w != sz[0] {
				t.Errorf("at %d×%d a line under the help is %d wide: %q", sz[0], sz[1], w, l)
			}
		}
		u.keys("?")
	}
}

// TestNarrowRequestRowsKeepThePath shows requests on a narrow terminal:
// the path, which tells them apart, stays; the time goes first.
func TestNarrowRequestRowsKeepThePath(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.post("POST", "/hooks/a", "application/json", `{}`)
	e.post("POST", "/hooks/b", "application/json", `{}`)
	u := e.run(e.config())
	u.waitText("no messages yet", "● live")
	u.keys("shift+tab", "j", "tab")
	u.waitText("Requests · default", "/hooks/a", "/hooks/b")
	for _, w := range []int{40, 50, 60} {
		u.tm.Send(tea.WindowSizeMsg{Width: w, Height: 10})
		s := u.waitFor(fmt.Sprintf("%d×10", w), func(s string) bool {
			return ansi.StringWidth(strings.Split(s, "\n")[0]) == w
		})
		for _, p := range []string{"/hooks/a", "/hooks/b"} {
			if !strings.Contains(s, p) {
				t.Errorf("at %d×10 the list does not show %s:\n%s", w, p, s)
			}
		}
	}

	// A path longer than the room takes all of it, up to the frame, and
	// never less than the room kept for it while anything else shows.
	e.post("POST", "/hooks/"+strings.Repeat("long", 20), "application/json", `{}`)
	u.tm.Send(tea.WindowSizeMsg{Width: 80, Height: 10})
	u.waitText("/hooks/longlong")
	for w := 40; w <= 60; w++ {
		u.tm.Send(tea.WindowSizeMsg{Width: w, Height: 10})
		s := u.waitFor(fmt.Sprintf("%d×10", w), func(s string) bool {
			return ansi.StringWidth(strings.Split(s, "\n")[0]) == w
		})
		l := row(t, s, "/hooks/lo")
		path, ok := strings.CutSuffix(l[strings.Index(l, "/hooks/lo"):], "│")
		if !ok || !strings.HasSuffix(path, "…") {
			t.Errorf("at %d×10 the long path leaves room unused: %q", w, l)
		}
		if n := ansi.StringWidth(path); n < 12 {
			t.Errorf("at %d×10 the long path has %d cells, fewer than the 12 kept for it: %q", w, n, l)
		}
	}
}
