// Package addrlist splits an address header's value into its items the
// lenient way: at commas (and semicolons, which some mailers write) that
// stand outside quotes and angle brackets. The parser of messages falls
// back on it for a list net/mail refuses, and the store for the addresses
// it reads back from stored headers.
package addrlist

// Split returns the items of the address list s, untrimmed; the last one
// may be empty.
func Split(s string) []string {
	var items []string
	quoted, angle, start := false, 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == '<' && !quoted:
			angle++
		case c == '>' && !quoted && angle > 0:
			angle--
		case (c == ',' || c == ';') && !quoted && angle == 0:
			items = append(items, s[start:i])
			start = i + 1
		}
	}
	return append(items, s[min(start, len(s)):])
}
