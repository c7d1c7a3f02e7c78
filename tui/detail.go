package tui

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/capturedev/capture/forward/termtext"
	"github.com/capturedev/capture/server/api/contract"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/inbucket/html2text"
)

const (
	labelWidth = 10
	// maxShown bounds how much of a body is laid out: beyond it a person
	// saves or replays rather than scrolls.
	maxShown = 256 << 10
	// maxHex bounds the hex dump of a binary body, four times as long.
	maxHex = 16 << 10
)

// refreshDetail lays the open capture out again, for new data, a toggle or
// a new size.
func (m *Model) refreshDetail() {
	w, h := m.detailSize()
	vp := &m.detail.vp
	vp.Width, vp.Height = max(1, w-2), max(1, h-2)
	vp.SetContent(m.detailContent(vp.Width))
}

func (m *Model) detailContent(w int) string {
	d := &m.detail
	switch {
	case d.id == "":
		return ""
	case !d.loaded() && contract.IsCode(d.err, contract.CodeNotFound):
		return m.st.dim.Render(ansi.Wrap("this capture is gone: deleted, or pruned by retention", w, ""))
	case !d.loaded() && d.err != nil:
		return m.st.bad.Render(ansi.Wrap("could not load it: "+describe(d.err), w, ""))
	case !d.loaded():
		return m.st.dim.Render("loading…")
	case d.msg != nil:
		return m.messageContent(d.msg, w)
	default:
		return m.requestContent(d.req, w)
	}
}

// page builds a detail page line by line at a fixed width.
type page struct {
	m     *Model
	w     int
	lines []string
}

func (p *page) add(s string) { p.lines = append(p.lines, s) }

// field is "Label     value", the value wrapped under itself.
func (p *page) field(label, value string, st ...lipgloss.Style) {
	vw := max(8, p.w-labelWidth)
	wrapped := strings.Split(ansi.Wrap(value, vw, ""), "\n")
	for i, l := range wrapped {
		for _, s := range st {
			l = s.Render(l)
		}
		if i == 0 {
			p.add(p.m.st.label.Render(fit(label, labelWidth)) + l)
		} else {
			p.add(strings.Repeat(" ", labelWidth) + l)
		}
	}
}

func (p *page) section(title string) {
	p.add("")
	p.add(p.m.st.accent.Render(title))
}

// text adds s wrapped to the page, indented by two.
func (p *page) text(s string, hard bool) {
	w := max(8, p.w-2)
	for _, l := range strings.Split(s, "\n") {
		if hard {
			l = ansi.Hardwrap(l, w, true)
		} else {
			l = ansi.Wrap(l, w, "")
		}
		for _, x := range strings.Split(l, "\n") {
			p.add("  " + x)
		}
	}
}

// hang adds s wrapped to the page, its first line indented by two and the
// others by indent, so that a long value reads as one item. Every line
// fits the page: a signature or a token is copied from here, and not one
// of its characters may fall off the edge.
func (p *page) hang(s string, indent int) {
	for i, l := range strings.Split(ansi.Wrap(s, max(8, p.w-indent), ""), "\n") {
		if i == 0 {
			p.add("  " + l)
		} else {
			p.add(strings.Repeat(" ", indent) + l)
		}
	}
}

// bodyLayout says how a formatted body goes on the page.
type bodyLayout int

const (
	wrapWords bodyLayout = iota // wrapped at spaces, like prose
	wrapHard                    // cut at the edge: JSON, raw bytes
	laidOut                     // made to fit the page already: a hex dump
)

func (p *page) body(s string, layout bodyLayout) {
	if layout == laidOut {
		p.lines = append(p.lines, strings.Split(s, "\n")...)
		return
	}
	p.text(s, layout == wrapHard)
}

func (p *page) String() string { return strings.Join(p.lines, "\n") }

