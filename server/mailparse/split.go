package mailparse

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/jhillyerd/enmime/v2"
)

// splitMIME builds enmime's part tree for a well-formed multipart message
// without running enmime over the whole of it. enmime finds boundaries with
// a reader that looks at every byte of every part, which makes it the
// largest cost of a typical HTML email; here the boundaries are found with
// bytes.Index and each leaf part goes through enmime on its own, so its
// headers, transfer encoding and charset are still decoded by enmime.
//
// It declines (ok false) whenever enmime could read the message in a way
// the simple split does not reproduce: any header enmime would repair, a
// boundary string anywhere but on a delimiter line of its own, a bare CR,
// an unclosed or empty multipart, a part without a Content-Type, a part
// enmime fails to read. FuzzShortcutAgrees holds both readings equal.
func splitMIME(msg []byte, hdr headerSection) (root *enmime.Part, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			root, ok = nil, false
		}
	}()
	if !hdr.plain {
		return nil, false
	}
	mtype, boundary, ok := containerType(hdr.fields)
	if !ok || !strings.HasPrefix(mtype, "multipart/") || boundary == "" {
		return nil, false
	}
	root = &enmime.Part{PartID: "0", ContentType: mtype, Boundary: boundary}
	sp := splitter{}
	if !sp.parts(root, msg[hdr.body:], 1) {
		return nil, false
	}
	return root, true
}

// splitter bounds the tree as checkShape does, whatever checkShape saw.
type splitter struct{ count int }

// containerType reads the one Content-Type of a header section.
func containerType(fields []field) (mtype, boundary string, ok bool) {
	var ctype []byte
	n := 0
	for _, f := range fields {
		if f.name == "Content-Type" {
			ctype, n = f.value, n+1
		}
	}
	if n != 1 {
		return "", "", false
	}
	mtype, params, invalid, _ := parseMediaType(string(ctype))
	if mtype == "" || len(invalid) > 0 {
		return "", "", false
	}
	// RFC 2046 boundaries: at most 70 characters, none of them trailing
	// white space. enmime cannot find a longer one (it peeks at most 4 KiB
	// ahead), and white space inside is where header folding shows.
	b := params["boundary"]
	if len(b) > 70 || strings.ContainsAny(b, " \t") {
		return "", "", false
	}
	return mtype, b, true
}

// parts adds parent's parts, found in body, to the tree. depth is 1 for
// the message's own multipart, whose parts enmime numbers 1, 2, … rather
// than after their parent.
func (sp *splitter) parts(parent *enmime.Part, body []byte, depth int) bool {
	if depth > maxMIMEDepth {
		return false
	}
	spans, ok := delimit(body, parent.Boundary)
	if !ok {
		return false
	}
	for i, s := range spans {
		if sp.count++; sp.count > maxMIMEParts {
			return false
		}
		id := strconv.Itoa(i + 1)
		if depth > 1 {
			id = parent.PartID + "." + id
		}
		if !sp.part(parent, body[s.start:s.end], id, depth) {
			return false
		}
	}
	return true
}

// delimit finds the parts of a multipart body the way enmime's boundary
// reader would, declining (ok false) wherever the two could differ.
func delimit(body []byte, boundary string) (spans []span, ok bool) {
	delim := []byte("--" + boundary)
	// Every '\r' must start a line break: enmime's boundary reader skips
	// the byte after a CR when it looks for a delimiter.
	if bytes.Count(body, []byte("\r")) != bytes.Count(body, []byte("\r\n")) {
		return nil, false
	}
	// Delimiter lines, with where each starts and where the line ends.
	type mark struct{ start, next int }
	var marks []mark
	closed := false
	for pos := 0; pos < len(body); {
		line, next := body[pos:], len(body)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line, next = line[:i], pos+i+1
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		switch {
		case bytes.Equal(line, delim):
			if closed || next == len(body) && !bytes.HasSuffix(body, []byte("\n")) {
				return nil, false
			}
			marks = append(marks, mark{pos, next})
		case len(line) == len(delim)+2 && bytes.HasPrefix(line, delim) && bytes.HasSuffix(line, []byte("--")):
			if closed {
				return nil, false
			}
			closed = true
			marks = append(marks, mark{pos, next})
		}
		pos = next
	}
	// The boundary may appear nowhere else: enmime would take it for a
	// delimiter in the middle of a line too.
	if !closed || len(marks) < 2 || bytes.Count(body, delim) != len(marks) {
		return nil, false
	}
	spans = make([]span, 0, len(marks)-1)
	for i := 0; i+1 < len(marks); i++ {
		start, end := marks[i].next, marks[i+1].start
		if end <= start {
			return nil, false // an empty part: enmime reports it
		}
		// The line break before the next delimiter belongs to it.
		end--
		if end > start && body[end-1] == '\r' {
			end--
		}
		spans = append(spans, span{start, end})
	}
	return spans, true
}

// part reads one part: a nested multipart is split in turn, a leaf is read
// by enmime as a message of its own.
func (sp *splitter) part(parent *enmime.Part, part []byte, id string, depth int) bool {
	ph := scanHeader(part)
	if !ph.plain || !ph.found || len(ph.fields) == 0 {
		return false
	}
	mtype, boundary, ok := containerType(ph.fields)
	if !ok {
		return false
	}
	if boundary != "" {
		if !strings.HasPrefix(mtype, "multipart/") {
			return false // enmime reports text with a boundary
		}
		c := &enmime.Part{PartID: id, ContentType: mtype, Boundary: boundary}
		parent.AddChild(c)
		if !sp.parts(c, part[ph.body:], depth+1) {
			return false
		}
		c.PartID += ".0" // as enmime names a multipart inside another
		return true
	}
	leaf, err := parser.ReadParts(bytes.NewReader(part))
	if err != nil || leaf.FirstChild != nil || leaf.ContentType != mtype {
		return false
	}
	leaf.PartID = id
	parent.AddChild(leaf)
	return true
}
