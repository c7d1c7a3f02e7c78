// Package weburl writes URLs found in the wild (an email's href, a raw
// request line) as RFC 3986 URIs, the way a browser does before it sends
// them: what a client reads from the API is then a URI its own parser and
// an OpenAPI `format: uri` check accept, and it names the same resource.
package weburl

import (
	"strings"

	"golang.org/x/net/idna"
)

// Escape returns raw, an absolute URL, with every byte a URI may not hold
// percent-encoded (a space, quotes, angle brackets, non-ASCII text, a "%"
// that starts no escape), a non-ASCII host in its ASCII (punycode) form,
// and a backslash in the path read as "/", as browsers read it in http(s)
// URLs. A URL that is already a URI comes back unchanged, escapes and
// case included, so it still matches what its sender wrote.
func Escape(raw string) string {
	if isURI(raw) {
		return raw
	}
	rest, scheme := raw, ""
	if i := strings.Index(raw, "://"); i > 0 && isScheme(raw[:i]) {
		scheme, rest = raw[:i+3], raw[i+3:]
	}
	authority := rest
	if scheme != "" {
		end := strings.IndexAny(rest, `/?#\`)
		if end < 0 {
			end = len(rest)
		}
		authority, rest = rest[:end], rest[end:]
	} else {
		authority = ""
	}
	var b strings.Builder
	b.Grow(len(raw) + len(raw)/2)
	b.WriteString(scheme)
	writeAuthority(&b, authority)
	writeRest(&b, rest, scheme != "")
	return b.String()
}

// writeAuthority writes [userinfo@]host[:port].
func writeAuthority(b *strings.Builder, authority string) {
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		escapeInto(b, authority[:at], userinfoByte)
		b.WriteByte('@')
		authority = authority[at+1:]
	}
	if ipLiteral(authority) {
		b.WriteString(authority)
		return
	}
	host, port := authority, ""
	if i := strings.LastIndexByte(authority, ':'); i >= 0 && allDigits(authority[i+1:]) {
		host, port = authority[:i], authority[i:]
	}
	if !isASCII(host) {
		if ascii, err := idna.Lookup.ToASCII(host); err == nil {
			host = ascii
		}
	}
	escapeInto(b, host, hostByte)
	b.WriteString(port)
}

// ipLiteral reports an IPv6 host in brackets, with or without a port.
func ipLiteral(authority string) bool {
	end := strings.IndexByte(authority, ']')
	if !strings.HasPrefix(authority, "[") || end < 0 {
		return false
	}
	for i := 1; i < end; i++ {
		if c := authority[i]; !isHex(c) && c != ':' && c != '.' {
			return false
		}
	}
	port, ok := strings.CutPrefix(authority[end+1:], ":")
	return authority[end+1:] == "" || ok && allDigits(port)
}

// writeRest writes the path, the query and the fragment; a backslash in
// the path is a slash only after a scheme and authority (what else would
// it separate?).
func writeRest(b *strings.Builder, rest string, absolute bool) {
	inPath, inFragment := true, false
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		switch {
		case c == '\\' && inPath && absolute:
			b.WriteByte('/')
		case c == '?' && inPath:
			inPath = false
			b.WriteByte(c)
		case c == '#' && !inFragment:
			inPath, inFragment = false, true
			b.WriteByte(c)
		case c == '%' && i+2 < len(rest) && isHex(rest[i+1]) && isHex(rest[i+2]):
			b.WriteByte(c)
		case c == '%':
			b.WriteString("%25")
		case pcharByte(c) || c == '/' || (!inPath && c == '?'):
			b.WriteByte(c)
		default:
			writeEscaped(b, c)
		}
	}
}

// isURI reports whether s already is a URI: every byte one a URI may hold
// where it stands, every "%" the start of an escape, one "#" at most.
func isURI(s string) bool {
	if i := strings.Index(s, "://"); i > 0 && isScheme(s[:i]) {
		end := strings.IndexAny(s[i+3:], `/?#\`)
		if end < 0 {
			end = len(s) - i - 3
		}
		a := s[i+3 : i+3+end]
		// The usual host[:port] is checked byte by byte; anything else
		// (user info, an IP literal, an escape) is a URI when writing it
		// as one changes nothing.
		if !plainAuthority(a) {
			var b strings.Builder
			if writeAuthority(&b, a); b.String() != a {
				return false
			}
		}
		s = s[i+3+end:]
	}
	fragment := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '#' && !fragment:
			fragment = true
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return false
			}
		case pcharByte(c) || c == '/' || c == '?':
		default:
			return false
		}
	}
	return true
}

// plainAuthority reports a host of letters, digits, "-", "." and "_"
// only, with a numeric port or none.
func plainAuthority(a string) bool {
	host, port, _ := strings.Cut(a, ":")
	for i := 0; i < len(host); i++ {
		if c := host[i]; !unreserved(c) || c == '~' {
			return false
		}
	}
	return allDigits(port)
}

func escapeInto(b *strings.Builder, s string, ok func(byte) bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte(c)
		case c != '%' && ok(c):
			b.WriteByte(c)
		default:
			writeEscaped(b, c)
		}
	}
}

const upperHex = "0123456789ABCDEF"

func writeEscaped(b *strings.Builder, c byte) {
	b.WriteByte('%')
	b.WriteByte(upperHex[c>>4])
	b.WriteByte(upperHex[c&15])
}

// The byte classes of RFC 3986 §2–3.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func subDelim(c byte) bool { return strings.IndexByte("!$&'()*+,;=", c) >= 0 }

func pcharByte(c byte) bool    { return unreserved(c) || subDelim(c) || c == ':' || c == '@' }
func hostByte(c byte) bool     { return unreserved(c) || subDelim(c) }
func userinfoByte(c byte) bool { return unreserved(c) || subDelim(c) || c == ':' }

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
