package tui

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/server/api/contract"
)

const (
	minWidth, minHeight = 40, 10
	// wideWidth is where the detail fits beside the list.
	wideWidth = 120
)

func (m *Model) wide() bool { return m.width >= wideWidth }

func (m *Model) bodyHeight() int {
	h := m.height - 1
	if m.mode == modeFilter {
		h--
	}
	return max(0, h)
}

func (m *Model) srcWidth() int { return max(16, min(24, m.width/4)) }

func (m *Model) listWidth() int {
	if m.wide() {
		return (m.width - m.srcWidth()) / 2
	}
	return m.width - m.srcWidth()
}

// detailSize is the detail box: beside the list where it fits, else the
// whole body.
func (m *Model) detailSize() (int, int) {
	if m.wide() {
		return m.width - m.srcWidth() - m.listWidth(), m.bodyHeight()
	}
	return m.width, m.bodyHeight()
}

func (m *Model) listRows() int { return max(1, m.bodyHeight()-2) }

func (m *Model) resize() {
	m.input.Width = max(10, m.width-34)
	m.clampList()
	m.refreshDetail()
}

// View draws the screen: panes, then the filter line when typing one, then
// the status bar. Every line is exactly the terminal's width.
func (m *Model) View() string {
	if m.width <= 0 || m.height <= 0 {
		return ""
	}
	if m.width < minWidth || m.height < minHeight {
		return m.tooSmall()
	}
	h := m.bodyHeight()
	body := m.body(h)
	switch m.mode {
	case modeHelp:
		body = overlay(body, m.helpBox(h), m.width, h)
	case modeLinks, modeAttachments:
		body = overlay(body, m.pickerBox(h), m.width, h)
	}
	parts := []string{body}
	if m.mode == modeFilter {
		parts = append(parts, m.filterLine())
	}
	parts = append(parts, m.statusBar())
	return strings.Join(parts, "\n")
}

func (m *Model) tooSmall() string {
	lines := make([]string, m.height)
	// The size first, wrapped, so that it shows however small the screen.
	msg := "needs at least " + strconv.Itoa(minWidth) + "×" + strconv.Itoa(minHeight) +
		" (now " + strconv.Itoa(m.width) + "×" + strconv.Itoa(m.height) + ")"
	text := strings.Split(ansi.Hardwrap(ansi.Wordwrap(msg, m.width, ""), m.width, true), "\n")
	top := max(0, (m.height-len(text))/2)
	for i := range lines {
		var l string
		if j := i - top; j >= 0 && j < len(text) {
			l = strings.TrimSpace(text[j])
		}
		lines[i] = fit(l, m.width)
	}
	return strings.Join(lines, "\n")
}

func (m *Model) body(h int) string {
	if !m.wide() && m.focus == paneDetail && m.detail.id != "" {
		return m.detailBox(m.width, h)
	}
	srcW := m.srcWidth()
	panes := []string{m.sourcesBox(srcW, h), m.listBox(m.listWidth(), h)}
	if m.wide() {
		w, _ := m.detailSize()
		panes = append(panes, m.detailBox(w, h))
	}
	return lipgloss.JoinHorizontal(lipgloss.Top, panes...)
}

// box draws a rounded frame of w×h with title in the top edge and footer
// in the bottom one; lines are cut or padded to fit inside.
func (m *Model) box(title, footer string, lines []string, w, h int, focused bool) string {
	if w < 4 || h < 2 {
		out := make([]string, max(h, 0))
		for i := range out {
			out[i] = fit("", w)
		}
		return strings.Join(out, "\n")
	}
	bs, ts := m.st.border, m.st.title
	if focused {
		bs, ts = m.st.borderFocused, m.st.titleFocused
	}
	inner := w - 2
	title = ansi.Truncate(title, max(0, inner-4), "…")
	// Brackets mark the focused pane where colour cannot (NO_COLOR).
	open, shut := " ", " "
	if focused {
		open, shut = "[", "]"
	}
	top := bs.Render("╭─") + ts.Render(open+title+shut)
	top += bs.Render(strings.Repeat("─", max(0, inner-3-ansi.StringWidth(title))) + "╮")
	footer = ansi.Truncate(footer, max(0, inner-4), "…")
	var bottom string
	if footer == "" {
		bottom = bs.Render("╰" + strings.Repeat("─", inner) + "╯")
	} else {
		bottom = bs.Render("╰"+strings.Repeat("─", max(0, inner-3-ansi.StringWidth(footer)))) +
			m.st.dim.Render(" "+footer+" ") + bs.Render("─╯")
	}
	out := make([]string, 0, h)
	out = append(out, top)
	side := bs.Render("│")
	for i := 0; i < h-2; i++ {
		var l string
		if i < len(lines) {
			l = lines[i]
		}
		out = append(out, side+fit(l, inner)+side)
	}
	out = append(out, bottom)
	return strings.Join(out, "\n")
}

