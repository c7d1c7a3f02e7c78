package emailapi

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// email is one message as a provider's request describes it, before it is
// written as MIME. Every provider's decoder produces these.
type email struct {
	From                 mail.Address
	To, Cc, Bcc, ReplyTo []mail.Address
	Subject              string
	// Bodies are the alternative renderings in the order a client should
	// prefer them least to most (text first, HTML last), as
	// multipart/alternative orders them.
	Bodies      []alternative
	Attachments []attachment
	// Headers are the sender's own header fields, in order.
	Headers []header
	// MessageID is the Message-ID the provider gives the message, with
	// its <>; empty, the message gets a random one. A sender's own
	// Message-ID header wins over both.
	MessageID string
	// Capture records the provider options that shape delivery rather than
	// content (templates, tags, metadata, tracking, schedules) as
	// X-Capture-* fields, so tests can see them.
	Capture []header
}

type alternative struct {
	ContentType string // a media type without parameters, e.g. text/plain
	// Params are the Content-Type's parameters other than charset (a
	// calendar's method=REQUEST), their values as given. The content is
	// Unicode text, so the part's charset is always UTF-8, whatever
	// charset a request named.
	Params  map[string]string
	Content string
}

type header struct{ Name, Value string }

type attachment struct {
	Filename    string
	ContentType string // a media type, possibly with parameters
	ContentID   string // without <>
	Description string
	// Inline parts are shown inside the HTML body (referenced by cid:)
	// rather than offered as files.
	Inline bool
	Data   []byte
}

// capture appends an X-Capture-<name> field; empty values are left out.
func (e *email) capture(name, value string) {
	if value != "" {
		e.Capture = append(e.Capture, header{"X-Capture-" + name, value})
	}
}

// captureJSON records a JSON value compactly; null and absent values are
// left out.
func (e *email) captureJSON(name string, v json.RawMessage) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return
	}
	var b bytes.Buffer
	if json.Compact(&b, v) == nil {
		e.capture(name, b.String())
	}
}

// captureValue records any Go value as JSON.
func (e *email) captureValue(name string, v any) {
	b, err := json.Marshal(v)
	if err == nil {
		e.captureJSON(name, b)
	}
}

// addBody adds a rendering when the request has one.
func (e *email) addBody(contentType string, content *string) {
	if content != nil {
		e.Bodies = append(e.Bodies, alternative{ContentType: contentType, Content: *content})
	}
}

// envelope lists every recipient once: To, Cc and Bcc, in that order.
// Bcc recipients are in the envelope only; no header names them.
func (e *email) envelope() []string {
	var out []string
	seen := map[string]bool{}
	for _, list := range [][]mail.Address{e.To, e.Cc, e.Bcc} {
		for _, a := range list {
			key := strings.ToLower(a.Address)
			if !seen[key] {
				seen[key] = true
				out = append(out, a.Address)
			}
		}
	}
	return out
}

// outgoing writes e as the MIME message a provider would send.
func (e *email) outgoing(provider string) *outgoing {
	return &outgoing{raw: e.compose(provider, time.Now()), from: e.From.Address, to: e.envelope()}
}

// compose writes the message: header fields, then the body as one part or
// a tree of multiparts (mixed ⊃ related ⊃ alternative), the way the
// providers build it.
func (e *email) compose(provider string, now time.Time) []byte {
	var b bytes.Buffer
	writeAddresses(&b, "From", []mail.Address{e.From})
	writeAddresses(&b, "To", e.To)
	writeAddresses(&b, "Cc", e.Cc)
	writeAddresses(&b, "Reply-To", e.ReplyTo)
	writeField(&b, "Subject", e.Subject)
	// The sender may set its own Date or Message-ID.
	if !e.hasHeader("Date") {
		writeField(&b, "Date", now.Format(time.RFC1123Z))
	}
	if !e.hasHeader("Message-Id") {
		writeField(&b, "Message-ID", cmp.Or(e.MessageID, newMessageID(e.From.Address)))
	}
	writeField(&b, "MIME-Version", "1.0")
	for _, h := range e.Headers {
		// A field capture writes itself holds capture's value alone: a
		// sender's own X-Capture-Provider must not be the one a test
		// reads first.
		if !e.capturedField(h.Name) {
			writeField(&b, h.Name, h.Value)
		}
	}
	writeField(&b, "X-Capture-Provider", provider)
	for _, h := range e.Capture {
		writeField(&b, h.Name, h.Value)
	}
	writeEntity(&b, e.tree())
	return b.Bytes()
}

