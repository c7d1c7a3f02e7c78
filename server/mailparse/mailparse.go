// Package mailparse decodes a raw RFC 5322 message into the form the read API
// serves: decoded headers, addresses, bodies, attachments, links with their
// kinds, verification codes and a snippet.
//
// It runs once per message on the SMTP ingest path, so each body is scanned
// once and nothing is compiled per call. A message is never rejected: what
// cannot be decoded is left out and described in Message.Warnings, and the
// raw bytes stay the source of truth.
package mailparse

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"mime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jhillyerd/enmime/v2"
	"github.com/jhillyerd/enmime/v2/mediatype"
	"golang.org/x/net/html/charset"
)

// Address is a mailbox from an address header.
type Address struct{ Name, Address string }

// Header is one header field of the top-level message: Name is the canonical
// MIME name (textproto.CanonicalMIMEHeaderKey) and Values holds every
// occurrence, RFC 2047-decoded, in order of appearance.
type Header struct {
	Name   string
	Values []string
}

// Attachment is a MIME leaf part that is not one of the text/html bodies.
type Attachment struct {
	Filename, ContentType, ContentID string // ContentID without <>
	// Inline is set for parts meant to be shown inside the HTML body:
	// Content-Disposition inline, or a Content-ID that the HTML references
	// or that sits undisposed in a multipart/related.
	Inline bool
	Data   []byte
}

// Link is an http or https link found in a body or in the List-Unsubscribe
// header.
type Link struct {
	URL    string  // absolute http/https URL, entities and transfer encodings decoded
	Text   *string // anchor text, whitespace collapsed; nil for text-body links and empty anchors
	Origin string  // scheme://host[:port] as the URL states it, scheme and host lowercased
	Kind   string  // KindVerify, KindReset, KindLogin, KindUnsubscribe or KindOther
}

// Message is the decoded form of a raw message.
//
// Text and HTML have CRLF line breaks turned into LF, as a mail client does
// when it shows a message; the raw message keeps the bytes as received.
type Message struct {
	From            *Address // nil when absent or unparseable
	To, Cc, ReplyTo []Address
	Subject         string
	Date            *time.Time // nil when absent or unparseable
	MessageID       string     // without <>
	Headers         []Header
	Text, HTML      *string // UTF-8; nil where absent
	Attachments     []Attachment
	Links           []Link // the first 1,000
	LinksTruncated  bool   // more links than Links holds
	Codes           []Code // most likely first
	Snippet         string
	Warnings        []string
}

const (
	snippetRunes   = 200
	maxWarnings    = 50
	maxWarningLen  = 300
	maxPartErrors  = 10
	maxQuotedValue = 80
)

// parser is configured once and never mutated; ReadParts copies it.
//
// Charset detection is off: it is slow and overrides a correct declaration
// on short bodies. Text conversion is off so that Text stays nil when the
// message has no text part; the snippet is taken from the HTML instead.
var parser = enmime.NewParser(
	enmime.SkipMalformedParts(true),
	enmime.MultipartWOBoundaryAsSinglePart(true),
	enmime.DisableTextConversion(true),
	enmime.DisableCharacterDetection(true),
	enmime.MaxStoredPartErrors(maxPartErrors),
	enmime.SetReadPartErrorPolicy(enmime.AllowCorruptTextPartErrorPolicy),
	enmime.SetCustomParseMediaType(parseMediaType),
)

// parseMediaType declares UTF-8 where enmime would otherwise guess, and
// names every other charset by lookupCharset's canonical name, so that
// enmime decodes a body with the decoder a browser would pick for its
// label (ISO-8859-1 as Windows-1252, GB2312 as GB18030) and the one
// header words in that charset get.
//
// A body without a charset (or with us-ascii, which lazy senders state while
// sending UTF-8) is passed through as bytes; Parse then keeps it if it is
// valid UTF-8 and falls back to a legacy charset if not. Text types other
// than plain and html are attachments (calendars, CSV): passing them through
// keeps their bytes exact. A Content-Type that cannot be parsed at all counts
// as absent instead of failing the whole message.
func parseMediaType(ctype string) (string, map[string]string, []string, error) {
	if r, ok := mediaTypes.get(ctype); ok {
		return r.mtype, maps.Clone(r.params), slices.Clone(r.invalid), nil
	}
	mtype, params, invalid, err := mediatype.ParseWithOptions(ctype,
		mediatype.ParseOptions{StripMediaTypeInvalidCharacters: true})
	if err != nil {
		mtype, params, invalid = "", map[string]string{}, nil
	} else if strings.HasPrefix(mtype, "text/") {
		if params == nil {
			params = map[string]string{}
		}
		cs := strings.ToLower(strings.TrimSpace(params["charset"]))
		switch {
		case cs == "" || cs == "us-ascii" || cs == "ascii" ||
			(mtype != "text/plain" && mtype != "text/html"):
			params["charset"] = "utf-8"
		default:
			// The replacement encoding (iso-2022-kr, hz-gb-2312…) turns a
			// whole body into one U+FFFD; enmime's warning about an unknown
			// charset and the bytes as sent say more.
			if _, name, ok := lookupCharset(cs); ok && name != "replacement" {
				params["charset"] = name
			}
		}
	}
	mediaTypes.put(ctype, mediaType{mtype, params, invalid})
	return mtype, maps.Clone(params), slices.Clone(invalid), nil
}

