package mailparse

import (
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/capturedev/capture/server/weburl"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

const (
	// maxLinks is how many links a message keeps (SPEC §8); past it the
	// scan only learns that there were more.
	maxLinks = 1000
	// maxAnchorRunes bounds the text kept for one anchor: an unclosed <a>
	// near the top of a long message would otherwise hold the whole body.
	maxAnchorRunes = 500
	// maxLabelBytes bounds an anchor's title, aria-label and image alt
	// text, read only to classify the link.
	maxLabelBytes = 200
	// maxLeadBytes is how much text before a link is read to classify it,
	// and maxGenericAnchor the longest anchor text that may say nothing
	// of its own ("click here").
	maxLeadBytes     = 120
	maxGenericAnchor = 40
	// linearDedup is how many links are checked by a linear scan before a
	// map takes over; ordinary messages stay below it.
	linearDedup = 32
)

// ExtractLinks returns the http and https links of a message with their
// kinds: the HTML body's hrefs (entities decoded, relative ones resolved
// against <base href> or dropped without one), then bare URLs in the text
// body, each written as a URI (weburl.Escape: a space or non-ASCII text
// percent-encoded, as a browser sends it), de-duplicated by URL in that
// order, each kept at its first occurrence. It keeps the first maxLinks
// and reports whether there were more.
func ExtractLinks(html, text *string) ([]Link, bool) {
	var ls linkSet
	scanAll(html, text, &ls, scanHTMLOptions{})
	return ls.links, ls.truncated
}

func scanAll(html, text *string, ls *linkSet, opt scanHTMLOptions) htmlScan {
	var res htmlScan
	if html != nil {
		res = scanHTML(*html, ls, opt)
	}
	if text != nil {
		scanText(*text, ls)
	}
	return res
}

// linkSet collects distinct links in order, up to maxLinks.
type linkSet struct {
	links     []Link
	seen      map[string]int // URL → index in links, once past linearDedup
	truncated bool           // a distinct link past maxLinks was seen
	kinds     linkKinds
}

func (s *linkSet) index(u string) int {
	if s.seen != nil {
		if i, ok := s.seen[u]; ok {
			return i
		}
		return -1
	}
	for i := range s.links {
		if s.links[i].URL == u {
			return i
		}
	}
	return -1
}

// done reports that nothing more can be added.
func (s *linkSet) done() bool { return s.truncated }

// add keeps u, classified from cue, unless it is already there, is not an
// absolute http(s) URL or the set is full; kind, when set, is not judged
// but given.
func (s *linkSet) add(u string, cue linkCue, kind string) {
	u = weburl.Escape(u)
	if s.index(u) >= 0 {
		return
	}
	p, origin, ok := httpOrigin(u)
	if !ok {
		return
	}
	if len(s.links) >= maxLinks {
		s.truncated = true
		return
	}
	if kind == "" {
		kind = s.kinds.kind(p, cue)
	}
	s.links = append(s.links, Link{URL: u, Text: cue.text, Origin: origin, Kind: kind})
	switch {
	case s.seen != nil:
		s.seen[u] = len(s.links) - 1
	case len(s.links) > linearDedup:
		s.seen = make(map[string]int, 2*len(s.links))
		for i, l := range s.links {
			s.seen[l.URL] = i
		}
	}
}

// addUnsubscribe adds the http(s) URLs of a List-Unsubscribe header
// (RFC 2369: comma-separated <URI>s); a URL the body already links to
// becomes an unsubscribe link.
func (s *linkSet) addUnsubscribe(header string) {
	for header != "" {
		i := strings.IndexByte(header, '<')
		if i < 0 {
			return
		}
		j := strings.IndexByte(header[i:], '>')
		if j < 0 {
			return
		}
		u := cleanURL(header[i+1 : i+j])
		header = header[i+j+1:]
		if !hasHTTPPrefix(u) {
			continue // mailto: and the like
		}
		u = weburl.Escape(u)
		if k := s.index(u); k >= 0 {
			s.links[k].Kind = KindUnsubscribe
			continue
		}
		s.add(u, linkCue{}, KindUnsubscribe)
	}
}

// httpOrigin validates u as an absolute http(s) URL with a host and returns
// it parsed and its origin as the URL states it (SPEC §8): scheme, host and
// port spelled as written, a stated default port kept, user info dropped.
// A client compares the origin with the application it tests, so it is not
// normalized behind the URL's back.
func httpOrigin(u string) (*url.URL, string, bool) {
	p, err := url.Parse(u)
	if err != nil || p.Opaque != "" || p.Hostname() == "" {
		return nil, "", false
	}
	if p.Scheme != "http" && p.Scheme != "https" { // url.Parse lowercases it
		return nil, "", false
	}
	return p, statedOrigin(u, p), true
}

// statedOrigin cuts scheme://host[:port] out of u itself, which url.Parse
// has read as p; it falls back to p's spelling should u not start the way
// p says it does.
func statedOrigin(u string, p *url.URL) string {
	authority, ok := "", hasPrefixFold(u, p.Scheme)
	if ok {
		authority, ok = strings.CutPrefix(u[len(p.Scheme):], "://")
	}
	if end := strings.IndexAny(authority, "/?#"); end >= 0 {
		authority = authority[:end]
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		authority = authority[at+1:]
	}
	if !ok || authority == "" {
		return p.Scheme + "://" + p.Host
	}
	return u[:len(p.Scheme)] + "://" + authority
}

// hasHTTPPrefix reports whether s starts with http:// or https://, in any case.
func hasHTTPPrefix(s string) bool {
	return hasPrefixFold(s, "http://") || hasPrefixFold(s, "https://")
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// hasScheme reports a URL that names its scheme (RFC 3986: a letter, then
// letters, digits, "+", "-" or ".", then ":"), such as mailto: or tel:.
func hasScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return true
		default:
			return false
		}
	}
	return false
}

