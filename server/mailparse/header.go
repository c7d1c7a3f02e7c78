package mailparse

import (
	"bytes"
	"io"
	"mime"
	"net/mail"
	"net/textproto"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/capturedev/capture/store/addrlist"
)

// field is one unfolded header line of the top-level header section.
type field struct {
	name  string // canonical
	value []byte // unfolded, trimmed; may alias the raw message
}

type headerSection struct {
	fields []field
	body   int  // offset of the body in the scanned input
	found  bool // false when the input starts with neither a header line nor a blank line
	// plain is set when every line was an ordinary field (a name of
	// letters, digits and hyphens, then a colon) or an indented
	// continuation, and a blank line ended the section: nothing enmime
	// would repair or report.
	plain bool
}

// scanHeader reads the top-level header section itself, because enmime keeps
// headers in a map and the API must keep their order. Bad lines are treated
// as enmime treats them (see enmime.ReadHeader), so both agree on where the
// body starts; enmime reports those lines as warnings.
func scanHeader(raw []byte) headerSection {
	h := headerSection{plain: true}
	owned := -1 // index of the field whose value was copied out of raw
	pos := 0
	for pos < len(raw) {
		line, next := raw[pos:], len(raw)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line, next = line[:i], pos+i+1
		} else {
			h.plain = false // the input ends inside the header section
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		switch {
		case len(line) == 0:
			// Possibly an empty header section: still a header section.
			h.body, h.found = next, true
			return h
		case line[0] == ' ' || line[0] == '\t':
			if len(h.fields) == 0 {
				return headerSection{}
			}
			v := h.trim(line)
			if len(v) == 0 {
				h.plain = false // enmime adds a space for it
			}
			owned = h.continueLast(v, owned)
		default:
			colon := bytes.IndexByte(line, ':')
			name := bytes.TrimRight(line[:max(colon, 0)], " \t")
			if colon <= 0 || !plainHeaderName(line[:colon]) {
				h.plain = false
			}
			switch {
			case colon > 0 && validHeaderName(name):
				h.fields = append(h.fields, field{
					name:  textproto.CanonicalMIMEHeaderKey(string(name)),
					value: h.trim(line[colon+1:]),
				})
			case len(h.fields) == 0:
				return headerSection{}
			case colon < 0:
				// An unindented continuation, as enmime repairs it.
				owned = h.continueLast(line, owned)
			}
		}
		pos = next
	}
	h.body = len(raw)
	h.found = len(h.fields) > 0
	h.plain = false
	if !h.found {
		h.body = 0
	}
	return h
}

// continueLast appends a folded line to the last field, copying the value out
// of the raw message the first time so appends never write into it.
func (h *headerSection) continueLast(more []byte, owned int) int {
	if len(more) == 0 {
		return owned
	}
	last := len(h.fields) - 1
	f := &h.fields[last]
	if owned != last {
		v := make([]byte, len(f.value), len(f.value)+len(more)+16)
		copy(v, f.value)
		f.value = v
		owned = last
	}
	if len(f.value) > 0 {
		f.value = append(f.value, ' ')
	}
	f.value = append(f.value, more...)
	return owned
}

// trim trims a value as enmime does (trimField), so that both read the
// same boundary. A value that bytes.TrimSpace would trim further, of \v,
// \f, U+0085 or U+00A0, is no longer plain: enmime warns about those.
func (h *headerSection) trim(v []byte) []byte {
	t := trimField(v)
	if len(t) != len(bytes.TrimSpace(v)) {
		h.plain = false
	}
	return t
}

// plainHeaderName reports a name as real mail writes them.
func plainHeaderName(name []byte) bool {
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return len(name) > 0
}

func validHeaderName(name []byte) bool {
	if len(name) == 0 {
		return false
	}
	for _, c := range name {
		if c < 33 || c > 126 || c == ':' {
			return false
		}
	}
	return true
}

// headerDecoder decodes RFC 2047 words with any charset lookupCharset
// knows (ISO-8859-x, Windows-125x, KOI8, CJK encodings, UTF-7), so that a
// word reads as a body in the same charset does.
type headerDecoder struct {
	wd       mime.WordDecoder
	w        *warnings
	unknown  string
	assigned bool
}

func (d *headerDecoder) decoder() *mime.WordDecoder {
	if !d.assigned {
		d.wd.CharsetReader = d.charsetReader
		d.assigned = true
	}
	return &d.wd
}