// fit cuts or pads s, which may hold styles, to exactly w cells.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) > w {
		s = ansi.Truncate(s, w, "…")
	}
	return s + strings.Repeat(" ", max(0, w-ansi.StringWidth(s)))
}

func (m *Model) sourcesBox(w, h int) string {
	inner := w - 2
	var lines []string
	selLine := 0
	switch {
	case !m.loaded:
		lines = []string{m.st.dim.Render("loading…")}
	case len(m.sources) == 0:
		lines = []string{m.st.dim.Render("no inboxes or"), m.st.dim.Render("endpoints")}
	}
	for i, s := range m.sources {
		if i == 0 && s.kind == kindEndpoint {
			lines = append(lines, m.st.dim.Render("Inboxes"), m.st.dim.Render("  none"))
		}
		if i == 0 && s.kind == kindInbox {
			lines = append(lines, m.st.dim.Render("Inboxes"))
		}
		if s.kind == kindEndpoint && (i == 0 || m.sources[i-1].kind == kindInbox) {
			lines = append(lines, m.st.dim.Render("Endpoints"))
		}
		if i == m.srcIdx {
			selLine = len(lines)
		}
		lines = append(lines, m.sourceRow(i, s, inner))
	}
	if n := len(m.sources); n > 0 && m.sources[n-1].kind == kindInbox {
		lines = append(lines, m.st.dim.Render("Endpoints"), m.st.dim.Render("  none"))
	}
	// Scroll so that the selected source stays in view.
	if rows := h - 2; len(lines) > rows && selLine >= rows {
		lines = lines[selLine-rows+1:]
	}
	return m.box("Sources", "", lines, w, h, m.focus == paneSources)
}

func (m *Model) sourceRow(i int, s source, inner int) string {
	marker := " "
	if i == m.srcIdx {
		marker = "›"
	}
	var fresh int64
	if i == m.srcIdx {
		fresh = int64(m.freshCount())
	} else {
		fresh = max(0, s.count-s.seen)
	}
	count := strconv.FormatInt(s.count, 10)
	badge := ""
	if fresh > 0 {
		badge = " +" + strconv.FormatInt(fresh, 10)
	}
	nameW := max(1, inner-2-len(count)-len(badge)-1)
	name := fit(clean(s.name), nameW)
	if i == m.srcIdx {
		st := m.st.selectedDim
		if m.focus == paneSources {
			st = m.st.selected
		}
		return st.Render(fit(marker+" "+name+" "+count+badge, inner))
	}
	return marker + " " + name + " " + m.st.dim.Render(count) + m.st.fresh.Render(badge)
}

func (m *Model) freshCount() int {
	n := 0
	for _, c := range m.list.items {
		if c.fresh {
			n++
		}
	}
	return n
}

