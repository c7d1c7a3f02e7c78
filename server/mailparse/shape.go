package mailparse

import (
	"bytes"
	"fmt"
	"strings"
	"unicode"
)

const (
	// maxMIMEDepth bounds multipart nesting. enmime stacks one boundary
	// reader per level and its cost doubles with each level past about
	// ten; real mail stays under eight.
	maxMIMEDepth = 10
	// maxMIMEParts bounds the number of parts: enmime appends each child by
	// walking its siblings, so its cost grows with the square of the count.
	// 500 parts take about 10 ms; real mail has a few dozen at most.
	maxMIMEParts = 500
)

// checkShape refuses, before enmime sees it, a multipart body nested too
// deeply or with too many parts. It follows boundaries as enmime does:
// a delimiter is "--boundary" anywhere in a line followed by whitespace,
// a part whose header declares a boundary opens a level, and a close
// delimiter leaves it. It must never see fewer levels or parts than enmime
// would, so it errs on the side of counting more.
func checkShape(hdr headerSection, body []byte) error {
	top := ""
	for _, f := range hdr.fields {
		if f.name == "Content-Type" {
			if mtype, b := declaredBoundary(f.value); strings.HasPrefix(mtype, "multipart/") {
				top = b
			}
			break
		}
	}
	if top == "" {
		return nil // not multipart, or enmime reads it as one part
	}
	stack := [][]byte{[]byte("--" + top)}
	parts := 0
	inHeader, inCT := false, false
	var ctype []byte
	// endField opens a level if the Content-Type just read declares one.
	endField := func() error {
		if !inCT {
			return nil
		}
		inCT = false
		// enmime descends into any part with a boundary but text bodies.
		if mtype, b := declaredBoundary(ctype); b != "" && mtype != "text/plain" && mtype != "text/html" {
			stack = append(stack, []byte("--"+b))
			if len(stack) > maxMIMEDepth {
				return fmt.Errorf("multiparts nested deeper than %d levels", maxMIMEDepth)
			}
		}
		return nil
	}
	for pos := 0; pos < len(body) && len(stack) > 0; {
		line, next := body[pos:], len(body)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line, next = line[:i], pos+i+1
		}
		pos = next
		line = bytes.TrimSuffix(line, []byte("\r"))

		if i, closing := matchDelimiter(line, stack); i >= 0 {
			if err := endField(); err != nil {
				return err
			}
			if closing {
				stack, inHeader = stack[:i], false
				continue
			}
			stack, inHeader = stack[:i+1], true
			if parts++; parts > maxMIMEParts {
				return fmt.Errorf("more than %d MIME parts", maxMIMEParts)
			}
			continue
		}
		if !inHeader {
			continue
		}
		// Header lines as enmime.ReadHeader takes them: only an empty
		// line ends the header, a line starting with white space continues
		// the field, so does a line without a colon, and a line with a bad
		// field name is dropped without ending the field before it.
		colon := bytes.IndexByte(line, ':')
		switch {
		case len(line) == 0:
			inHeader = false
			if err := endField(); err != nil {
				return err
			}
		case line[0] == ' ' || line[0] == '\t' || line[0] == '\r':
			if inCT {
				ctype = append(append(ctype, ' '), trimField(line)...)
			}
		case colon < 0:
			if inCT {
				ctype = append(append(ctype, ' '), line...)
			}
		case colon == 0 || !fieldName(line[:colon]):
		default:
			if err := endField(); err != nil {
				return err
			}
			if bytes.EqualFold(bytes.TrimSpace(line[:colon]), []byte("Content-Type")) {
				inCT = true
				ctype = append(ctype[:0], trimField(line[colon+1:])...)
			}
		}
	}
	return nil
}

// trimField trims what enmime trims from a header line: ASCII spaces,
// tabs and line breaks, not \v, \f or the Latin-1 spaces.
func trimField(b []byte) []byte { return bytes.Trim(b, " \t\r\n") }

// fieldName reports whether enmime keeps a header line with this name:
// printable ASCII, spaces allowed.
func fieldName(name []byte) bool {
	for _, c := range name {
		if c != ' ' && (c < 33 || c > 126) {
			return false
		}
	}
	return true
}

// declaredBoundary parses a Content-Type value with the parser enmime is
// given, so both agree on the boundary.
func declaredBoundary(ctype []byte) (mtype, boundary string) {
	mtype, params, _, _ := parseMediaType(string(ctype))
	return mtype, params["boundary"]
}

// matchDelimiter finds the innermost open level whose delimiter line is
// among stack, and whether it closes that level; -1 when none.
func matchDelimiter(line []byte, stack [][]byte) (int, bool) {
	if bytes.IndexByte(line, '-') < 0 {
		return -1, false
	}
	for i := len(stack) - 1; i >= 0; i-- {
		j := bytes.Index(line, stack[i])
		if j < 0 {
			continue
		}
		rest := line[j+len(stack[i]):]
		// enmime closes a level only at the start of a line, and takes any
		// white space (unicode.IsSpace of the byte) after a delimiter.
		switch {
		case bytes.HasPrefix(rest, []byte("--")):
			if j == 0 {
				return i, true
			}
		case len(rest) == 0 || unicode.IsSpace(rune(rest[0])):
			return i, false
		}
	}
	return -1, false
}
