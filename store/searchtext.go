package store

import (
	"bytes"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/text/unicode/norm"
	"modernc.org/sqlite"
)

// The text side of search: what a capture's searchable text is, and how
// text becomes tokens. Indexing, the migration that indexes old rows, the
// query parser and the check of candidate rows all go through here, so
// they can never disagree on what a word is.

const (
	// maxSearchField bounds the text of one field that search reads (a
	// body, a header value): the first MiB of a huge body is searchable,
	// and tokenizing stays bounded in time and memory.
	maxSearchField = 1 << 20
	// maxTokenBytes bounds a token; the rest of a longer one (a base64
	// line, a signature) is not indexed.
	maxTokenBytes = 128
	// Tokens of vocabMinRunes to vocabMaxRunes characters, and the first
	// vocabMaxRunes of longer ones, go into the vocabulary that finds a
	// word inside tokens. Shorter ones cannot hold a three-character
	// query; past 32 characters tokens are hashes, signatures and base64,
	// whose insides nobody types, and each character costs a trigram.
	vocabMinRunes = 3
	vocabMaxRunes = 32
)

// tokenBuf holds the token eachToken is building.
type tokenBuf [maxTokenBytes + utf8.UTFMax]byte

// eachToken calls fn with each token of s, folded: lower case, accents and
// other combining marks removed, compatibility forms (ligatures, full-width
// letters) decomposed. A token is a run of letters, digits and spacing
// marks; everything else separates tokens. fn must not keep tok, which is
// built in buf: the caller's, because a buffer of eachToken's own would be
// allocated on every call (fn may keep what it is given, for all the
// compiler knows). s is text or bytes, so that a body is read where it
// lies rather than copied into a string first.
func eachToken[T string | []byte](s T, buf *tokenBuf, fn func(tok []byte, hash uint64)) {
	tok := buf[:0]
	// hash is a cheap running hash of tok (djb2), which fn may use to
	// find repeats; mixHash spreads it.
	var hash uint64
	end := func() {
		fn(tok, mixHash(hash))
		tok, hash = tok[:0], 0
	}
	for i := 0; i < len(s); {
		// ASCII, nearly all of most text, goes through a table.
		if c := s[i]; c < utf8.RuneSelf {
			i++
			if f := asciiFold[c]; f != 0 {
				if len(tok) < maxTokenBytes {
					tok = append(tok, f)
					hash = hash*33 + uint64(f)
				}
			} else if len(tok) > 0 {
				end()
			}
			continue
		}
		r, n := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		foldRune(r, string(s[i:i+n]), func(fr rune, word bool) {
			if word {
				tok, hash = appendFolded(tok, hash, fr)
			} else if len(tok) > 0 {
				end()
			}
		})
		i += n
	}
	if len(tok) > 0 {
		end()
	}
}

// foldRune is how search reads r, a character outside ASCII spelled c:
// fn gets each character of its folded form in lower case, with whether
// it belongs to a word (a letter, digit or spacing mark) or separates
// words. Compatibility forms are decomposed ("½" is "1⁄2", NBSP a space)
// and combining marks dropped, so "é" in NFC and in NFD are both "e" and
// "İ" is "i"; letterFold spells the rest.
func foldRune(r rune, c string, fn func(r rune, word bool)) {
	if f, ok := letterFold[r]; ok {
		for _, fr := range f {
			fn(fr, true)
		}
		return
	}
	d := norm.NFKD.PropertiesString(c).Decomposition()
	if d == nil {
		foldPart(r, fn)
		return
	}
	for _, dr := range string(d) {
		foldPart(dr, fn)
	}
}

// foldPart is foldRune for a character that does not decompose further.
func foldPart(r rune, fn func(r rune, word bool)) {
	switch {
	case unicode.Is(unicode.Mn, r):
		// A combining mark joins its word without being part of it.
	case isTokenRune(r):
		fn(unicode.ToLower(r), true)
	default:
		fn(r, false)
	}
}

// foldText is s folded as search folds words (foldRune), everything that
// separates words kept as it is: what the message filters compare. It
// keeps punctuation, unlike normalizeText, because a filter is a
// substring ("@example.com", "Re: [ci]"), not a list of words.
func foldText(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if f := asciiFold[c]; f != 0 {
				c = f
			}
			b.WriteByte(c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		foldRune(r, s[i:i+n], func(fr rune, _ bool) { b.WriteRune(fr) })
		i += n
	}
	return b.String()
}