func (m *Model) listBox(w, h int) string {
	inner := w - 2
	src := m.current()
	title := "Captures"
	if src != nil {
		title = "Messages · " + clean(src.name)
		if src.kind == kindEndpoint {
			title = "Requests · " + clean(src.name)
		}
		if f := m.filters[src.id]; f != "" {
			title += " · /" + clean(f)
		}
	}
	var lines []string
	switch {
	case src == nil:
	case !m.list.loaded:
		lines = []string{m.st.dim.Render("loading…")}
	case len(m.list.items) == 0 && m.filters[src.id] != "":
		lines = []string{m.st.dim.Render("nothing matches the filter; / changes it")}
	case len(m.list.items) == 0 && src.kind == kindEndpoint:
		lines = []string{m.st.dim.Render("no requests yet: they show up here live")}
	case len(m.list.items) == 0:
		lines = []string{m.st.dim.Render("no messages yet: they show up here live")}
	}
	rows := h - 2
	for i := m.list.offset; i < len(m.list.items) && i < m.list.offset+rows; i++ {
		lines = append(lines, m.captureRow(m.list.items[i], i == m.list.cursor, inner))
	}
	footer := ""
	if n := len(m.list.items); n > 0 {
		footer = strconv.Itoa(m.list.cursor+1) + "/" + strconv.Itoa(n)
		if m.list.older != "" {
			footer += "+"
		}
	}
	if m.list.loadingOlder {
		footer = "loading older… " + footer
	}
	return m.box(title, footer, lines, w, h, m.focus == paneList)
}

func (m *Model) fmtClock(t time.Time) string {
	t = t.In(m.loc)
	now := time.Now().In(m.loc)
	if y, mo, d := t.Date(); y == now.Year() && mo == now.Month() && d == now.Day() {
		return t.Format("15:04:05")
	}
	return t.Format("Jan _2  ")
}

// captureRow is one list line: prefix "›" for the cursor and "•" for a
// capture that arrived while watching, so both show without colour.
func (m *Model) captureRow(c capture, sel bool, inner int) string {
	cur, fr := " ", " "
	if sel {
		cur = "›"
	}
	if c.fresh {
		fr = "•"
	}
	clock := m.fmtClock(c.receivedAt())
	avail := inner - 2 - len(clock) - 1
	var cells []cell
	if c.req != nil {
		// What tells requests apart is the path: where it would not
		// have room, the time goes first, then the delivery's status.
		// Without the time the method follows the marks at once.
		const (
			pathRoom = 12
			marksW   = 2 // cursor and fresh marks
			methodW  = 7
			statusW  = 3
		)
		status, stStyle := m.deliveryCell(c.req.LastDelivery)
		cells = []cell{{fit(c.req.Method, methodW), m.st.method}}
		rest := avail - (methodW + 1) // what the status and the path share
		if rest-(statusW+1) < pathRoom {
			clock, rest = "", inner-marksW-(methodW+1)
		}
		if rest-(statusW+1) >= pathRoom {
			cells = append(cells, cell{fit(status, statusW), stStyle})
		}
		cells = append(cells, cell{clean(c.req.Target()), lipgloss.Style{}})
	} else {
		s := c.msg
		from := "—"
		if s.From != nil {
			from = s.From.String()
			if s.From.Name != nil && *s.From.Name != "" {
				from = *s.From.Name
			}
		}
		to := addrList(s.To)
		subject := s.Subject
		if subject == "" {
			subject = "(no subject)"
		}
		fromW, toW := max(6, min(24, avail/5)), max(8, min(32, avail*3/10))
		if avail-fromW-toW-2 < 20 {
			cells = []cell{{fit(clean(to), toW), lipgloss.Style{}}, {clean(subject), lipgloss.Style{}}}
		} else {
			cells = []cell{
				{fit(clean(from), fromW), m.st.dim},
				{fit(clean(to), toW), lipgloss.Style{}},
				{clean(subject), lipgloss.Style{}},
			}
		}
	}
	if sel {
		parts := []string{cur + fr + clock}
		for _, x := range cells {
			parts = append(parts, x.text)
		}
		if clock == "" {
			parts = append([]string{parts[0] + parts[1]}, parts[2:]...)
		}
		st := m.st.selectedDim
		if m.focus == paneList {
			st = m.st.selected
		}
		return st.Render(fit(strings.Join(parts, " "), inner))
	}
	clockStyle := m.st.dim
	if c.fresh {
		clockStyle = m.st.fresh
	}
	parts := []string{cur + m.st.fresh.Render(fr) + clockStyle.Render(clock)}
	if clock == "" {
		parts[0] = cur + m.st.fresh.Render(fr) + cells[0].style.Render(cells[0].text)
		cells = cells[1:]
	}
	for i, x := range cells {
		if i == len(cells)-1 {
			// The last cell gets what is left, cut before styling.
			used := ansi.StringWidth(strings.Join(parts, " ")) + 1
			x.text = ansi.Truncate(x.text, max(0, inner-used), "…")
		}
		parts = append(parts, x.style.Render(x.text))
	}
	return strings.Join(parts, " ")
}