// mediaTypes remembers parsed Content-Type values. Each one is parsed
// three times per message (the shape check, then twice inside enmime), and
// the parts' values ("text/plain; charset=utf-8") repeat from message to
// message; parsing is a sizeable share of the cost of a small message.
var mediaTypes = mediaTypeCache{m: map[string]mediaType{}}

const (
	mediaTypeCacheSize = 1024
	// maxCachedMediaType keeps odd, long values (and hostile ones) out.
	maxCachedMediaType = 200
)

type mediaType struct {
	mtype   string
	params  map[string]string
	invalid []string
}

type mediaTypeCache struct {
	mu sync.Mutex
	m  map[string]mediaType
}

func (c *mediaTypeCache) get(ctype string) (mediaType, bool) {
	c.mu.Lock()
	r, ok := c.m[ctype]
	c.mu.Unlock()
	return r, ok
}

func (c *mediaTypeCache) put(ctype string, r mediaType) {
	if len(ctype) > maxCachedMediaType {
		return
	}
	c.mu.Lock()
	if len(c.m) >= mediaTypeCacheSize {
		clear(c.m) // boundaries are unique per message: no entry is precious
	}
	c.m[ctype] = r
	c.mu.Unlock()
}

// Parse decodes raw. It never fails and never panics: a message that cannot
// be fully decoded yields whatever could be decoded, plus Warnings.
func Parse(raw []byte) *Message { return parse(raw, true) }

// parse is Parse; without shortcut every message goes through enmime, which
// the tests use to show that the shortcut changes nothing.
func parse(raw []byte, shortcut bool) (m *Message) {
	m = &Message{}
	var w warnings
	defer func() {
		if r := recover(); r != nil {
			w.addf("message only partly decoded: internal error: %v", r)
		}
		if !utf8.ValidString(m.Snippet) {
			m.Snippet = strings.ToValidUTF8(m.Snippet, "")
		}
		m.Warnings = w.finish()
	}()

	msg := raw
	if n := mboxFromLine(raw); n > 0 {
		// An mbox separator is not a header; enmime would choke on it.
		msg = raw[n:]
	}
	hdr := scanHeader(msg)
	if !hdr.found && len(msg) > 0 {
		w.add("message has no header section; whole message read as the body")
	}
	hd := &headerDecoder{w: &w}
	readHeaders(m, hdr.fields, hd)

	var b bodies
	if body, html, ok := singleBody(hdr, msg[hdr.body:]); shortcut && ok {
		b.parts = 1
		switch {
		case len(body) == 0:
		case html:
			b.html, b.hasHTML = joinBody(nil, body), true
		default:
			b.text, b.hasText = joinBody(nil, body), true
		}
	} else {
		b.readMIME(msg, hdr, &w, shortcut)
	}
	b.finish(m)

	sc := scanHTMLOptions{}
	if m.HTML != nil {
		sc.text = m.Text == nil || strings.TrimSpace(*m.Text) == ""
		sc.cids = len(b.atts) > 0
	}
	var ls linkSet
	res := scanAll(m.HTML, m.Text, &ls, sc)
	for _, h := range m.Headers {
		if h.Name == "List-Unsubscribe" {
			for _, v := range h.Values {
				ls.addUnsubscribe(v)
			}
		}
	}
	m.Links, m.LinksTruncated = ls.links, ls.truncated
	m.Codes = findCodes(m.Subject, m.Text, res.lines)
	m.Attachments = b.attachments(res.cids)
	if sc.text {
		m.Snippet = res.visible
	} else if m.Text != nil {
		c := collapser{max: snippetRunes}
		writeCollapsed(&c, *m.Text)
		m.Snippet = c.String()
	}
	return m
}