func (d *headerDecoder) charsetReader(label string, r io.Reader) (io.Reader, error) {
	if l := strings.ToLower(strings.TrimSpace(label)); l == "ascii" || l == "us-ascii" {
		// As for bodies: senders state US-ASCII and send UTF-8; other
		// 8-bit bytes are Windows-1252, which the standard makes of it.
		b, err := io.ReadAll(r)
		if err != nil || utf8.Valid(b) {
			return bytes.NewReader(b), err
		}
		return bytes.NewReader(windows1252(b)), nil
	}
	enc, _, ok := lookupCharset(label)
	if !ok {
		// Keeping the bytes beats dropping the header; invalid UTF-8 is
		// replaced afterwards.
		d.unknown = label
		return r, nil
	}
	return enc.NewDecoder().Reader(r), nil
}

// text turns a raw header value into valid UTF-8 without decoding encoded
// words. Raw 8-bit bytes that are not UTF-8 come from legacy mailers, which
// almost always meant Windows-1252 or its subset ISO-8859-1.
func (d *headerDecoder) text(name string, v []byte) string {
	if utf8.Valid(v) {
		return string(v)
	}
	d.w.addf("header %s has 8-bit bytes that are not UTF-8; read as windows-1252", quoteShort(name))
	return string(windows1252(v))
}

// ownCharsets renames, in the encoded words of s, the two charsets that
// mime.WordDecoder decodes without asking charsetReader (its ISO-8859-1 is
// Latin-1, with C1 controls where senders meant “ and €; its US-ASCII
// turns every 8-bit byte into U+FFFD) to labels of theirs that it passes
// on, so that a word reads as a body in its charset does.
func ownCharsets(s string) string {
	var sb strings.Builder
	for rest := s; ; {
		i := strings.Index(rest, "=?")
		if i < 0 {
			if sb.Len() == 0 {
				return s
			}
			sb.WriteString(rest)
			return sb.String()
		}
		sb.WriteString(rest[:i+2])
		rest = rest[i+2:]
		for _, r := range [...]struct{ from, to string }{{"iso-8859-1?", "latin1?"}, {"us-ascii?", "ascii?"}} {
			if len(rest) >= len(r.from) && strings.EqualFold(rest[:len(r.from)], r.from) {
				sb.WriteString(r.to)
				rest = rest[len(r.from):]
				break
			}
		}
	}
}

// words decodes RFC 2047 encoded words in s.
func (d *headerDecoder) words(name, s string) string {
	if !strings.Contains(s, "=?") {
		return s
	}
	d.unknown = ""
	out, err := d.decoder().DecodeHeader(ownCharsets(s))
	if err != nil {
		d.w.addf("header %s: encoded words not decoded: %v", quoteShort(name), err)
		return s
	}
	if d.unknown != "" {
		d.w.addf("header %s: unknown charset %q in encoded word", quoteShort(name), quoteShort(d.unknown))
	}
	if !utf8.ValidString(out) {
		out = strings.ToValidUTF8(out, "\uFFFD")
	}
	return out
}

func readHeaders(m *Message, fields []field, d *headerDecoder) {
	if len(fields) == 0 {
		return
	}
	var index map[string]int
	var from, to, cc, replyTo, subject, date, msgID []string
	m.Headers = make([]Header, 0, min(len(fields), 32))
	for _, f := range fields {
		text := d.text(f.name, f.value)
		decoded := d.words(f.name, text)

		i := -1
		if index != nil {
			if j, ok := index[f.name]; ok {
				i = j
			}
		} else {
			for j := range m.Headers {
				if m.Headers[j].Name == f.name {
					i = j
					break
				}
			}
			if len(m.Headers) >= 32 {
				// Linear search is cheaper for ordinary messages; a map
				// keeps a message with thousands of fields linear.
				index = make(map[string]int, len(m.Headers)*2)
				for j, h := range m.Headers {
					index[h.Name] = j
				}
			}
		}
		if i < 0 {
			i = len(m.Headers)
			m.Headers = append(m.Headers, Header{Name: f.name})
			if index != nil {
				index[f.name] = i
			}
		}
		m.Headers[i].Values = append(m.Headers[i].Values, decoded)

		switch f.name {
		case "From":
			from = append(from, text) // addresses are parsed before decoding words
		case "To":
			to = append(to, text)
		case "Cc":
			cc = append(cc, text)
		case "Reply-To":
			replyTo = append(replyTo, text)
		case "Subject":
			subject = append(subject, decoded)
		case "Date":
			date = append(date, text)
		case "Message-Id":
			msgID = append(msgID, text)
		}
	}

	if len(from) > 0 {
		if list := d.addresses("From", from); len(list) > 0 {
			m.From = &list[0]
		}
	}
	m.To = d.addresses("To", to)
	m.Cc = d.addresses("Cc", cc)
	m.ReplyTo = d.addresses("Reply-To", replyTo)
	if len(subject) > 0 {
		m.Subject = subject[0]
	}
	if len(date) > 0 {
		if t, ok := parseDate(date[0]); ok {
			m.Date = &t
		} else {
			d.w.addf("Date header %q could not be parsed", quoteShort(date[0]))
		}
	}
	if len(msgID) > 0 {
		m.MessageID = messageID(msgID[0])
	}
}