// letterFold spells the letters that readers take for a base letter with
// an accent, but that Unicode does not decompose into one (a stroke, a
// ligature): "Łódź" is found by "lodz", "Søren" by "soren", "Straße" by
// "strasse".
var letterFold = map[rune]string{
	'ł': "l", 'Ł': "l", 'ø': "o", 'Ø': "o", 'đ': "d", 'Đ': "d", 'ð': "d", 'Ð': "d",
	'ħ': "h", 'Ħ': "h", 'ŧ': "t", 'Ŧ': "t", 'ı': "i", 'ß': "ss", 'ẞ': "ss",
	'æ': "ae", 'Æ': "ae", 'œ': "oe", 'Œ': "oe", 'þ': "th", 'Þ': "th",
}

// mixHash spreads the bits of a djb2 hash over the whole word.
func mixHash(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	return h ^ h>>33
}

// asciiFold maps ASCII letters and digits to their folded byte, and
// everything else to 0.
var asciiFold = func() (t [utf8.RuneSelf]byte) {
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c
	}
	for c := byte('a'); c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = c, c
	}
	return t
}()

// appendFolded adds r, folded already, to the token and its hash, unless
// the token is already maxTokenBytes long: the rest of a longer token is
// not indexed.
func appendFolded(tok []byte, hash uint64, r rune) ([]byte, uint64) {
	if len(tok)+utf8.RuneLen(r) > maxTokenBytes {
		return tok, hash
	}
	n := len(tok)
	tok = utf8.AppendRune(tok, r)
	for _, c := range tok[n:] {
		hash = hash*33 + uint64(c)
	}
	return tok, hash
}

func isTokenRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.In(r, unicode.Mc, unicode.Me)
}

// normalizeText is s as search compares it: its tokens joined by single
// spaces. A query word matches a field when the word's normalized text is
// a substring of the field's.
func normalizeText(s string) string {
	var b strings.Builder
	eachToken(s, new(tokenBuf), func(tok []byte, _ uint64) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.Write(tok)
	})
	return b.String()
}

// searchTokens is what a capture adds to the index: the distinct tokens of
// its fields, separated by spaces. The index keeps no positions, so each
// token is written once however often it occurs.
func searchTokens(fields []string) string {
	b := docBuilders.Get().(*docBuilder)
	defer b.release()
	for _, f := range fields {
		eachToken(f, &b.tok, b.add)
	}
	return string(b.out)
}

// requestTokens is searchTokens(requestSearchFields(…)), with the body
// tokenized where it lies: copying it into a string was a tenth of what
// capturing a webhook allocated.
func requestTokens(path, query string, headers []Header, body []byte) string {
	b := docBuilders.Get().(*docBuilder)
	defer b.release()
	for _, f := range requestHeadFields(path, query, headers) {
		eachToken(f, &b.tok, b.add)
	}
	if body, ok := searchableBody(body); ok {
		eachToken(body, &b.tok, b.add)
		if e := bodyEscapesOf(headers); decodesWords(e, body) {
			d, _ := decodeBody(e, body, b.decoded[:0])
			eachToken(d, &b.tok, b.add)
			b.decoded = d
		}
	}
	return string(b.out)
}

// docBuilders keep the builders' buffers from one capture to the next:
// building them anew was a third of what preparing a webhook allocated.
var docBuilders = sync.Pool{New: func() any { return new(docBuilder) }}

// maxPooledTokens bounds the distinct tokens of a builder put back in the
// pool, so one large capture does not pin its buffers; maxPooledDecoded,
// the decoded body it keeps room for.
const (
	maxPooledTokens  = 4096
	maxPooledDecoded = 64 << 10
)

// release empties b and puts it back in the pool.
func (b *docBuilder) release() {
	if len(b.spans) > maxPooledTokens {
		return
	}
	b.out, b.spans, b.hashes = b.out[:0], b.spans[:0], b.hashes[:0]
	if cap(b.decoded) > maxPooledDecoded {
		b.decoded = nil
	}
	clear(b.slots)
	docBuilders.Put(b)
}

// docBuilder collects distinct tokens. It finds repeats with a hash table
// of its own over the tokens it has written: a Go map keyed by string
// cost more than the rest of tokenizing.
type docBuilder struct {
	out     []byte     // the distinct tokens, separated by spaces
	spans   [][2]int32 // where each token is in out
	hashes  []uint64   // each token's hash
	slots   []int32    // open addressing: 0 empty, else index+1 into spans
	tok     tokenBuf   // the token being read
	decoded []byte     // the body decoded (decodeBody)
}