// readMIME reads the bodies and attachments with enmime; with split, a
// well-formed multipart is split first and enmime reads each leaf.
func (b *bodies) readMIME(msg []byte, hdr headerSection, w *warnings, split bool) {
	var root *enmime.Part
	msg = trimSoftBreaks(msg, hdr)
	err := checkShape(hdr, msg[hdr.body:])
	if err == nil {
		ok := false
		if split {
			root, ok = splitMIME(msg, hdr)
		}
		if !ok {
			root, err = readParts(msg, hdr.found)
		}
	}
	if err != nil {
		w.addf("MIME structure could not be read (%v); body kept as plain text", err)
		b.fallback(msg[hdr.body:])
		return
	}
	for _, e := range collectErrors(root) {
		w.add(e)
	}
	b.walk(root, w)
	if b.parts == 0 && root.FirstChild == nil && root.Boundary != "" {
		w.addf("no part found for MIME boundary %q; body kept as plain text", quoteShort(root.Boundary))
		b.fallback(msg[hdr.body:])
	}
}

// singleBody returns the body of a message that enmime would read as a
// single text/plain or text/html UTF-8 part with nothing to decode, so that
// Parse can skip it: for such a message enmime's part is the body's bytes
// as they are, with no warning. Transactional mail from many frameworks is
// like this, and so is bulk HTML, where skipping enmime also spares a
// growing copy of the body. Anything else (a disposition, a file name, a
// transfer encoding, another charset, invalid UTF-8, a header enmime would
// repair) goes through enmime.
func singleBody(hdr headerSection, body []byte) (_ []byte, html, ok bool) {
	if !hdr.plain || len(hdr.fields) == 0 {
		return nil, false, false
	}
	var ctype, cte []byte
	nCT, nCTE := 0, 0
	for _, f := range hdr.fields {
		switch f.name {
		case "Content-Type":
			ctype, nCT = f.value, nCT+1
		case "Content-Transfer-Encoding":
			cte, nCTE = f.value, nCTE+1
		case "Content-Disposition":
			return nil, false, false
		}
	}
	if nCT > 1 || nCTE > 1 {
		return nil, false, false
	}
	if nCT == 1 {
		mtype, params, invalid, _ := parseMediaType(string(ctype))
		if mtype != "text/plain" && mtype != "text/html" || !strings.EqualFold(params["charset"], "utf-8") || len(invalid) > 0 {
			return nil, false, false
		}
		html = mtype == "text/html"
		for k := range params {
			if k != "charset" && (html || k != "format" && k != "delsp") {
				return nil, false, false
			}
		}
	}
	switch strings.ToLower(string(cte)) {
	case "", "7bit", "8bit", "binary":
	default:
		return nil, false, false
	}
	return body, html, utf8.Valid(body)
}

// readParts runs enmime with a recover of its own, so that a panic inside it
// still leaves Parse with the headers and a fallback body.
func readParts(msg []byte, hasHeader bool) (root *enmime.Part, err error) {
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, fmt.Errorf("internal error: %v", r)
		}
	}()
	var r io.Reader = bytes.NewReader(msg)
	if !hasHeader {
		// An empty header section makes enmime read everything as the body
		// instead of failing on the first line.
		r = io.MultiReader(strings.NewReader("\r\n"), r)
	}
	return parser.ReadParts(r)
}

func collectErrors(root *enmime.Part) []string {
	var out []string
	walkParts(root, func(p *enmime.Part, _ bool) {
		for _, e := range p.Errors {
			if e == nil || e.Name == enmime.ErrorPlainTextFromHTML {
				continue
			}
			out = append(out, e.Name+": "+e.Detail)
		}
	})
	return out
}

// walkParts visits the tree depth first in document order without recursion:
// the nesting depth is chosen by whoever sent the message. related reports
// whether the part's parent is a multipart/related.
func walkParts(root *enmime.Part, visit func(p *enmime.Part, related bool)) {
	type item struct {
		p       *enmime.Part
		related bool
	}
	stack := []item{{root, false}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		visit(it.p, it.related)
		if it.p.FirstChild == nil {
			continue
		}
		rel := it.p.ContentType == "multipart/related"
		mark := len(stack)
		for c := it.p.FirstChild; c != nil; c = c.NextSibling {
			stack = append(stack, item{c, rel})
			if len(stack)-mark > 1<<20 {
				break // a sibling cycle; enmime guards against it, but cheaply
			}
		}
		// Reverse the children just pushed so the first is visited first.
		for i, j := mark, len(stack)-1; i < j; i, j = i+1, j-1 {
			stack[i], stack[j] = stack[j], stack[i]
		}
	}
}