// addresses parses every occurrence of an address header. net/mail is
// strict; a list it rejects is read again leniently so that a slightly
// malformed header still yields its addresses.
func (d *headerDecoder) addresses(name string, values []string) []Address {
	if len(values) == 0 {
		return nil
	}
	s := values[0]
	if len(values) > 1 {
		s = strings.Join(values, ", ")
	}
	if strings.TrimSpace(s) == "" {
		return nil
	}
	p := mail.AddressParser{WordDecoder: d.decoder()}
	list, err := p.ParseList(s)
	if err != nil {
		out := d.lenientAddresses(name, s)
		d.w.addf("%s header %q is malformed (%v); read leniently", name, quoteShort(s), err)
		return out
	}
	if len(list) == 0 {
		return nil
	}
	out := make([]Address, 0, len(list))
	for _, a := range list {
		out = append(out, Address{Name: d.words(name, a.Name), Address: a.Address})
	}
	return out
}

// lenientAddresses takes "name <addr>" or a bare word containing "@" from
// each comma-separated item, ignoring commas inside quotes and brackets.
func (d *headerDecoder) lenientAddresses(name, s string) []Address {
	var out []Address
	for _, item := range addrlist.Split(s) {
		item = strings.TrimSpace(item)
		var a Address
		if i, j := strings.IndexByte(item, '<'), strings.LastIndexByte(item, '>'); i >= 0 && j > i {
			a.Address = strings.TrimSpace(item[i+1 : j])
			a.Name = strings.TrimSpace(item[:i])
			if len(a.Name) >= 2 && a.Name[0] == '"' && a.Name[len(a.Name)-1] == '"' {
				a.Name = strings.ReplaceAll(a.Name[1:len(a.Name)-1], `\"`, `"`)
			}
			a.Name = d.words(name, a.Name)
		} else {
			for _, word := range strings.Fields(item) {
				if strings.Contains(word, "@") {
					a.Address = strings.Trim(word, `"'()`)
					break
				}
			}
		}
		if a.Address != "" {
			out = append(out, a)
		}
	}
	return out
}

func parseDate(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, false
	}
	// The form nearly every mailer writes; net/mail tries several layouts
	// and pays for an error value on each miss.
	if t, err := time.Parse("Mon, _2 Jan 2006 15:04:05 -0700", s); err == nil {
		return t, true
	}
	if t, err := mail.ParseDate(s); err == nil {
		return t, true
	}
	// Formats programs emit when they do not follow RFC 5322.
	layouts := [...]string{
		time.RFC3339,
		time.RFC1123Z,
		time.RFC1123,
		time.RFC850,
		time.UnixDate,
		time.ANSIC,
		"2006-01-02 15:04:05 -0700",
		"2006-01-02 15:04:05",
	}
	for _, layout := range layouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// messageID returns the first <id> of the header, or the whole trimmed value
// when the sender left out the brackets.
func messageID(v string) string {
	v = strings.TrimSpace(v)
	if i := strings.IndexByte(v, '<'); i >= 0 {
		if j := strings.IndexByte(v[i+1:], '>'); j >= 0 {
			return strings.TrimSpace(v[i+1 : i+1+j])
		}
		return strings.TrimSpace(v[i+1:])
	}
	return v
}