func (m *Model) messageContent(msg *contract.Message, w int) string {
	p := &page{m: m, w: w}
	subject := msg.Subject
	if subject == "" {
		subject = "(no subject)"
	}
	p.field("Subject", clean(subject), m.st.titleFocused)
	from := "—"
	if msg.From != nil {
		from = msg.From.String()
	}
	p.field("From", clean(from))
	p.field("To", clean(addrs(msg.To)))
	if len(msg.Cc) > 0 {
		p.field("Cc", clean(addrs(msg.Cc)))
	}
	if len(msg.ReplyTo) > 0 {
		p.field("Reply-To", clean(addrs(msg.ReplyTo)))
	}
	if msg.Date != nil {
		p.field("Date", msg.Date.In(m.loc).Format("2006-01-02 15:04:05 MST"))
	}
	p.field("Received", msg.ReceivedAt.In(m.loc).Format("2006-01-02 15:04:05 MST"))
	if msg.Envelope.From != "" || len(msg.Envelope.To) > 0 {
		from := msg.Envelope.From
		if from == "" {
			from = "<>" // the null sender of a bounce, as MTAs write it
		}
		p.field("Envelope", clean(from+" → "+strings.Join(msg.Envelope.To, ", ")), m.st.dim)
	}
	p.field("Id", msg.ID+" · "+size(msg.Size), m.st.dim)

	if len(msg.Codes) > 0 {
		p.section("Codes (c copies the first)")
		for _, c := range msg.Codes {
			context := strings.Join(strings.Fields(c.Context), " ")
			p.add(ansi.Truncate("  "+m.st.titleFocused.Render(clean(c.Value))+"  "+m.st.dim.Render(clean(context)), w, "…"))
		}
	}
	if m.showHeaders {
		p.section("Headers (h hides)")
		m.headerLines(p, msg.Headers)
	}
	if m.detail.showRaw {
		p.section("Raw message (v: back to the body)")
		switch {
		case m.detail.raw == nil:
			p.add(m.st.dim.Render("  loading…"))
		case !utf8.Valid(m.detail.raw):
			p.text(clean(strings.ToValidUTF8(string(truncate(m.detail.raw)), "\uFFFD")), true)
		default:
			p.text(clean(string(truncate(m.detail.raw))), true)
		}
	} else {
		body, label := messageBody(msg)
		p.section(label)
		p.text(clean(body), false)
	}
	if len(msg.Links) > 0 {
		title := "Links (o opens or copies)"
		if msg.LinksTruncated {
			title = "Links: the first " + strconv.Itoa(len(msg.Links)) + " (o opens or copies)"
		}
		p.section(title)
		for i, l := range msg.Links {
			n := m.st.accent.Render(strconv.Itoa(i+1) + ".")
			p.hang(n+" "+m.st.method.Render(kindTag(l))+" "+linkText(l)+m.st.dim.Render(clean(l.URL)), 5)
		}
	}
	if len(msg.Attachments) > 0 {
		p.section("Attachments (a saves)")
		for i, a := range msg.Attachments {
			n := m.st.accent.Render(strconv.Itoa(i+1) + ".")
			extra := ""
			if a.Inline {
				extra = " · inline"
			}
			p.hang(n+" "+attachmentLabel(a)+"  "+m.st.dim.Render(clean(a.ContentType)+" · "+size(a.Size)+extra), 5)
		}
	}
	if len(msg.Warnings) > 0 {
		p.section("Parse warnings")
		for _, warn := range msg.Warnings {
			p.text(m.st.warn.Render(clean(warn)), false)
		}
	}
	if !m.showHeaders {
		p.add("")
		p.add(m.st.dim.Render("h all headers · v raw message"))
	}
	return p.String()
}

// kindTag is a link's kind as a tag, readable without colour.
func kindTag(l contract.Link) string {
	kind := l.Kind
	if kind == "" {
		kind = contract.LinkOther
	}
	return "[" + clean(kind) + "]"
}

// linkText is a link's anchor text on one line, followed by a space, or
// nothing.
func linkText(l contract.Link) string {
	if l.Text == nil || strings.TrimSpace(*l.Text) == "" {
		return ""
	}
	return clean(strings.Join(strings.Fields(*l.Text), " ")) + " "
}

