package mailparse

import (
	"bytes"
	"strings"
)

// RFC 2045 §6.7 rule 3: white space at the end of a quoted-printable line
// was added in transit and is deleted when decoding, which turns a line
// ending in "= " into a soft line break. enmime escapes every '=' not
// followed by two hex digits or a line break before mime/quotedprintable
// sees it (so that "=ZZ" reads as text instead of failing the part), and
// that escapes the '=' of such a line too: "end= \r\nmore" came out as
// "end=\nmore" instead of "endmore". enmime's decoding cannot be reached
// from outside, so the white space is deleted from the quoted-printable
// bodies before enmime reads them.

// trimSoftBreaks returns msg with the white space after a line-final '='
// deleted in every quoted-printable body it can place: a single-part
// message's, or the leaves of a multipart that splitMIME's rules can
// delimit (enmime reads those the same way). Other messages, and the many
// that have no such line, come back as they are.
func trimSoftBreaks(msg []byte, hdr headerSection) []byte {
	if !hasSpacedSoftBreak(msg[hdr.body:]) {
		return msg
	}
	var bodies []span
	if !qpBodies(msg, hdr, 0, 1, &bodies) || len(bodies) == 0 {
		return msg
	}
	out := make([]byte, 0, len(msg))
	last := 0
	for _, b := range bodies {
		out = append(out, msg[last:b.start]...)
		out = appendTrimmedSoftBreaks(out, msg[b.start:b.end])
		last = b.end
	}
	return append(out, msg[last:]...)
}

// qpBodies adds to bodies where the quoted-printable bodies of the entity
// at msg[at:] lie (hdr is its header section, scanned from there). It
// fails where the structure is not one splitMIME would read.
func qpBodies(msg []byte, hdr headerSection, at, depth int, bodies *[]span) bool {
	if depth > maxMIMEDepth || len(*bodies) > maxMIMEParts {
		return false
	}
	body := at + hdr.body
	mtype, boundary, ok := containerType(hdr.fields)
	if !ok {
		// No Content-Type at all is text/plain; several are for enmime.
		if hasField(hdr.fields, "Content-Type") {
			return false
		}
	}
	if !strings.HasPrefix(mtype, "multipart/") {
		if isQuotedPrintable(hdr.fields) {
			*bodies = append(*bodies, span{body, len(msg)})
		}
		return true
	}
	if !hdr.plain || boundary == "" {
		return false
	}
	spans, ok := delimit(msg[body:], boundary)
	if !ok {
		return false
	}
	for _, s := range spans {
		part := msg[:body+s.end]
		ph := scanHeader(part[body+s.start:])
		if !ph.plain || !ph.found || len(ph.fields) == 0 {
			return false
		}
		if !qpBodies(part, ph, body+s.start, depth+1, bodies) {
			return false
		}
	}
	return true
}

func hasField(fields []field, name string) bool {
	for _, f := range fields {
		if f.name == name {
			return true
		}
	}
	return false
}

// isQuotedPrintable reports whether the one Content-Transfer-Encoding of
// a header section is quoted-printable.
func isQuotedPrintable(fields []field) bool {
	qp, n := false, 0
	for _, f := range fields {
		if f.name == "Content-Transfer-Encoding" {
			n++
			qp = strings.EqualFold(string(bytes.TrimSpace(f.value)), "quoted-printable")
		}
	}
	return n == 1 && qp
}

// hasSpacedSoftBreak reports whether b has a line whose last character
// before trailing spaces and tabs is '='.
func hasSpacedSoftBreak(b []byte) bool {
	for _, esc := range []string{"= ", "=\t"} {
		for rest := b; ; {
			i := bytes.Index(rest, []byte(esc))
			if i < 0 {
				break
			}
			rest = rest[i+1:]
			if j := len(rest) - len(bytes.TrimLeft(rest, " \t")); j == len(rest) || rest[j] == '\r' || rest[j] == '\n' {
				return true
			}
		}
	}
	return false
}

// appendTrimmedSoftBreaks appends body with the spaces and tabs between a
// line-final '=' and the line's end deleted; at the body's end the '='
// goes with them.
func appendTrimmedSoftBreaks(dst, body []byte) []byte {
	for len(body) > 0 {
		line, rest := body, []byte(nil)
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, rest = body[:i], body[i:]
		}
		eol := len(line)
		if eol > 0 && line[eol-1] == '\r' {
			eol--
		}
		trimmed := bytes.TrimRight(line[:eol], " \t")
		switch {
		case len(trimmed) == eol || !bytes.HasSuffix(trimmed, []byte("=")):
			dst = append(dst, line...)
		case rest == nil && eol == len(line):
			// The body's last line: enmime would escape an '=' with
			// nothing after it, so the soft break goes too.
			dst = append(dst, trimmed[:len(trimmed)-1]...)
		default:
			dst = append(dst, trimmed...)
			dst = append(dst, line[eol:]...)
		}
		if rest == nil {
			break
		}
		dst = append(dst, '\n')
		body = rest[1:]
	}
	return dst
}