func (b *docBuilder) add(tok []byte, h uint64) {
	if 2*len(b.spans) >= len(b.slots) {
		b.grow()
	}
	mask := len(b.slots) - 1
	i := int(h) & mask
	for ; b.slots[i] != 0; i = (i + 1) & mask {
		j := b.slots[i] - 1
		if b.hashes[j] == h && string(b.out[b.spans[j][0]:b.spans[j][1]]) == string(tok) {
			return
		}
	}
	if len(b.out) > 0 {
		b.out = append(b.out, ' ')
	}
	b.spans = append(b.spans, [2]int32{int32(len(b.out)), int32(len(b.out) + len(tok))})
	b.out = append(b.out, tok...)
	b.hashes = append(b.hashes, h)
	b.slots[i] = int32(len(b.spans))
}

func (b *docBuilder) grow() {
	b.slots = make([]int32, max(64, 2*len(b.slots)))
	mask := len(b.slots) - 1
	for j, h := range b.hashes {
		i := int(h) & mask
		for b.slots[i] != 0 {
			i = (i + 1) & mask
		}
		b.slots[i] = int32(j + 1)
	}
}

// vocabularyTerm is what the vocabulary keeps of an indexed token: the
// token, or the start of a long one; nothing of a short one.
func vocabularyTerm(tok string) (string, bool) {
	switch n := utf8.RuneCountInString(tok); {
	case n < vocabMinRunes:
		return "", false
	case n > vocabMaxRunes:
		return runePrefix(tok, vocabMaxRunes), true
	}
	return tok, true
}

// runePrefix is the first n characters of s.
func runePrefix(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// clip cuts s to maxSearchField bytes at a character boundary.
func clip(s string) string {
	if len(s) <= maxSearchField {
		return s
	}
	i := maxSearchField
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// clipBytes is clip for bytes; a character the cut splits is dropped.
func clipBytes(b []byte) []byte {
	if len(b) <= maxSearchField {
		return b
	}
	b = b[:maxSearchField]
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				b = b[:i]
			}
			break
		}
	}
	return b
}

// messageSearchFields is the text search reads from a message: subject,
// From, To and Cc names and addresses, the text body, the text of the HTML
// body and the attachments' file names.
func messageSearchFields(subject string, from *Address, to, cc []Address, text, htmlBody *string, attachments []string) []string {
	fields := []string{subject}
	if from != nil {
		fields = append(fields, from.Name, from.Address)
	}
	for _, a := range to {
		fields = append(fields, a.Name, a.Address)
	}
	for _, a := range cc {
		fields = append(fields, a.Name, a.Address)
	}
	if text != nil {
		fields = append(fields, clip(*text))
	}
	if htmlBody != nil {
		fields = append(fields, htmlText(clip(*htmlBody)))
	}
	return append(fields, attachments...)
}

// requestSearchFields is the text search reads from a request: path and
// query (also percent-decoded), header values, and the body when it is
// UTF-8 (a form or JSON body also decoded: decodeBody).
func requestSearchFields(path, query string, headers []Header, body []byte) []string {
	fields := requestHeadFields(path, query, headers)
	if body, ok := searchableBody(body); ok {
		fields = append(fields, string(body))
		if e := bodyEscapesOf(headers); decodesWords(e, body) {
			d, _ := decodeBody(e, body, nil)
			fields = append(fields, string(d))
		}
	}
	return fields
}

// requestHeadFields are a request's search fields but its body.
func requestHeadFields(path, query string, headers []Header) []string {
	fields := []string{path}
	if p, err := url.PathUnescape(path); err == nil && p != path {
		fields = append(fields, p)
	}
	if query != "" {
		fields = append(fields, query)
		if q, err := url.QueryUnescape(query); err == nil && q != query {
			fields = append(fields, q)
		}
	}
	for _, h := range headers {
		for _, v := range h.Values {
			fields = append(fields, clip(v))
		}
	}
	return fields
}

// searchableBody is the part of a body search reads, unless the body is
// not UTF-8 text.
func searchableBody(body []byte) ([]byte, bool) {
	body = clipBytes(body)
	return body, utf8.Valid(body)
}

// bodyEscapes is how a request body escapes its text, by its media type.
type bodyEscapes int

const (
	noEscapes   bodyEscapes = iota
	formEscapes             // application/x-www-form-urlencoded: %XX and + for a space
	jsonEscapes             // application/json and +json types: \uXXXX, \n, \" …
)

// bodyEscapesOf reads the escapes of a body from its request's first
// Content-Type.
func bodyEscapesOf(headers []Header) bodyEscapes {
	for _, h := range headers {
		if !strings.EqualFold(h.Name, "Content-Type") || len(h.Values) == 0 {
			continue
		}
		mt, _, _ := strings.Cut(h.Values[0], ";")
		mt = strings.TrimSpace(mt)
		switch {
		case strings.EqualFold(mt, "application/x-www-form-urlencoded"):
			return formEscapes
		case strings.EqualFold(mt, "application/json"),
			len(mt) > len("+json") && strings.EqualFold(mt[len(mt)-len("+json"):], "+json"):
			return jsonEscapes
		}
		return noEscapes
	}
	return noEscapes
}