// cleanURL applies the URL parser's preprocessing from the WHATWG URL
// standard: surrounding C0 controls and spaces go, tabs and newlines inside
// are ignored (HTML generators wrap long hrefs).
func cleanURL(s string) string {
	s = strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	if strings.ContainsAny(s, "\t\n\r") {
		s = strings.Map(func(r rune) rune {
			if r == '\t' || r == '\n' || r == '\r' {
				return -1
			}
			return r
		}, s)
	}
	return s
}

type scanHTMLOptions struct {
	text bool // collect the visible text for the snippet
	cids bool // collect cid: references to mark inline parts
}

type htmlScan struct {
	visible string
	// lines is the visible text for finding codes: a line per line break,
	// a blank line between blocks, table cells side by side.
	lines string
	cids  map[string]struct{}
}

// anchor is a link of the HTML body on its way to the link set.
type anchor struct {
	href           string
	text           *string
	label          string
	leadLo, leadHi int // the text before it, as offsets into the lines
}

// htmlScanner reads the HTML once for links, visible text, the lines codes
// are looked for in and cid: references. The tokenizer is enough: none of
// it needs a tree, and it is several times cheaper than html.Parse. What
// it keeps is bounded whatever the size of the document: past maxLinks
// links, only whether there were more is recorded.
type htmlScanner struct {
	z        *html.Tokenizer
	ls       *linkSet
	opt      scanHTMLOptions
	wantCIDs bool
	res      htmlScan

	open     bool // an <a> is open: its text is being read
	cur      anchor
	aText    collapser
	label    []byte
	deferred []anchor // <area>s met inside the open <a>: they come after it

	vis   collapser
	lines lineWriter

	// Relative links wait for a <base href>, which applies to the whole
	// document, links before it included; so once one is waiting, every
	// link after it waits too, to keep document order, until a <base> is
	// seen or the document ends. Waiting links are bounded like kept ones.
	baseSeen bool
	base     *url.URL
	holding  bool
	held     []anchor
	heldAbs  map[string]struct{}
	heldRel  map[string]struct{}
	relOver  bool // relative links were dropped for want of room
}

func scanHTML(doc string, ls *linkSet, opt scanHTMLOptions) htmlScan {
	s := &htmlScanner{
		z:        html.NewTokenizer(strings.NewReader(doc)),
		ls:       ls,
		opt:      opt,
		wantCIDs: opt.cids && containsFold(doc, "cid:"),
		aText:    collapser{max: maxAnchorRunes},
		vis:      collapser{max: snippetRunes},
		lines:    lineWriter{max: maxCodeText},
	}
	s.run()
	return s.res
}