type cell struct {
	text  string
	style lipgloss.Style
}

// deliveryCell is the list's status column: the last delivery's response
// status, "err" for one that got none, "—" for none yet.
func (m *Model) deliveryCell(d *contract.DeliverySummary) (string, lipgloss.Style) {
	switch {
	case d == nil:
		return "—", m.st.dim
	case d.ResponseStatus == nil:
		return "err", m.st.bad
	case d.Status == contract.StatusDelivered:
		return strconv.Itoa(*d.ResponseStatus), m.st.ok
	default:
		return strconv.Itoa(*d.ResponseStatus), m.st.bad
	}
}

func addrList(as []contract.Address) string {
	if len(as) == 0 {
		return "—"
	}
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.Address
	}
	return strings.Join(parts, ", ")
}

func (m *Model) detailBox(w, h int) string {
	title := "Detail"
	switch {
	case m.detail.id == "":
	case m.detail.kind == kindEndpoint:
		title = "Request"
	default:
		title = "Message"
	}
	if m.detail.showRaw {
		title += " · raw"
	}
	var lines []string
	footer := ""
	if m.detail.id == "" {
		lines = []string{m.st.dim.Render("enter opens the selected capture")}
	} else {
		lines = strings.Split(m.detail.vp.View(), "\n")
		if vp := m.detail.vp; vp.TotalLineCount() > vp.Height {
			footer = strconv.Itoa(int(vp.ScrollPercent()*100)) + "%"
		}
		if !m.wide() {
			footer = "esc back · " + footer
		}
	}
	return m.box(title, strings.TrimSuffix(footer, " · "), lines, w, h, m.focus == paneDetail)
}

func (m *Model) filterLine() string {
	hint := m.st.dim.Render("enter applies · esc cancels ")
	room := m.width - ansi.StringWidth(hint)
	if room < 20 {
		return fit(" "+m.input.View(), m.width)
	}
	return fit(" "+m.input.View(), room) + hint
}

// state sums up the connection for the status bar, from the newest error
// not yet cleared.
func (m *Model) state() (label string, bad bool, err error, retryIn time.Duration) {
	newest := -1
	for o, e := range m.errs {
		if m.errSeq[o] > newest {
			newest, err, retryIn = m.errSeq[o], e, m.retryIn[o]
		}
	}
	var ae *contract.Error
	switch {
	case err != nil && errors.Is(err, apiclient.ErrUnreachable):
		return "✖ offline", true, err, retryIn
	case err != nil && errors.As(err, &ae) && ae.Status == 429:
		return "◐ waiting", true, err, retryIn
	case err != nil:
		return "▲ error", true, err, retryIn
	case m.watching():
		return "● live", false, nil, 0
	}
	return "○ connecting", false, nil, 0
}

// watching reports whether a long-poll is out for the list on screen, not
// one cancelled for a list that was left.
func (m *Model) watching() bool {
	return m.polling && !m.pollRestart && m.pollGen == m.list.gen
}