// decodeBody appends to dst body, UTF-8 text with the escapes e, with its
// escapes decoded, so that a form's buyer%40example.com is found as
// buyer@example.com and a JSON body's Zo\u00eb as Zoë. It reports false,
// having done nothing, when the body has no escape to decode. An escape
// that does not decode (a % without two hex digits, bytes that are not
// UTF-8, a lone surrogate, a \ before anything else) is kept as it is, so
// the result is UTF-8 text too, and a body that is not a valid form or
// JSON is read all the same.
func decodeBody(e bodyEscapes, body, dst []byte) ([]byte, bool) {
	switch e {
	case formEscapes:
		if bytes.IndexAny(body, "%+") < 0 {
			return nil, false
		}
		return appendFormDecoded(dst, body), true
	case jsonEscapes:
		if bytes.IndexByte(body, '\\') < 0 {
			return nil, false
		}
		return appendJSONDecoded(dst, body), true
	}
	return nil, false
}

// decodesWords reports whether decoding body's escapes e (decodeBody)
// can change its words, so that a second pass over it is worth its cost
// on every capture: a form's %XX escape, a JSON body's \uXXXX, or its \n,
// \t, \r, \b, \f, whose letter otherwise reads as the start of the next
// word. A + read as a space, and \", \\ and \/, decode to what separates
// words already.
func decodesWords(e bodyEscapes, body []byte) bool {
	switch e {
	case formEscapes:
		return bytes.IndexByte(body, '%') >= 0
	case jsonEscapes:
		return hasLetterEscape(body)
	}
	return false
}

// hasLetterEscape reports whether a JSON body holds an escape that
// decodes to a letter or splits a word (decodesWords).
func hasLetterEscape(body []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(body[i:], '\\')
		if j < 0 || i+j+1 >= len(body) {
			return false
		}
		i += j + 1
		switch body[i] {
		case 'u', 'n', 't', 'r', 'b', 'f':
			return true
		}
		i++ // past the escaped character, a backslash included
	}
}

// appendFormDecoded appends s with + read as a space and each run of %XX
// escapes decoded, unless the run's bytes are not UTF-8 (a form in
// Latin-1): then the run is kept as sent.
func appendFormDecoded(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '+':
			dst = append(dst, ' ')
			i++
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			start, n := i, len(dst)
			for i+2 < len(s) && s[i] == '%' && isHex(s[i+1]) && isHex(s[i+2]) {
				dst = append(dst, unhex(s[i+1])<<4|unhex(s[i+2]))
				i += 3
			}
			if !utf8.Valid(dst[n:]) {
				dst = append(dst[:n], s[start:i]...)
			}
		default:
			dst = append(dst, c)
			i++
		}
	}
	return dst
}

// appendJSONDecoded appends s with the escapes of JSON strings decoded: a
// pair of \u escapes that spell a character outside the BMP is that
// character.
func appendJSONDecoded(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			dst = append(dst, c)
			i++
			continue
		}
		switch e := s[i+1]; e {
		case '"', '\\', '/':
			dst = append(dst, e)
			i += 2
		case 'b', 'f', 'n', 'r', 't':
			dst = append(dst, jsonControl[e])
			i += 2
		case 'u':
			r, ok := hex4(s[i+2:])
			switch {
			case !ok:
				dst = append(dst, c)
				i++
			case utf16.IsSurrogate(r):
				r2, ok := rune(0), false
				if len(s) >= i+12 && s[i+6] == '\\' && s[i+7] == 'u' {
					r2, ok = hex4(s[i+8:])
				}
				if d := utf16.DecodeRune(r, r2); ok && d != utf8.RuneError {
					dst = utf8.AppendRune(dst, d)
					i += 12
				} else {
					dst = append(dst, s[i:i+6]...) // a lone surrogate: kept
					i += 6
				}
			default:
				dst = utf8.AppendRune(dst, r)
				i += 6
			}
		default:
			dst = append(dst, c)
			i++
		}
	}
	return dst
}

// jsonControl are the characters JSON's one-letter escapes spell.
var jsonControl = [...]byte{'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// hex4 reads the four hex digits that start s.
func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		if !isHex(c) {
			return 0, false
		}
		r = r<<4 | rune(unhex(c))
	}
	return r, true
}