func (s *htmlScanner) run() {
	z := s.z
	skipText := false
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			s.finish()
			return
		case html.TextToken:
			if skipText {
				// Raw text of script, style, title and the like: not shown.
				skipText = false
				continue
			}
			if !s.open && (!s.opt.text || s.vis.full()) && s.lines.full() {
				continue
			}
			t := z.Text()
			if s.open {
				writeCollapsed(&s.aText, t)
			}
			if s.opt.text {
				writeCollapsed(&s.vis, t)
			}
			s.lines.write(t)
		case html.StartTagToken, html.SelfClosingTagToken, html.EndTagToken:
			skipText = false
			name, hasAttr := z.TagName()
			a := atom.Lookup(name)
			if isBlock(a) {
				s.aText.space()
				s.vis.space()
				if a == atom.Td || a == atom.Th {
					s.lines.cell()
				} else {
					s.lines.block(a)
				}
			}
			if tt == html.EndTagToken {
				if a == atom.A {
					s.closeAnchor()
				}
				continue
			}
			switch a {
			case atom.Script, atom.Style, atom.Title, atom.Noscript,
				atom.Noembed, atom.Noframes, atom.Iframe:
				skipText = true
			case atom.A:
				s.closeAnchor() // <a> cannot nest; a new one ends the last
			}
			if hasAttr {
				s.tag(a)
			}
			if s.finished() {
				// Nothing more to learn from the rest of the document.
				s.finish()
				return
			}
		}
	}
}

func (s *htmlScanner) finish() {
	s.closeAnchor()
	s.flush()
	if s.opt.text {
		s.res.visible = s.vis.String()
	}
	s.res.lines = s.lines.String()
}

// finished reports that the rest of the document cannot change the result.
func (s *htmlScanner) finished() bool {
	return s.ls.done() && !s.holding && !s.open && !s.wantCIDs &&
		(!s.opt.text || s.vis.full()) && s.lines.full()
}

func (s *htmlScanner) tag(a atom.Atom) {
	switch a {
	case atom.A, atom.Area:
		if s.ls.done() && !s.holding {
			return
		}
		href, title, ok := anchorAttrs(s.z)
		if !ok {
			return
		}
		an := anchor{href: href, label: title}
		an.leadLo, an.leadHi = s.lines.lead()
		if a == atom.Area {
			if s.open {
				s.deferred = append(s.deferred, an)
			} else {
				s.emit(an)
			}
			return
		}
		s.cur, s.open = an, true
		s.aText.reset()
		s.label = append(s.label[:0], title...)
	case atom.Img:
		if s.open || s.wantCIDs {
			s.img()
		}
	case atom.Base:
		if !s.baseSeen {
			// The first <base href> applies to the whole document,
			// links before it included.
			if href, ok := attrValue(s.z, "href"); ok {
				s.setBase(href)
			}
		}
	default:
		if s.wantCIDs {
			s.res.addCIDs(s.z)
		}
	}
}

func (s *htmlScanner) closeAnchor() {
	if !s.open {
		return
	}
	s.open = false
	an := s.cur
	if t := s.aText.String(); t != "" {
		an.text = &t
	}
	if len(s.label) > 0 {
		an.label = truncateRunes(string(s.label), maxLabelBytes)
	}
	s.emit(an)
	for _, d := range s.deferred {
		s.emit(d)
	}
	s.deferred = s.deferred[:0]
}

// emit hands a finished anchor on, or holds it while a relative link
// waits for a <base>.
func (s *htmlScanner) emit(an anchor) {
	an.href = cleanURL(an.href)
	abs := hasHTTPPrefix(an.href)
	if !abs && (an.href == "" || hasScheme(an.href)) {
		return // mailto:, tel:, javascript:, or nothing
	}
	if !abs && !s.baseSeen {
		s.holding = true
	}
	if !s.holding {
		s.add(an, abs)
		return
	}
	if abs {
		if _, dup := s.heldAbs[an.href]; dup || s.ls.index(an.href) >= 0 {
			return
		}
		if len(s.ls.links)+len(s.heldAbs) >= maxLinks {
			s.ls.truncated = true
			return
		}
		if s.heldAbs == nil {
			s.heldAbs = make(map[string]struct{})
		}
		s.heldAbs[an.href] = struct{}{}
	} else {
		if _, dup := s.heldRel[an.href]; dup {
			return
		}
		if len(s.heldRel) >= maxLinks {
			s.relOver = true
			return
		}
		if s.heldRel == nil {
			s.heldRel = make(map[string]struct{})
		}
		s.heldRel[an.href] = struct{}{}
	}
	s.held = append(s.held, an)
}