// messageBody is the text part, else the HTML part made readable.
func messageBody(msg *contract.Message) (string, string) {
	if msg.Body.Text != nil && strings.TrimSpace(*msg.Body.Text) != "" {
		return strings.TrimRight(*msg.Body.Text, "\r\n\t "), "Text"
	}
	if msg.Body.HTML != nil {
		s, err := html2text.FromString(*msg.Body.HTML, html2text.Options{OmitLinks: true})
		if err == nil {
			return s, "Text (from HTML)"
		}
	}
	return "(no body)", "Text"
}

func (m *Model) headerLines(p *page, hs contract.Headers) {
	if len(hs) == 0 {
		p.add(m.st.dim.Render("  none"))
	}
	for _, h := range hs {
		for _, v := range h.Values {
			p.hang(m.st.label.Render(clean(h.Name)+":")+" "+clean(v), 6)
		}
	}
}

func (m *Model) requestContent(r *contract.Request, w int) string {
	p := &page{m: m, w: w}
	p.add(ansi.Wrap(m.st.method.Render(r.Method)+" "+m.st.titleFocused.Render(clean(r.Target())), w, ""))
	p.add("")
	p.field("Received", r.ReceivedAt.In(m.loc).Format("2006-01-02 15:04:05 MST")+" from "+clean(r.RemoteAddr))
	ct := "—"
	if r.ContentType != nil {
		ct = clean(*r.ContentType)
	}
	p.field("Content", ct+" · "+size(r.Size))
	if d := lastDelivery(r.Deliveries); d != nil {
		p.field("Last", deliveryLine(*d), m.deliveryStyle(*d))
	}
	p.field("Id", r.ID, m.st.dim)

	if r.Query != "" {
		p.section("Query")
		for _, kv := range queryPairs(r.Query) {
			p.hang(m.st.label.Render(clean(kv[0]))+" = "+clean(kv[1]), 4)
		}
	}
	body, err := r.BodyBytes()
	label, text, layout := m.formatBody(body, ct, m.detail.showRaw, w)
	if err != nil {
		label, text, layout = "Body", m.st.bad.Render(err.Error()), wrapWords
	}
	p.section(label)
	p.body(text, layout)

	p.section("Headers")
	m.headerLines(p, r.Headers)

	if rep, ok := m.replays[r.ID]; ok {
		p.section("Last replay")
		p.field("Sent", clean(rep.Request.Method+" "+rep.Request.URL))
		p.field("Result", replaySummary(rep), m.deliveryStyle(rep.Delivery))
		if rep.Response != nil {
			rb := []byte{}
			switch {
			case rep.Response.Body != nil:
				rb = []byte(*rep.Response.Body)
			case rep.Response.BodyBase64 != nil:
				rb, _ = base64.StdEncoding.DecodeString(*rep.Response.BodyBase64)
			}
			_, rt, layout := m.formatBody(rb, rep.Response.Headers.Get("Content-Type"), false, w)
			lines := strings.Split(rt, "\n")
			if len(lines) > 20 {
				lines = append(lines[:20], m.st.dim.Render("…"))
			}
			p.body(strings.Join(lines, "\n"), layout)
		}
	}

	p.section("Deliveries")
	if len(r.Deliveries) == 0 {
		p.text(m.st.dim.Render("none yet · r replays it to the endpoint's saved target"), false)
	}
	for _, d := range r.Deliveries {
		code := "err"
		if d.ResponseStatus != nil {
			code = strconv.Itoa(*d.ResponseStatus)
		}
		p.hang(m.st.dim.Render(d.CreatedAt.In(m.loc).Format("15:04:05"))+" "+fit(d.Kind, 7)+" "+
			m.deliveryStyle(d).Render(fit(code+" "+d.Status, 13))+" "+fit(strconv.FormatInt(d.DurationMS, 10)+" ms", 8)+
			" "+m.st.dim.Render(clean(d.TargetURL)), 11)
		if d.Error != nil {
			p.text(m.st.bad.Render("  "+clean(*d.Error)), false)
		}
	}
	p.add("")
	p.add(m.st.dim.Render("r replay · d delete · v raw body"))
	return p.String()
}

