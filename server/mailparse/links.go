package mailparse

import (
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

const (
	// maxAnchorRunes bounds the text kept for one anchor: an unclosed <a>
	// near the top of a long message would otherwise hold the whole body.
	maxAnchorRunes = 500
	// linearDedup is how many links are checked by a linear scan before a
	// map takes over; ordinary messages stay below it.
	linearDedup = 32
)

// ExtractLinks returns the http and https links of a message: the HTML
// body's hrefs (entities decoded, relative ones resolved against <base href>
// or dropped without one), then bare URLs in the text body, de-duplicated by
// URL in that order, each kept at its first occurrence.
func ExtractLinks(html, text *string) []Link {
	var ls linkSet
	scanAll(html, text, &ls, scanHTMLOptions{})
	return ls.links
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

type linkSet struct {
	links []Link
	seen  map[string]struct{}
}

func (s *linkSet) add(u string, text *string) {
	if s.seen != nil {
		if _, ok := s.seen[u]; ok {
			return
		}
	} else {
		for i := range s.links {
			if s.links[i].URL == u {
				return
			}
		}
	}
	origin, ok := httpOrigin(u)
	if !ok {
		return
	}
	s.links = append(s.links, Link{URL: u, Text: text, Origin: origin})
	switch {
	case s.seen != nil:
		s.seen[u] = struct{}{}
	case len(s.links) > linearDedup:
		s.seen = make(map[string]struct{}, 2*len(s.links))
		for _, l := range s.links {
			s.seen[l.URL] = struct{}{}
		}
	}
}

// httpOrigin validates u as an absolute http(s) URL with a host and returns
// its origin with the port as written (a stated default port is kept).
func httpOrigin(u string) (string, bool) {
	p, err := url.Parse(u)
	if err != nil || p.Opaque != "" || p.Hostname() == "" {
		return "", false
	}
	scheme := strings.ToLower(p.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", false
	}
	return scheme + "://" + strings.ToLower(p.Host), true
}

// hasHTTPPrefix reports whether s starts with http:// or https://, in any case.
func hasHTTPPrefix(s string) bool {
	return hasPrefixFold(s, "http://") || hasPrefixFold(s, "https://")
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
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
	cids    map[string]struct{}
}

type anchor struct {
	href string
	text *string
}

// scanHTML tokenizes the HTML once for links, visible text and cid:
// references. The tokenizer is enough: links and text need no tree, and it
// is several times cheaper than html.Parse.
func scanHTML(doc string, ls *linkSet, opt scanHTMLOptions) htmlScan {
	var (
		res      htmlScan
		anchors  []anchor
		base     string
		haveBase bool
		open     = -1 // index in anchors of the <a> whose text is being read
		aText    = collapser{max: maxAnchorRunes}
		vis      = collapser{max: snippetRunes}
		skipText bool
	)
	wantCIDs := opt.cids && containsFold(doc, "cid:")
	closeAnchor := func() {
		if open >= 0 {
			if s := aText.String(); s != "" {
				anchors[open].text = &s
			}
			open = -1
		}
	}

	z := html.NewTokenizer(strings.NewReader(doc))
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			closeAnchor()
			return res.finish(anchors, base, haveBase, &vis, opt.text, ls)
		case html.TextToken:
			if skipText {
				// Raw text of script, style, title and the like: not shown.
				skipText = false
				continue
			}
			if open < 0 && (!opt.text || vis.full()) {
				continue
			}
			t := z.Text()
			if open >= 0 {
				writeCollapsed(&aText, t)
			}
			if opt.text {
				writeCollapsed(&vis, t)
			}
		case html.StartTagToken, html.SelfClosingTagToken, html.EndTagToken:
			skipText = false
			name, hasAttr := z.TagName()
			a := atom.Lookup(name)
			if isBlock(a) {
				aText.space()
				vis.space()
			}
			if tt == html.EndTagToken {
				if a == atom.A {
					closeAnchor()
				}
				continue
			}
			switch a {
			case atom.Script, atom.Style, atom.Title, atom.Noscript,
				atom.Noembed, atom.Noframes, atom.Iframe:
				skipText = true
			case atom.A:
				closeAnchor() // <a> cannot nest; a new one ends the last
			}
			if !hasAttr {
				continue
			}
			switch a {
			case atom.A, atom.Area:
				if href, ok := attrValue(z, "href"); ok {
					anchors = append(anchors, anchor{href: href})
					if a == atom.A {
						open = len(anchors) - 1
						aText.reset()
					}
				}
			case atom.Base:
				if !haveBase {
					// The first <base href> applies to the whole document,
					// links before it included.
					base, haveBase = attrValue(z, "href")
				}
			default:
				if wantCIDs {
					res.addCIDs(z)
				}
			}
		}
	}
}

func (res htmlScan) finish(anchors []anchor, base string, haveBase bool, vis *collapser, text bool, ls *linkSet) htmlScan {
	if text {
		res.visible = vis.String()
	}
	var baseURL *url.URL
	if haveBase {
		if b := cleanURL(base); hasHTTPPrefix(b) {
			if u, err := url.Parse(b); err == nil && u.Host != "" {
				baseURL = u
			}
		}
	}
	for _, an := range anchors {
		href := cleanURL(an.href)
		if hasHTTPPrefix(href) {
			// Kept as written rather than re-serialised, so it matches
			// what the sending application generated.
			ls.add(href, an.text)
			continue
		}
		if baseURL == nil || href == "" {
			continue
		}
		ref, err := url.Parse(href)
		if err != nil || (ref.Scheme != "" && !strings.EqualFold(ref.Scheme, "http") && !strings.EqualFold(ref.Scheme, "https")) {
			continue
		}
		ls.add(baseURL.ResolveReference(ref).String(), an.text)
	}
	return res
}

func (res *htmlScan) addCIDs(z *html.Tokenizer) {
	for more := true; more; {
		var key, val []byte
		key, val, more = z.TagAttr()
		if k := string(key); k != "src" && k != "background" {
			continue
		}
		v := cleanURL(string(val))
		if !hasPrefixFold(v, "cid:") {
			continue
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
	for i < len(text) {
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
			ls.add(u, nil)
		}
	}
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
}

func (c *collapser) reset() {
	c.b, c.runes, c.pending = c.b[:0], 0, false
}

func (c *collapser) full() bool { return c.max > 0 && c.runes >= c.max }

func (c *collapser) space() {
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
		case invisible(r):
		default:
			c.rune(r)
		}
	}
}

// invisible reports characters that render as nothing; marketing mail pads
// its preview text with them.
func invisible(r rune) bool {
	return r == '\u034f' || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Cc, r)
}