func (s *htmlScanner) add(an anchor, abs bool) {
	u := an.href
	if !abs {
		if s.base == nil {
			return
		}
		ref, err := url.Parse(u)
		if err != nil {
			return
		}
		u = s.base.ResolveReference(ref).String()
	}
	cue := linkCue{text: an.text, label: an.label}
	if an.text == nil || len(*an.text) <= maxGenericAnchor || strings.Contains(*an.text, "://") {
		// Only an anchor that may say nothing ("click here", the URL
		// written out) needs the text before it.
		cue.lead = s.lines.slice(an.leadLo, an.leadHi)
	}
	// Kept as written rather than re-serialised, so it matches what the
	// sending application generated.
	s.ls.add(u, cue, "")
}

func (s *htmlScanner) setBase(href string) {
	s.baseSeen = true
	if b := cleanURL(href); hasHTTPPrefix(b) {
		if u, err := url.Parse(b); err == nil && u.Host != "" {
			s.base = u
		}
	}
	s.flush()
}

// flush hands on the links held for a <base>, now that it is known or
// that the document ended without one.
func (s *htmlScanner) flush() {
	for _, an := range s.held {
		s.add(an, hasHTTPPrefix(an.href))
	}
	if s.relOver && s.base != nil {
		s.ls.truncated = true
	}
	s.held, s.heldAbs, s.heldRel, s.holding, s.relOver = nil, nil, nil, false, false
}

// img reads an image's cid: reference and, inside an anchor, its alt
// text, which names an image button ("Verify email").
func (s *htmlScanner) img() {
	for more := true; more; {
		var key, val []byte
		key, val, more = s.z.TagAttr()
		switch string(key) {
		case "src", "background":
			if s.wantCIDs {
				s.res.addCID(val)
			}
		case "alt":
			if s.open && len(s.label) < maxLabelBytes {
				s.label = append(append(s.label, ' '), val...)
			}
		}
	}
}

func (res *htmlScan) addCIDs(z *html.Tokenizer) {
	for more := true; more; {
		var key, val []byte
		key, val, more = z.TagAttr()
		if k := string(key); k == "src" || k == "background" {
			res.addCID(val)
		}
	}
}

func (res *htmlScan) addCID(val []byte) {
	v := cleanURL(string(val))
	if !hasPrefixFold(v, "cid:") {
		return
	}
	id := v[4:]
	// cid: URLs are %-encoded (RFC 2392); the Content-ID header is not.
	if u, err := url.PathUnescape(id); err == nil {
		id = u
	}
	if res.cids == nil {
		res.cids = make(map[string]struct{})
	}
	res.cids[id] = struct{}{}
}

func attrValue(z *html.Tokenizer, name string) (string, bool) {
	for more := true; more; {
		var key, val []byte
		key, val, more = z.TagAttr()
		if string(key) == name {
			return string(val), true
		}
	}
	return "", false
}

// anchorAttrs reads an anchor's href and the words it carries besides its
// text (title, aria-label).
func anchorAttrs(z *html.Tokenizer) (href, label string, ok bool) {
	for more := true; more; {
		var key, val []byte
		key, val, more = z.TagAttr()
		switch string(key) {
		case "href":
			if !ok {
				href, ok = string(val), true
			}
		case "title", "aria-label":
			if len(label) < maxLabelBytes {
				label = strings.TrimSpace(label + " " + string(val))
			}
		}
	}
	return href, label, ok
}

// isBlock reports elements that separate words when rendered, so that
// "<td>a</td><td>b</td>" reads "a b" and "a<b>b</b>" reads "ab".
func isBlock(a atom.Atom) bool {
	switch a {
	case atom.Address, atom.Article, atom.Aside, atom.Blockquote, atom.Br,
		atom.Caption, atom.Center, atom.Dd, atom.Div, atom.Dl, atom.Dt,
		atom.Fieldset, atom.Figcaption, atom.Figure, atom.Footer, atom.Form,
		atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6, atom.Header,
		atom.Hr, atom.Li, atom.Main, atom.Nav, atom.Ol, atom.Option, atom.P,
		atom.Pre, atom.Section, atom.Table, atom.Tbody, atom.Td, atom.Tfoot,
		atom.Th, atom.Thead, atom.Tr, atom.Ul, atom.Body, atom.Head, atom.Html:
		return true
	}
	return false
}