// deliveryLine is a delivery's outcome in a few words.
func deliveryLine(d contract.Delivery) string {
	out := d.Status
	if d.ResponseStatus != nil {
		out = strconv.Itoa(*d.ResponseStatus) + " " + out
	}
	return out + " · " + d.Kind + " · " + strconv.FormatInt(d.DurationMS, 10) + " ms"
}

func (m *Model) deliveryStyle(d contract.Delivery) lipgloss.Style {
	if d.Status == contract.StatusDelivered {
		return m.st.ok
	}
	return m.st.bad
}

// formatBody shows a body the way it is best read on a page w wide: JSON
// indented and coloured, a form decoded, text as it is, anything else as a
// hex dump.
func (m *Model) formatBody(b []byte, contentType string, raw bool, w int) (label, text string, layout bodyLayout) {
	mt, _, _ := mime.ParseMediaType(contentType)
	n := len(b)
	switch {
	case n == 0:
		return "Body", m.st.dim.Render("(empty)"), wrapWords
	case !utf8.Valid(b):
		shown := b
		if len(shown) > maxHex {
			shown = shown[:maxHex]
		}
		text = hexDump(shown, w)
		if n > len(shown) {
			text += "\n" + m.st.dim.Render("… "+size(int64(n-len(shown)))+" more")
		}
		return "Body · binary, " + size(int64(n)), text, laidOut
	case raw:
		return "Body · raw", clean(string(truncate(b))), wrapHard
	case (strings.Contains(mt, "json") || looksJSON(b)) && json.Valid(b) && n <= maxShown:
		var buf bytes.Buffer
		if json.Indent(&buf, b, "", "  ") == nil {
			return "Body · JSON", m.colorJSON(clean(buf.String())), wrapHard
		}
	case mt == "application/x-www-form-urlencoded" && n <= maxShown:
		if pairs := queryPairs(string(b)); len(pairs) > 0 {
			var lines []string
			for _, kv := range pairs {
				lines = append(lines, m.st.label.Render(clean(kv[0]))+" = "+clean(kv[1]))
			}
			return "Body · form", strings.Join(lines, "\n"), wrapWords
		}
	}
	return "Body", clean(string(truncate(b))), wrapWords
}

// hexDump is laid out as `hexdump -C` does, with as many bytes a row as
// fit in w columns (16, 8 or 4), so that no row wraps and its ASCII column
// stays beside its bytes; on a pane narrower than a row of 4 (29 columns)
// rows run past its edge.
func hexDump(b []byte, w int) string {
	perRow := 16
	for perRow > 4 && hexRowWidth(perRow) > w {
		perRow /= 2
	}
	var out strings.Builder
	for off := 0; off < len(b); off += perRow {
		row := b[off:min(off+perRow, len(b))]
		fmt.Fprintf(&out, "%08x  ", off)
		for i := range perRow {
			if i > 0 && i%8 == 0 {
				out.WriteByte(' ')
			}
			if i < len(row) {
				fmt.Fprintf(&out, "%02x ", row[i])
			} else {
				out.WriteString("   ")
			}
		}
		out.WriteString(" |")
		for _, c := range row {
			if c < 0x20 || c >= 0x7f {
				c = '.'
			}
			out.WriteByte(c)
		}
		out.WriteString("|\n")
	}
	return strings.TrimSuffix(out.String(), "\n")
}

// hexRowWidth is how wide a hexDump row of perRow bytes is: the offset, the
// bytes in groups of eight, the ASCII column between bars.
func hexRowWidth(perRow int) int {
	return 8 + 2 + 3*perRow + (perRow-1)/8 + 1 + 1 + perRow + 1
}

func looksJSON(b []byte) bool {
	t := bytes.TrimSpace(b)
	return len(t) > 0 && (t[0] == '{' || t[0] == '[')
}