// capturedField reports whether capture writes the field name itself.
func (e *email) capturedField(name string) bool {
	if strings.EqualFold(name, "X-Capture-Provider") {
		return true
	}
	for _, h := range e.Capture {
		if strings.EqualFold(h.Name, name) {
			return true
		}
	}
	return false
}

func (e *email) hasHeader(name string) bool {
	for _, h := range e.Headers {
		if strings.EqualFold(h.Name, name) {
			return true
		}
	}
	return false
}

// newMessageID is a random Message-ID at the sender's domain, as a
// provider gives a message whose sender set none.
func newMessageID(from string) string {
	return "<" + strings.ToLower(rand.Text()) + "@" + messageIDDomain(domainOf(from)) + ">"
}

func domainOf(addr string) string {
	if i := strings.LastIndexByte(addr, '@'); i >= 0 && i+1 < len(addr) {
		return addr[i+1:]
	}
	return fallbackDomain
}

// fallbackDomain is the right side of a Message-ID whose domain cannot be
// written as one.
const fallbackDomain = "capture.local"

// messageIDDomain is domain as a Message-ID's right side (RFC 5322 3.6.4),
// which is ASCII: an ASCII dot-atom or domain literal as it is, an
// internationalized domain (bücher.de) in its IDNA form
// (xn--bcher-kva.de), as mail systems write it, and anything else the
// fallback domain. Never an encoded-word: a Message-ID is a structured
// field, which RFC 2047 leaves undecoded, so every reader would see the
// encoding, and an id answered to the sender would not match the stored
// one.
func messageIDDomain(domain string) string {
	if dotAtom(domain) || domainLiteral(domain) {
		return domain
	}
	if ascii, err := idna.Lookup.ToASCII(domain); err == nil && dotAtom(ascii) {
		return ascii
	}
	return fallbackDomain
}