// containsFold reports whether s contains sub, ignoring ASCII case; sub
// must be lowercase and start with a letter.
func containsFold(s, sub string) bool {
	first, upper := sub[0], sub[0]-('a'-'A')
	for i := 0; i+len(sub) <= len(s); i++ {
		if c := s[i]; (c == first || c == upper) && strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// scanText finds bare http and https URLs in plain text. A URL ends at
// whitespace or at a character that cannot appear in one unescaped (< > "
// `); trailing punctuation that belongs to the sentence is then trimmed.
func scanText(text string, ls *linkSet) {
	i := 0
	for i < len(text) && !ls.done() {
		k := strings.Index(text[i:], "://")
		if k < 0 {
			return
		}
		k += i
		i = k + 3
		start := -1
		switch {
		case k >= 5 && strings.EqualFold(text[k-5:k], "https"):
			start = k - 5
		case k >= 4 && strings.EqualFold(text[k-4:k], "http"):
			start = k - 4
		}
		if start < 0 || (start > 0 && isASCIIAlnum(text[start-1])) {
			continue // "xhttp://" or another scheme
		}
		end := urlEnd(text, k+3)
		i = max(end, i)
		if u := trimURLTail(text[start:end]); len(u) > k+3-start {
			ls.add(u, linkCue{lead: textLead(text, start)}, "")
		}
	}
}

// textLead is the text before a link of a text body that says what the
// link is for: the line up to it, or the line before when the link starts
// its line ("Reset your password:\nhttps://…").
func textLead(text string, at int) string {
	lineStart := strings.LastIndexByte(text[:at], '\n') + 1
	lead := text[lineStart:at]
	for strings.TrimSpace(lead) == "" && lineStart > 0 {
		end := lineStart - 1
		lineStart = strings.LastIndexByte(text[:end], '\n') + 1
		lead = text[lineStart:end]
		if at-lineStart > 4*maxLeadBytes {
			break // blank lines all the way up: nothing to say
		}
	}
	return tailRunes(strings.TrimSpace(lead), maxLeadBytes)
}

// tailRunes keeps the last n bytes of s at most, from a rune boundary.
func tailRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

func urlEnd(s string, i int) int {
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if c <= ' ' || c == 0x7f || c == '<' || c == '>' || c == '"' || c == '`' {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) {
			return i
		}
		i += size
	}
	return i
}

// trimURLTail drops sentence punctuation after a URL. A closing bracket is
// kept when it closes one opened inside the URL, as in Wikipedia links.
func trimURLTail(u string) string {
	var open, closed [3]int // (), [], {}; counted once, as u may be long
	counted := false
	for len(u) > 0 {
		r, size := utf8.DecodeLastRuneInString(u)
		k := strings.IndexRune(")]}", r)
		switch {
		case k >= 0:
			if !counted {
				for i := 0; i < len(u); i++ {
					if j := strings.IndexByte("([{", u[i]); j >= 0 {
						open[j]++
					} else if j := strings.IndexByte(")]}", u[i]); j >= 0 {
						closed[j]++
					}
				}
				counted = true
			}
			if open[k] >= closed[k] {
				return u
			}
			closed[k]--
		case strings.ContainsRune(".,;:!?'*\"…»«”“’‘。、", r):
		default:
			return u
		}
		u = u[:len(u)-size]
	}
	return u
}

func isASCIIAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// collapser accumulates text with runs of whitespace collapsed to one space,
// invisible format characters dropped, up to max runes (0: no limit). Invalid
// UTF-8 becomes U+FFFD, so the result is always valid.
type collapser struct {
	b       []byte
	runes   int
	max     int
	pending bool
	// joiner is a zero-width joiner or non-joiner seen right after a
	// visible character: it is kept only if another visible character
	// follows, as in an emoji sequence (👨‍👩‍👧) or a Persian word, and
	// dropped where it pads a preview next to spaces.
	joiner rune
}

func (c *collapser) reset() {
	c.b, c.runes, c.pending, c.joiner = c.b[:0], 0, false, 0
}

func isJoiner(r rune) bool { return r == '\u200d' || r == '\u200c' }

// join remembers a joiner that follows a visible character.
func (c *collapser) join(r rune) {
	if len(c.b) > 0 && !c.pending && c.joiner == 0 {
		c.joiner = r
		return
	}
	c.joiner = 0
}

func (c *collapser) full() bool { return c.max > 0 && c.runes >= c.max }

func (c *collapser) space() {
	c.joiner = 0
	if len(c.b) > 0 {
		c.pending = true
	}
}

func (c *collapser) rune(r rune) {
	if c.full() {
		return
	}
	if c.pending {
		c.b = append(c.b, ' ')
		c.pending = false
		if c.runes++; c.full() {
			return
		}
	}
	if c.joiner != 0 {
		// Only with room for what it joins: a snippet never ends in one.
		if c.runes+2 > c.max && c.max > 0 {
			c.joiner, c.runes = 0, c.max
			return
		}
		c.b = utf8.AppendRune(c.b, c.joiner)
		c.joiner = 0
		c.runes++
	}
	c.b = utf8.AppendRune(c.b, r)
	c.runes++
}

func (c *collapser) String() string {
	b := c.b
	if n := len(b); n > 0 && b[n-1] == ' ' {
		b = b[:n-1]
	}
	return string(b)
}

func writeCollapsed[T string | []byte](c *collapser, s T) {
	for i := 0; i < len(s) && !c.full(); {
		b := s[i]
		if b < utf8.RuneSelf {
			i++
			switch b {
			case ' ', '\t', '\n', '\r', '\f', '\v':
				c.space()
			default:
				if b >= ' ' && b != 0x7f {
					c.rune(rune(b))
				}
			}
			continue
		}
		var buf [utf8.UTFMax]byte
		r, size := utf8.DecodeRune(buf[:copy(buf[:], s[i:])])
		i += size
		switch {
		case unicode.IsSpace(r):
			c.space()
		case isJoiner(r):
			c.join(r)
		case invisible(r):
		default:
			c.rune(r)
		}
	}
}

// lineWriter keeps the visible text of an HTML body as a reader sees its
// lines, up to max bytes: runs of white space become one space, a <br>
// ends a line, a block ends a paragraph (a blank line), table cells sit
// side by side on one line.
type lineWriter struct {
	b         []byte
	max       int
	space     bool // a space is due before the next character
	breaks    int  // line breaks due before the next character: 0, 1 or 2
	paraStart int  // offset of the current paragraph
}

func (w *lineWriter) full() bool { return len(w.b) >= w.max }

func (w *lineWriter) write(t []byte) {
	for i := 0; i < len(t) && !w.full(); {
		r, size := rune(t[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRune(t[i:])
		}
		i += size
		switch {
		case r == ' ' || r == '\n' || r == '\t' || r == '\r' || r >= utf8.RuneSelf && unicode.IsSpace(r):
			w.space = len(w.b) > 0
		case invisible(r):
		default:
			if w.breaks > 0 {
				w.b = append(w.b, "\n\n"[:w.breaks]...)
				if w.breaks == 2 {
					w.paraStart = len(w.b)
				}
			} else if w.space {
				w.b = append(w.b, ' ')
			}
			w.breaks, w.space = 0, false
			w.b = utf8.AppendRune(w.b, r)
		}
	}
}

// block ends a line (<br>) or a paragraph (any other block element).
func (w *lineWriter) block(a atom.Atom) {
	if len(w.b) == 0 {
		return
	}
	if a == atom.Br {
		w.breaks = max(w.breaks, 1)
	} else {
		w.breaks = 2
	}
}

// cell separates table cells by a space.
func (w *lineWriter) cell() { w.space = len(w.b) > 0 }

// lead returns the span of the text written so far in the current
// paragraph, at most maxLeadBytes of it.
func (w *lineWriter) lead() (lo, hi int) {
	hi = len(w.b)
	if w.breaks == 2 {
		return hi, hi
	}
	lo = max(w.paraStart, hi-maxLeadBytes)
	for lo < hi && !utf8.RuneStart(w.b[lo]) {
		lo++
	}
	return lo, hi
}

func (w *lineWriter) slice(lo, hi int) string {
	if lo >= hi || hi > len(w.b) {
		return ""
	}
	return string(w.b[lo:hi])
}

func (w *lineWriter) String() string { return string(w.b) }

// invisible reports characters that render as nothing; marketing mail pads
// its preview text with them.
func invisible(r rune) bool {
	return r == '\u034f' || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Cc, r)
}
