package mailparse

import (
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// extendedParam decodes the RFC 2231 parameter name (filename, name) of a
// header value, in whatever charset it declares. Go's mime package, and so
// enmime, decodes only UTF-8 and US-ASCII there, and drops or garbles the
// rest ("filename*=iso-8859-1'fr'R%E9sum%E9.txt"), which senders of legacy
// charsets still write. ok is false when the value has no such parameter
// or it cannot be read.
func extendedParam(value, name string) (string, bool) {
	type segment struct {
		n        int
		extended bool
		text     string
	}
	var segs []segment
	for _, p := range splitParams(value) {
		k, v, found := strings.Cut(p, "=")
		if !found {
			continue
		}
		k = strings.ToLower(strings.TrimSpace(k))
		rest, ok := strings.CutPrefix(k, name+"*")
		if !ok {
			continue
		}
		s := segment{text: strings.TrimSpace(v)}
		rest, s.extended = strings.CutSuffix(rest, "*")
		switch {
		case rest == "" && s.extended:
			return "", false // "name**="
		case rest == "":
			s.extended = true // "name*=": one extended value
		default:
			n, err := strconv.Atoi(rest)
			if err != nil || n < 0 || n > 999 {
				continue
			}
			s.n = n
		}
		if !s.extended {
			s.text = strings.Trim(s.text, `"`)
		}
		segs = append(segs, s)
	}
	if len(segs) == 0 {
		return "", false
	}
	sort.SliceStable(segs, func(i, j int) bool { return segs[i].n < segs[j].n })
	var raw []byte
	label := ""
	for i, s := range segs {
		if s.n != i {
			return "", false // a segment is missing
		}
		text := s.text
		if s.extended && i == 0 {
			// charset'language'value
			parts := strings.SplitN(text, "'", 3)
			if len(parts) != 3 {
				return "", false
			}
			label, text = parts[0], parts[2]
		}
		if s.extended {
			b, err := url.PathUnescape(text)
			if err != nil {
				return "", false
			}
			text = b
		}
		raw = append(raw, text...)
	}
	if label == "" {
		return string(raw), true
	}
	enc, _, ok := lookupCharset(label)
	if !ok {
		return "", false
	}
	out, err := enc.NewDecoder().Bytes(raw)
	if err != nil {
		return "", false
	}
	return string(out), true
}

// splitParams splits a header value at the semicolons outside quotes; the
// first element is the value before any parameter.
func splitParams(v string) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '\\':
			i++
		case '"':
			quoted = !quoted
		case ';':
			if !quoted {
				out = append(out, v[start:i])
				start = i + 1
			}
		}
	}
	return append(out, v[start:])
}