// htmlText is the text a reader of the HTML sees: text nodes with entities
// decoded, without scripts, styles or the title, with block boundaries kept
// as spaces so that words in adjacent cells do not run together.
func htmlText(s string) string {
	z := html.NewTokenizer(strings.NewReader(s))
	var b strings.Builder
	hidden := 0 // depth inside elements whose text is not shown
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return b.String()
		case html.TextToken:
			if hidden == 0 {
				b.Write(z.Text())
			}
		case html.StartTagToken, html.EndTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			a := atom.Lookup(name)
			switch a {
			case atom.Script, atom.Style, atom.Title, atom.Template:
				if tt == html.StartTagToken {
					hidden++
				} else if tt == html.EndTagToken && hidden > 0 {
					hidden--
				}
			}
			if !inlineElements[a] {
				b.WriteByte(' ')
			}
		}
	}
}

// inlineElements do not separate words: "<b>Con</b>firm" is one word.
var inlineElements = map[atom.Atom]bool{
	atom.A: true, atom.Abbr: true, atom.B: true, atom.Bdi: true, atom.Bdo: true, atom.Cite: true,
	atom.Code: true, atom.Data: true, atom.Dfn: true, atom.Em: true, atom.Font: true, atom.I: true,
	atom.Kbd: true, atom.Mark: true, atom.Q: true, atom.S: true, atom.Samp: true, atom.Small: true,
	atom.Span: true, atom.Strike: true, atom.Strong: true, atom.Sub: true, atom.Sup: true,
	atom.Time: true, atom.Tt: true, atom.U: true, atom.Var: true, atom.Wbr: true,
}

// SQL functions: the documents Go writes, for the migration, and the match
// of staged index rows, for searches.
func init() {
	// search_staged_match(tokens, stagedQuery)
	registerSQLFunction("search_staged_match", 2, func(args []driver.Value) (driver.Value, error) {
		tokens, query := sqlString(args[0]), sqlString(args[1])
		if tokens != nil && query != nil && stagedMatch(*tokens, *query) {
			return int64(1), nil
		}
		return int64(0), nil
	})
	// search_message_tokens(subject, from_name, from_address, recipients,
	// text_body, html_body, attachment names as a JSON array)
	registerSQLFunction("search_message_tokens", 7, func(args []driver.Value) (driver.Value, error) {
		var rcpts storedRecipients
		if err := json.Unmarshal(sqlBytes(args[3]), &rcpts); err != nil {
			return "", fmt.Errorf("search_message_tokens: recipients: %w", err)
		}
		var names []string
		if a := sqlBytes(args[6]); len(a) > 0 {
			if err := json.Unmarshal(a, &names); err != nil {
				return "", fmt.Errorf("search_message_tokens: attachment names: %w", err)
			}
		}
		var from *Address
		if addr := sqlString(args[2]); addr != nil {
			from = &Address{Address: *addr}
			if name := sqlString(args[1]); name != nil {
				from.Name = *name
			}
		}
		subject := ""
		if s := sqlString(args[0]); s != nil {
			subject = *s
		}
		fields := messageSearchFields(subject, from, addressesOf(rcpts.To), addressesOf(rcpts.Cc),
			sqlString(args[4]), sqlString(args[5]), names)
		return searchTokens(fields), nil
	})
	// search_request_tokens(path, query, headers, body)
	registerSQLFunction("search_request_tokens", 4, func(args []driver.Value) (driver.Value, error) {
		var pairs [][2]any
		if err := json.Unmarshal(sqlBytes(args[2]), &pairs); err != nil {
			return "", fmt.Errorf("search_request_tokens: headers: %w", err)
		}
		var path, query string
		if p := sqlString(args[0]); p != nil {
			path = *p
		}
		if q := sqlString(args[1]); q != nil {
			query = *q
		}
		return requestTokens(path, query, headersFromPairs(pairs), sqlBytes(args[3])), nil
	})
}

// registerSQLFunction makes fn a deterministic SQL function of SQLite's
// connections (from init, as capture_sha256 is).
func registerSQLFunction(name string, nArgs int32, fn func(args []driver.Value) (driver.Value, error)) {
	sqlite.MustRegisterDeterministicScalarFunction(name, nArgs,
		func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) { return fn(args) })
}

func sqlString(v driver.Value) *string {
	switch v := v.(type) {
	case string:
		return &v
	case []byte:
		s := string(v)
		return &s
	}
	return nil
}

func sqlBytes(v driver.Value) []byte {
	switch v := v.(type) {
	case string:
		return []byte(v)
	case []byte:
		return bytes.Clone(v)
	}
	return nil
}