func (m *Model) statusBar() string {
	label, bad, err, retryIn := m.state()
	st := m.st.live
	if bad {
		st = m.st.offline
	}
	server := m.client.BaseURL()
	if u, perr := url.Parse(server); perr == nil && u.Host != "" {
		server = u.Host
	}
	left := st.Render(" "+label+" ") + m.st.bar.Render(" "+server)
	if m.haveMe {
		left += m.st.bar.Render(" · " + clean(m.me.Project.Name))
	}
	var right string
	rs := m.st.bar
	switch {
	case m.mode == modeConfirm:
		what := "message"
		if m.confirm.req != nil {
			what = "request"
		}
		right = "delete this " + what + "? y deletes, any other key keeps it"
		rs = m.st.bar.Inherit(m.st.warn)
	case err != nil:
		right = strings.Join(strings.Fields(describe(err)), " ")
		if retryIn > 0 {
			right += " · retry in " + retryIn.Round(100*time.Millisecond).String()
		}
		rs = m.st.bar.Inherit(m.st.bad)
	case m.notice != "":
		right = strings.Join(strings.Fields(clean(m.notice)), " ") // the bar is one line
		if m.noticeBad {
			rs = m.st.bar.Inherit(m.st.bad)
		}
	default:
		right = "? help · / filter · q quit"
		rs = m.st.bar.Inherit(m.st.dim)
	}
	room := m.width - ansi.StringWidth(left) - 2
	// What just happened matters more than where: drop the server, then
	// the state's word, to make room.
	for _, short := range []string{" " + label + " ", " " + strings.Fields(label)[0] + " "} {
		if room >= ansi.StringWidth(right) {
			break
		}
		left = st.Render(short)
		room = m.width - ansi.StringWidth(left) - 2
	}
	if room < 8 {
		return fit(left, m.width)
	}
	right = ansi.Truncate(right, room, "…")
	gap := m.width - ansi.StringWidth(left) - ansi.StringWidth(right) - 1
	return left + m.st.bar.Render(strings.Repeat(" ", max(1, gap))) + rs.Render(right) + m.st.bar.Render(" ")
}

// overlay draws fg centred over bg, keeping bg visible around it.
func overlay(bg, fg string, width, height int) string {
	bl := strings.Split(bg, "\n")
	fl := strings.Split(fg, "\n")
	fw := 0
	for _, l := range fl {
		fw = max(fw, ansi.StringWidth(l))
	}
	fw = min(fw, width)
	x := max(0, (width-fw)/2)
	y := max(0, (height-len(fl))/2)
	for i, l := range fl {
		row := y + i
		if row >= len(bl) {
			break
		}
		b := bl[row]
		// A wide character under an edge of the overlay is cut whole: a
		// blank takes its place, so that the line keeps its width. Cut
		// keeps one straddling its left edge, and a character is at most
		// two cells wide, so starting a cell later is enough.
		need := width - x - fw
		right := ansi.Cut(b, x+fw, width)
		if ansi.StringWidth(right) > need {
			right = " " + ansi.Cut(b, x+fw+1, width)
		}
		if gap := need - ansi.StringWidth(right); gap > 0 {
			right = strings.Repeat(" ", gap) + right
		}
		bl[row] = fit(ansi.Truncate(b, x, ""), x) + fit(l, fw) + right
	}
	return strings.Join(bl, "\n")
}

// helpFrame is what the help overlay's border and padding take of each
// line.
const helpFrame = 4

// helpBox is the help overlay for a body h rows high. What does not fit
// scrolls, from the first row shown, helpTop.
func (m *Model) helpBox(h int) string {
	lines, rows := m.helpLayout(h)
	if rows < len(lines) {
		top := max(0, min(m.helpTop, len(lines)-rows))
		more := m.st.dim.Render(ansi.Truncate("↑↓ scroll · "+strconv.Itoa(top+1)+"–"+strconv.Itoa(top+rows)+
			" of "+strconv.Itoa(len(lines)), m.width-helpFrame, "…"))
		lines = append(lines[top:top+rows:top+rows], more)
	}
	return m.st.overlay.Render(strings.Join(lines, "\n"))
}

// helpLayout is every line of the help laid out for the terminal's width,
// and how many of them are shown at once in a body h rows high: all, or
// one row fewer than fit, for the line that says there is more.
func (m *Model) helpLayout(h int) ([]string, int) {
	lines := m.helpLines(m.width - helpFrame)
	room := max(1, h-2) // the border
	if len(lines) <= room {
		return lines, len(lines)
	}
	return lines, max(1, room-1)
}