// dotAtom reports whether s is an RFC 5322 dot-atom-text: atext runs
// joined by single dots.
func dotAtom(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for _, run := range strings.Split(s, ".") {
		if run == "" {
			return false
		}
		for i := 0; i < len(run); i++ {
			c := run[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-/=?^_`{|}~", c) >= 0) {
				return false
			}
		}
	}
	return true
}

// domainLiteral reports whether s is an RFC 5322 no-fold-literal:
// [dtext], as in [192.0.2.1].
func domainLiteral(s string) bool {
	if len(s) < 2 || len(s) > 255 || s[0] != '[' || s[len(s)-1] != ']' {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; c < '!' || c > '~' || c == '[' || c == ']' || c == '\\' {
			return false
		}
	}
	return true
}

// entity is one MIME entity: a leaf with content, or a multipart.
type entity struct {
	mediaType string
	params    map[string]string
	fields    []header // Content-Disposition, Content-ID, …
	data      []byte
	base64    bool // else quoted-printable (text)
	children  []*entity
}

func (e *email) tree() *entity {
	var bodies []*entity
	for _, b := range e.Bodies {
		params := map[string]string{}
		for k, v := range b.Params {
			params[k] = v
		}
		params["charset"] = "utf-8"
		bodies = append(bodies, &entity{mediaType: b.ContentType, params: params, data: []byte(b.Content)})
	}
	if len(bodies) == 0 {
		// A message needs a body; an empty text part says "none" plainly.
		bodies = append(bodies, &entity{mediaType: "text/plain", params: map[string]string{"charset": "utf-8"}})
	}
	root := bodies[0]
	if len(bodies) > 1 {
		root = &entity{mediaType: "multipart/alternative", children: bodies}
	}
	var inline, attached []*entity
	for _, a := range e.Attachments {
		if a.Inline {
			inline = append(inline, a.entity())
		} else {
			attached = append(attached, a.entity())
		}
	}
	if len(inline) > 0 {
		root = &entity{mediaType: "multipart/related", children: append([]*entity{root}, inline...)}
	}
	if len(attached) > 0 {
		root = &entity{mediaType: "multipart/mixed", children: append([]*entity{root}, attached...)}
	}
	return root
}

func (a attachment) entity() *entity {
	mediaType, params, err := mime.ParseMediaType(a.ContentType)
	if err != nil || !strings.Contains(mediaType, "/") {
		// Decoders check content types but take one without a subtype
		// ("pdf"), as the providers do; this also keeps a guess safe.
		mediaType, params = "application/octet-stream", map[string]string{}
	}
	disposition := "attachment"
	if a.Inline {
		disposition = "inline"
	}
	ent := &entity{mediaType: mediaType, params: params, data: a.Data, base64: true}
	if a.Filename != "" {
		params["name"] = a.Filename
		disposition = formatMediaType(disposition, map[string]string{"filename": a.Filename})
	}
	ent.fields = append(ent.fields, header{"Content-Disposition", disposition})
	if a.ContentID != "" {
		ent.fields = append(ent.fields, header{"Content-ID", "<" + a.ContentID + ">"})
	}
	if a.Description != "" {
		ent.fields = append(ent.fields, header{"Content-Description", a.Description})
	}
	return ent
}

// writeEntity writes an entity's content fields, the blank line that ends
// them, and its body. Text is quoted-printable (CRLF line ends, short
// lines, any byte), everything else base64 in 76-column lines.
func writeEntity(b *bytes.Buffer, ent *entity) {
	if len(ent.children) > 0 {
		boundary := "capture-" + strings.ToLower(rand.Text())
		writeStructured(b, "Content-Type", mime.FormatMediaType(ent.mediaType, map[string]string{"boundary": boundary}))
		b.WriteString("\r\n")
		for _, c := range ent.children {
			b.WriteString("--" + boundary + "\r\n")
			writeEntity(b, c)
			b.WriteString("\r\n")
		}
		b.WriteString("--" + boundary + "--\r\n")
		return
	}
	contentType := formatMediaType(ent.mediaType, ent.params)
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	writeStructured(b, "Content-Type", contentType)
	encoding := "quoted-printable"
	if ent.base64 {
		encoding = "base64"
	}
	writeField(b, "Content-Transfer-Encoding", encoding)
	for _, f := range ent.fields {
		if f.Name == "Content-Disposition" {
			writeStructured(b, f.Name, f.Value)
		} else {
			writeField(b, f.Name, f.Value)
		}
	}
	b.WriteString("\r\n")
	if ent.base64 {
		enc := make([]byte, base64.StdEncoding.EncodedLen(len(ent.data)))
		base64.StdEncoding.Encode(enc, ent.data)
		for len(enc) > 76 {
			b.Write(enc[:76])
			b.WriteString("\r\n")
			enc = enc[76:]
		}
		b.Write(enc)
		return
	}
	qp := quotedprintable.NewWriter(b)
	qp.Write(ent.data)
	qp.Close()
}

// Header lines are folded before this many characters where a space
// allows; RFC 5322 asks for 78 and insists on 998.
const (
	foldAt       = 78
	maxLineRun   = 900
	maxWordBytes = 45 // of text per base64 encoded-word: 60 characters encoded
)

// writeAddresses writes an address field, folded between addresses.
func writeAddresses(b *bytes.Buffer, name string, as []mail.Address) {
	if len(as) == 0 {
		return
	}
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = formatAddress(a)
	}
	writeFolded(b, name, strings.Join(parts, ", "))
}

// formatAddress writes a plain display name as net/mail does, quoted when
// needed. Any other name goes into base64 encoded-words: net/mail's own
// Q-encoding can leave characters in a name (a backslash) that a phrase
// may not hold, and net/mail then cannot read its own output.
func formatAddress(a mail.Address) string {
	if a.Name == "" || printableASCII(a.Name) && !strings.Contains(a.Name, "=?") {
		return a.String()
	}
	return mime.BEncoding.Encode("utf-8", a.Name) + " " + (&mail.Address{Address: a.Address}).String()
}

// writeField writes an unstructured field (Subject, the sender's own
// headers, X-Capture-*). Anything but printable ASCII, and any run too
// long to fold, goes into RFC 2047 encoded-words, so no value can break
// out of its field or exceed a line, and every value reads back as given.
func writeField(b *bytes.Buffer, name, value string) {
	switch {
	case !printableASCII(value):
		value = mime.QEncoding.Encode("utf-8", value)
	case strings.Contains(value, "=?") || strings.Trim(value, " \t") != value || longestRun(value) > maxLineRun:
		// Text that looks like an encoded-word would be read as one, and
		// readers trim white space around a value unless it is encoded.
		value = encodeWords(value)
	}
	writeFolded(b, name, value)
}

// writeStructured writes a field whose value formatMediaType built
// (Content-Type, Content-Disposition): already encoded per RFC 2231.
func writeStructured(b *bytes.Buffer, name, value string) { writeFolded(b, name, value) }

// maxParamChunk is how much of a parameter value one line carries.
const maxParamChunk = 60

// formatMediaType is mime.FormatMediaType, except that a parameter too long
// for one line (a long file name) is split into RFC 2231 continuations
// (filename*0*=utf-8”…; filename*1*=…), so that folding can keep every
// line short; readers join them back.
func formatMediaType(t string, params map[string]string) string {
	short := map[string]string{}
	var long []string
	for _, k := range sortedKeys(params) {
		if len(mime.FormatMediaType("x", map[string]string{k: params[k]})) > maxParamChunk+len(k) {
			long = append(long, k)
		} else {
			short[k] = params[k]
		}
	}
	s := mime.FormatMediaType(t, short)
	if s == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString(s)
	for _, k := range long {
		enc := percentEncode(params[k])
		for i := 0; enc != ""; i++ {
			n := min(len(enc), maxParamChunk)
			// Never split a %XX triplet.
			if j := strings.LastIndexByte(enc[max(0, n-2):n], '%'); j >= 0 && n < len(enc) {
				n = max(0, n-2) + j
			}
			fmt.Fprintf(&b, "; %s*%d*=", k, i)
			if i == 0 {
				b.WriteString("utf-8''")
			}
			b.WriteString(enc[:n])
			enc = enc[n:]
		}
	}
	return b.String()
}

// percentEncode writes s as an RFC 2231 extended value: attribute
// characters as they are, every other byte as %XX.
func percentEncode(s string) string {
	const attributeChars = "!#$&+-.^_`|~"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(attributeChars, c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// writeFolded writes "Name: value" CRLF, inserting a line break before a
// space wherever a line would pass foldAt. Unfolding removes exactly the
// inserted CRLFs, so the value reads back unchanged.
func writeFolded(b *bytes.Buffer, name, value string) {
	b.WriteString(name)
	b.WriteString(": ")
	col := len(name) + 2
	for value != "" {
		// The next word and the space before it.
		i := strings.IndexByte(value[1:], ' ') + 1
		if i == 0 {
			i = len(value)
		}
		word := value[:i]
		if col+len(word) > foldAt && col > len(name)+2 && word[0] == ' ' {
			b.WriteString("\r\n")
			col = 0
		}
		b.WriteString(word)
		col += len(word)
		value = value[i:]
	}
	b.WriteString("\r\n")
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' || c > '~') && c != '\t' {
			return false
		}
	}
	return true
}

func longestRun(s string) int {
	longest := 0
	for _, w := range strings.Split(s, " ") {
		longest = max(longest, len(w))
	}
	return longest
}

// encodeWords writes s as base64 encoded-words of whole runes, separated
// by spaces a folder can break at; decoders join adjacent encoded-words
// without the space.
func encodeWords(s string) string {
	var words []string
	for s != "" {
		n := min(len(s), maxWordBytes)
		for n < len(s) && n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		if n == 0 {
			n = min(len(s), maxWordBytes)
		}
		words = append(words, "=?utf-8?b?"+base64.StdEncoding.EncodeToString([]byte(s[:n]))+"?=")
		s = s[n:]
	}
	return strings.Join(words, " ")
}

// contentTypeFor picks an attachment's content type: the one given, else
// one from the file name's extension, else application/octet-stream.
func contentTypeFor(given, filename string) string {
	if given != "" {
		return given
	}
	if t := mime.TypeByExtension(strings.ToLower(path.Ext(filename))); t != "" {
		return t
	}
	return "application/octet-stream"
}