type pendingAttachment struct {
	p       *enmime.Part
	related bool
}

// bodies gathers the text and HTML bodies and the attachment parts.
type bodies struct {
	text, html       []byte
	hasText, hasHTML bool
	parts            int // leaf parts seen
	atts             []pendingAttachment
}

func (b *bodies) walk(root *enmime.Part, w *warnings) {
	walkParts(root, func(p *enmime.Part, related bool) {
		if p.FirstChild != nil {
			return
		}
		ct := p.ContentType
		if strings.HasPrefix(ct, "multipart/") {
			if p.Boundary != "" || len(p.Content) == 0 {
				return // empty container
			}
			w.addf("part %s: %s without boundary; read as text/plain", p.PartID, ct)
			ct = ""
		}
		b.parts++
		if p.Parent == nil && len(p.Content) == 0 {
			return // a message without a body has no text, not an empty one
		}
		if p.ContentType == "" && p.Header.Get("Content-Type") != "" {
			w.addf("part %s: unreadable Content-Type %q; read as text/plain",
				p.PartID, quoteShort(p.Header.Get("Content-Type")))
		}
		isBodyType := ct == "text/plain" || ct == "text/html" || ct == ""
		if isBodyType && disposition(p) != "attachment" && p.FileName == "" {
			content := bodyText(p, ct == "text/html", w)
			if ct == "text/html" {
				b.html = joinBody(b.html, content)
				b.hasHTML = true
			} else {
				b.text = joinBody(b.text, content)
				b.hasText = true
			}
			return
		}
		b.atts = append(b.atts, pendingAttachment{p, related})
	})
}

// fallback keeps an undecodable body as text so nothing is lost from view.
func (b *bodies) fallback(body []byte) {
	if len(body) == 0 {
		return
	}
	if !utf8.Valid(body) {
		body = windows1252(body)
	}
	b.text = joinBody(b.text, body)
	b.hasText = true
}

func (b *bodies) finish(m *Message) {
	if b.hasText {
		s := crlfToLF(b.text)
		m.Text = &s
	}
	if b.hasHTML {
		s := crlfToLF(b.html)
		m.HTML = &s
	}
}

// attachments builds the result list once the HTML's cid: references are
// known, since they decide which parts are inline.
func (b *bodies) attachments(cids map[string]struct{}) []Attachment {
	if len(b.atts) == 0 {
		return nil
	}
	out := make([]Attachment, 0, len(b.atts))
	for _, pa := range b.atts {
		p := pa.p
		ct := p.ContentType
		if ct == "" {
			ct = "text/plain"
		}
		a := Attachment{
			Filename:    baseName(fileName(p.FileName, p.Header.Get("Content-Disposition"), p.Header.Get("Content-Type"))),
			ContentType: ct,
			ContentID:   contentID(p.Header.Get("Content-Id")),
			Data:        p.Content,
		}
		_, referenced := cids[a.ContentID]
		a.Inline = disposition(p) == "inline" ||
			(a.ContentID != "" && (referenced || (pa.related && disposition(p) == "")))
		out = append(out, a)
	}
	return out
}

// bodyText returns a body part's content as UTF-8. enmime has already
// converted any declared charset; what is left invalid is either undeclared
// legacy 8-bit text or a wrong declaration.
func bodyText(p *enmime.Part, isHTML bool, w *warnings) []byte {
	c := p.Content
	if utf8.Valid(c) {
		return c
	}
	declared := ""
	if _, params, _, err := mediatype.Parse(p.Header.Get("Content-Type")); err == nil {
		declared = strings.ToLower(strings.TrimSpace(params["charset"]))
	}
	if declared == "" || declared == "us-ascii" || declared == "ascii" {
		if isHTML {
			enc, name, _ := charset.DetermineEncoding(c, "text/html")
			if out, err := enc.NewDecoder().Bytes(c); err == nil {
				w.addf("part %s: HTML without charset is not UTF-8; read as %s", p.PartID, name)
				return out
			}
		}
		w.addf("part %s: text without charset is not UTF-8; read as windows-1252", p.PartID)
		return windows1252(c)
	}
	w.addf("part %s: body is not valid %s; bad bytes replaced", p.PartID, quoteShort(declared))
	return bytes.ToValidUTF8(c, []byte("\uFFFD"))
}