// helpLines lays the help out w wide: two columns side by side where they
// fit, their descriptions wrapped under themselves if need be, else one
// column.
func (m *Model) helpLines(w int) []string {
	const keyW = 10
	entries := func(bs []key.Binding, colW int) []string {
		var out []string
		for _, b := range bs {
			h := b.Help()
			for i, d := range strings.Split(ansi.Wrap(h.Desc, max(1, colW-keyW), ""), "\n") {
				k := ""
				if i == 0 {
					k = h.Key
				}
				out = append(out, m.st.accent.Render(fit(k, keyW))+d)
			}
		}
		return out
	}
	column := func(colW int, secs ...helpSection) []string {
		var out []string
		for i, sec := range secs {
			if i > 0 {
				out = append(out, "")
			}
			if sec.name != "" {
				out = append(out, m.st.titleFocused.Render(sec.name))
			}
			out = append(out, entries(sec.bindings, colW)...)
		}
		return out
	}
	secs := m.keys.helpSections()
	const gap = "   "
	var rows []string
	left, right := column(w, secs[0]), column(w, secs[1], secs[2])
	lw, rw := widest(left), widest(right)
	if lw+len(gap)+rw > w {
		// Too wide side by side: the descriptions wrap, at the split of the
		// width that needs the fewest rows, then the fewest wrapped lines,
		// where each column still has room for a few words; else one
		// column.
		const minCol = keyW + 10
		left, right, lw = column(w, secs...), nil, w
		bestRows, bestLines := 0, 0
		for cw := minCol; cw <= w-len(gap)-minCol; cw++ {
			l, r := column(cw, secs[0]), column(w-len(gap)-cw, secs[1], secs[2])
			rows, lines := max(len(l), len(r)), len(l)+len(r)
			if bestRows == 0 || rows < bestRows || rows == bestRows && lines < bestLines {
				bestRows, bestLines, left, right, lw = rows, lines, l, r, cw
			}
		}
	}
	for i := range max(len(left), len(right)) {
		var l, r string
		if i < len(left) {
			l = left[i]
		}
		if i < len(right) {
			r = right[i]
		}
		if r == "" {
			rows = append(rows, l)
			continue
		}
		rows = append(rows, fit(l, lw)+gap+r)
	}
	rows = append(rows, "")
	for _, note := range []string{
		"Filter messages: to:bob from:shop subject:reset",
		"Filter requests: POST /hooks, method:PUT, path:/api",
		`Other words and "quoted phrases" search the whole capture.`,
		"New captures arrive live and are marked • until looked at.",
	} {
		for _, l := range strings.Split(ansi.Wrap(note, w, ""), "\n") {
			rows = append(rows, m.st.dim.Render(l))
		}
	}
	return rows
}

func widest(lines []string) int {
	w := 0
	for _, l := range lines {
		w = max(w, ansi.StringWidth(l))
	}
	return w
}

func (m *Model) pickerBox(h int) string {
	d := m.detail.msg
	if d == nil {
		return ""
	}
	w := max(20, min(m.width-6, 100))
	var title, hint string
	var items []string
	if m.mode == modeLinks {
		title, hint = "Links", "enter or 1–9 opens in a browser · c copies · esc closes"
		for i, l := range d.Links {
			items = append(items, strconv.Itoa(i+1)+". "+kindTag(l)+" "+linkText(l)+clean(l.URL))
		}
	} else {
		dir := m.cfg.SaveDir
		if dir == "" {
			dir = "the current directory"
		}
		title, hint = "Attachments", "enter or 1–9 saves to "+dir+" · esc closes"
		for i, a := range d.Attachments {
			items = append(items, strconv.Itoa(i+1)+". "+attachmentLabel(a)+"  "+clean(a.ContentType)+"  "+size(a.Size))
		}
	}
	rows := max(1, h-6)
	start := 0
	if m.pick >= rows {
		start = m.pick - rows + 1
	}
	lines := []string{m.st.titleFocused.Render(title)}
	for i := start; i < len(items) && i < start+rows; i++ {
		l := "  " + items[i]
		if i == m.pick {
			lines = append(lines, m.st.selected.Render(fit("› "+items[i], w)))
			continue
		}
		lines = append(lines, fit(l, w))
	}
	lines = append(lines, m.st.dim.Render(fit(hint, w)))
	return m.st.overlay.Render(strings.Join(lines, "\n"))
}