func truncate(b []byte) []byte {
	if len(b) <= maxShown {
		return b
	}
	// Cut on a rune boundary so the tail does not turn into garbage.
	cut := maxShown
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return append(b[:cut:cut], []byte("\n… cut here: "+size(int64(len(b)-cut))+" more; v shows the rest raw, or save it via the API")...)
}

// colorJSON colours indented JSON token by token; keys are told from
// string values by the colon that follows them.
func (m *Model) colorJSON(s string) string {
	var out strings.Builder
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(s))
			k := j
			for k < len(s) && (s[k] == ' ') {
				k++
			}
			st := m.st.jsonString
			if k < len(s) && s[k] == ':' {
				st = m.st.jsonKey
			}
			out.WriteString(st.Render(s[i:j]))
			i = j
		case c == '-' || (c >= '0' && c <= '9'):
			j := i
			for j < len(s) && strings.IndexByte("+-0123456789.eE", s[j]) >= 0 {
				j++
			}
			out.WriteString(m.st.jsonNumber.Render(s[i:j]))
			i = j
		case c == 't' || c == 'f' || c == 'n':
			j := i
			for j < len(s) && s[j] >= 'a' && s[j] <= 'z' {
				j++
			}
			out.WriteString(m.st.jsonLit.Render(s[i:j]))
			i = j
		case strings.IndexByte("{}[],:", c) >= 0:
			out.WriteString(m.st.jsonPunct.Render(string(c)))
			i++
		default:
			out.WriteByte(c)
			i++
		}
	}
	return out.String()
}

// queryPairs splits a query string in its own order, which url.ParseQuery
// loses.
func queryPairs(q string) [][2]string {
	var out [][2]string
	for _, part := range strings.FieldsFunc(q, func(r rune) bool { return r == '&' || r == ';' }) {
		k, v, _ := strings.Cut(part, "=")
		if uk, err := url.QueryUnescape(k); err == nil {
			k = uk
		}
		if uv, err := url.QueryUnescape(v); err == nil {
			v = uv
		}
		out = append(out, [2]string{k, v})
	}
	return out
}

func addrs(as []contract.Address) string {
	if len(as) == 0 {
		return "—"
	}
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.String()
	}
	return strings.Join(parts, ", ")
}

func size(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	f, suffix := float64(n)/unit, "KiB"
	for _, s := range []string{"MiB", "GiB"} {
		if f < unit {
			break
		}
		f, suffix = f/unit, s
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + suffix
}

// clean makes captured text safe to print: a sender controls it, and an
// escape sequence in a subject must not reach the terminal. Control
// characters become visible, tabs become spaces, \r\n becomes \n, and
// the rest is drawn as wide as the layout measures it (cellText).
func clean(s string) string {
	return cellText(escapeControls(s))
}

// escapeControls shows what would act on the terminal
// (termtext.ActsOnTerminal: the C0 controls, DEL, the C1 controls and the
// bidi embeddings, overrides and isolates) as the forwarding client's
// termtext.Visible does, a C0 control as ^X and the rest as U+FFFD, as
// it does invalid bytes; so captured text cannot move the cursor, nor
// reverse the rest of its row, pane borders included. Right-to-left
// letters, and the marks that steer them, stay. Unlike termtext.Visible,
// it lays text out for the pane: a tab becomes four spaces, and a lone
// carriage return ends a line as a line feed does (one before a line
// feed is dropped).
func escapeControls(s string) string {
	ok := true
	for _, r := range s {
		if r == '\t' || termtext.ActsOnTerminal(r) || r == utf8.RuneError {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '\t':
			b.WriteString("    ")
		case r == '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				continue
			}
			b.WriteByte('\n')
		case r == '\n':
			b.WriteByte('\n')
		case r < 0x20 && termtext.ActsOnTerminal(r):
			b.WriteString("^" + string(rune(r+'@')))
		case termtext.ActsOnTerminal(r):
			b.WriteRune('\uFFFD')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