// joinBody appends a body part to the ones before it. The first part is
// used as it is (clipped, so that appending the next one copies it).
func joinBody(dst, part []byte) []byte {
	if dst == nil {
		return slices.Clip(part)
	}
	if len(dst) > 0 && len(part) > 0 && dst[len(dst)-1] != '\n' {
		dst = append(dst, '\n')
	}
	return append(dst, part...)
}

// crlfToLF makes the string with one copy, however many line breaks.
func crlfToLF(b []byte) string {
	var sb strings.Builder
	sb.Grow(len(b))
	for {
		i := bytes.Index(b, []byte("\r\n"))
		if i < 0 {
			sb.Write(b)
			return sb.String()
		}
		sb.Write(b[:i])
		sb.WriteByte('\n')
		b = b[i+2:]
	}
}

// baseName drops any directory part a sender put in a file name, so that
// nothing downstream can be tricked into a path.
func baseName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	return strings.ToValidUTF8(strings.TrimSpace(name), "\uFFFD")
}

// disposition is a part's Content-Disposition type, lower case. enmime
// leaves it empty for a part without a Content-Type, which is text/plain
// (RFC 2045) and still an attachment when it says so.
func disposition(p *enmime.Part) string {
	if p.Disposition != "" {
		return p.Disposition
	}
	d, _, _ := strings.Cut(p.Header.Get("Content-Disposition"), ";")
	return strings.ToLower(strings.TrimSpace(d))
}

// fileName is a part's file name: enmime's, unless that is empty or
// garbled. enmime reads no Content-Disposition of a part without a
// Content-Type, and Go's mime package decodes RFC 2231 values in UTF-8
// only: Content-Disposition's filename, else Content-Type's name, is then
// read here, in the charset it declares.
func fileName(parsed, disposition, contentType string) string {
	if parsed != "" && !strings.ContainsRune(parsed, utf8.RuneError) {
		return parsed
	}
	for _, h := range []struct{ value, param string }{{disposition, "filename"}, {contentType, "name"}} {
		if name, ok := extendedParam(h.value, h.param); ok && name != "" {
			return name
		}
		if _, params, err := mime.ParseMediaType(h.value); err == nil && params[h.param] != "" &&
			!strings.ContainsRune(params[h.param], utf8.RuneError) {
			return params[h.param]
		}
	}
	return parsed
}

// contentID strips the angle brackets. enmime's own Part.ContentID also
// URL-unescapes, which is right for cid: URLs but not for the header.
func contentID(v string) string {
	v = strings.TrimSpace(v)
	v = strings.TrimPrefix(v, "<")
	v = strings.TrimSuffix(v, ">")
	return strings.ToValidUTF8(strings.TrimSpace(v), "\uFFFD")
}

// mboxFromLine returns the length of a leading mbox "From " separator line.
func mboxFromLine(raw []byte) int {
	if !bytes.HasPrefix(raw, []byte("From ")) {
		return 0
	}
	rest := bytes.TrimLeft(raw[4:], " \t")
	if len(rest) > 0 && rest[0] == ':' {
		return 0 // "From : x", a header with a stray space
	}
	if i := bytes.IndexByte(raw, '\n'); i >= 0 {
		return i + 1
	}
	return len(raw)
}

// warnings collects human-readable problems, bounded so that a hostile
// message cannot make them larger than the message.
type warnings struct {
	list    []string
	dropped int
}

func (w *warnings) add(s string) {
	if len(s) > maxWarningLen {
		s = truncateRunes(s, maxWarningLen) + "…"
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	for _, x := range w.list {
		if x == s {
			return
		}
	}
	if len(w.list) >= maxWarnings {
		w.dropped++
		return
	}
	w.list = append(w.list, s)
}

func (w *warnings) addf(format string, args ...any) { w.add(fmt.Sprintf(format, args...)) }

func (w *warnings) finish() []string {
	if w.dropped > 0 {
		w.list = append(w.list, fmt.Sprintf("%d more warnings not shown", w.dropped))
		w.dropped = 0
	}
	return w.list
}

// truncateRunes cuts s to at most n bytes on a rune boundary.
func truncateRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// quoteShort shortens a sender-chosen value before it goes into a warning.
func quoteShort(s string) string {
	if len(s) > maxQuotedValue {
		return truncateRunes(s, maxQuotedValue) + "…"
	}
	return s
}
