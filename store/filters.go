package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The columns the list filters compare, and how they are computed: on
// insert, by the migrations that fill them for rows stored before, and for
// the filter's own text, all through the functions here.
//
// Messages: search_from, search_to and search_subject hold the filtered
// fields folded as search folds words (foldText), and the to, from and
// subject filters are folded alike, so "istanbul" finds "İstanbul",
// "strasse" finds "Straße", and a subject in NFD is found by the same text
// in NFC.
//
// Requests: path is kept as received, and request_path_keys holds its
// pathKey when that differs from it (nearly every path has no row there),
// so that the path filter finds a path however either side spelled its
// escapes. A table of its own rather than a column: SQLite reads a column
// stored after the request's content by walking the content's overflow
// pages, and a new column can only go there without rewriting every row.

// messageFilterFrom is a message's search_from: envelope sender, From
// name and From address, one a line.
func messageFilterFrom(envelopeFrom string, from *Address) string {
	if from == nil {
		return foldText(envelopeFrom)
	}
	return foldText(envelopeFrom + "\n" + from.Name + "\n" + from.Address)
}

// messageFilterTo is a message's search_to: envelope recipients, To and Cc
// addresses, one a line.
func messageFilterTo(envelopeTo []string, to, cc []Address) string {
	lines := append([]string{}, envelopeTo...)
	for _, a := range to {
		lines = append(lines, a.Address)
	}
	for _, a := range cc {
		lines = append(lines, a.Address)
	}
	return foldText(strings.Join(lines, "\n"))
}

// pathKey is a request path as the path filter compares it: an escape
// that spells a UTF-8 character is decoded, and that character, like any
// other outside ASCII, is written as itself, so "/ci/%C4%B0stanbul",
// "/ci/%c4%b0stanbul" and "/ci/İstanbul" are one key. An escaped slash
// stays "%2F" (it is part of a segment, not a separator, so "/a%2Fb" is
// not under "/a/"), an escaped or stray "%" is "%25", and every other byte
// that is not text (a control character, a byte outside UTF-8) is an
// escape in upper-case hex.
func pathKey(p string) string {
	if !strings.ContainsRune(p, '%') && isPrintableASCII(p) {
		return p // nearly every path: nothing to decode or spell
	}
	// Undo the escapes, remembering which bytes were escaped: an escaped
	// slash is not a slash.
	raw := make([]byte, 0, len(p))
	escaped := make([]bool, 0, len(p))
	for i := 0; i < len(p); i++ {
		if p[i] == '%' && i+2 < len(p) && isHex(p[i+1]) && isHex(p[i+2]) {
			raw = append(raw, unhex(p[i+1])<<4|unhex(p[i+2]))
			escaped = append(escaped, true)
			i += 2
			continue
		}
		raw = append(raw, p[i])
		escaped = append(escaped, false)
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(p))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c >= utf8.RuneSelf {
			if r, n := utf8.DecodeRune(raw[i:]); r != utf8.RuneError || n > 1 {
				b.Write(raw[i : i+n])
				i += n
				continue
			}
		}
		switch {
		case c == '/' && escaped[i], c == '%', c < 0x20, c >= 0x7f:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		default:
			b.WriteByte(c)
		}
		i++
	}
	return b.String()
}

func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// The rows whose filter columns an older build computed otherwise: a
// message with a filtered field outside ASCII (where foldText and the
// lower-casing before it agree, so the rest are right already), a request
// whose path has an escape or a byte outside ASCII (pathKey leaves any
// other path as it is). Both databases' migrations select them alike.
const (
	messagesToRefold = `length(subject) <> octet_length(subject)
		OR length(envelope_from) <> octet_length(envelope_from)
		OR length(coalesce(from_name, '')) <> octet_length(coalesce(from_name, ''))
		OR length(coalesce(from_address, '')) <> octet_length(coalesce(from_address, ''))
		OR length(recipients) <> octet_length(recipients)`
	requestsToKey = `length(path) <> octet_length(path) OR instr(path, '%') > 0`
)

// storedMessageFilters computes a stored message's filter columns from
// its columns, as messageInsert computed them.
func storedMessageFilters(subject, envelopeFrom string, fromName, fromAddress *string, recipients []byte) (from, to, subj string, err error) {
	var rcpts storedRecipients
	if err := json.Unmarshal(recipients, &rcpts); err != nil {
		return "", "", "", fmt.Errorf("recipients: %w", err)
	}
	var sender *Address
	if fromAddress != nil {
		sender = &Address{Address: *fromAddress}
		if fromName != nil {
			sender.Name = *fromName
		}
	}
	return messageFilterFrom(envelopeFrom, sender), messageFilterTo(rcpts.Envelope, addressesOf(rcpts.To), addressesOf(rcpts.Cc)),
		foldText(subject), nil
}

// SQL functions for SQLite's migration that recomputes the filter columns
// of the rows stored before (migrations/0010_filter_folding.sql).
func init() {
	// capture_message_filters(subject, envelope_from, from_name,
	// from_address, recipients) is the JSON array [from, to, subject].
	registerSQLFunction("capture_message_filters", 5, func(args []driver.Value) (driver.Value, error) {
		subject, envelopeFrom := "", ""
		if s := sqlString(args[0]); s != nil {
			subject = *s
		}
		if s := sqlString(args[1]); s != nil {
			envelopeFrom = *s
		}
		from, to, subj, err := storedMessageFilters(subject, envelopeFrom, sqlString(args[2]), sqlString(args[3]), sqlBytes(args[4]))
		if err != nil {
			return nil, fmt.Errorf("capture_message_filters: %w", err)
		}
		out, err := json.Marshal([]string{from, to, subj})
		return string(out), err
	})
	// capture_path_key(path) is pathKey(path).
	registerSQLFunction("capture_path_key", 1, func(args []driver.Value) (driver.Value, error) {
		if p := sqlString(args[0]); p != nil {
			return pathKey(*p), nil
		}
		return nil, nil
	})
}

// refoldPostgres is PostgreSQL's migration 2 (after its SQL made
// request_path_keys): it computes the filter columns of the rows stored
// before in Go, as SQLite's migration does through the functions above, a
// thousand rows a statement.
func refoldPostgres(ctx context.Context, tx *sql.Tx) error {
	const batch = 1000
	for after := int64(0); ; {
		rows, err := tx.QueryContext(ctx, `SELECT seq, subject, envelope_from, from_name, from_address, recipients
			FROM messages WHERE seq > $1 AND (`+messagesToRefold+`) ORDER BY seq LIMIT `+fmt.Sprint(batch), after)
		if err != nil {
			return fmt.Errorf("messages: %w", err)
		}
		var args []any
		for rows.Next() {
			var seq int64
			var subject, envelopeFrom, recipients string
			var fromName, fromAddress sql.NullString
			if err := rows.Scan(&seq, &subject, &envelopeFrom, &fromName, &fromAddress, &recipients); err != nil {
				rows.Close()
				return fmt.Errorf("messages: %w", err)
			}
			from, to, subj, err := storedMessageFilters(subject, envelopeFrom, strPtr(fromName), strPtr(fromAddress), []byte(recipients))
			if err != nil {
				rows.Close()
				return fmt.Errorf("message %d: %w", seq, err)
			}
			args = append(args, seq, from, to, subj)
			after = seq
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("messages: %w", err)
		}
		if len(args) == 0 {
			break
		}
		if _, err := tx.ExecContext(ctx, `UPDATE messages m SET search_from = v.f, search_to = v.t, search_subject = v.s
			FROM (VALUES `+valuesList(len(args)/4, 4, "::bigint")+`) AS v(seq, f, t, s) WHERE m.seq = v.seq`, args...); err != nil {
			return fmt.Errorf("messages: %w", err)
		}
	}
	for after := int64(0); ; {
		rows, err := tx.QueryContext(ctx, `SELECT seq, path FROM requests
			WHERE seq > $1 AND (`+requestsToKey+`) ORDER BY seq LIMIT `+fmt.Sprint(batch), after)
		if err != nil {
			return fmt.Errorf("requests: %w", err)
		}
		var args []any
		read := 0
		for rows.Next() {
			read++
			var seq int64
			var path string
			if err := rows.Scan(&seq, &path); err != nil {
				rows.Close()
				return fmt.Errorf("requests: %w", err)
			}
			if k := pathKey(path); k != path {
				args = append(args, seq, k)
			}
			after = seq
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("requests: %w", err)
		}
		if read == 0 {
			return nil
		}
		if len(args) == 0 {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO request_path_keys (seq, path_key)
			VALUES `+valuesList(len(args)/2, 2, "::bigint"), args...); err != nil {
			return fmt.Errorf("requests: %w", err)
		}
	}
}

// valuesList is PostgreSQL's placeholders for rows of n columns:
// "($1::bigint, $2, …), (…)", the first column cast as told (a VALUES
// list's types come from its first row, and a NULL there has none).
func valuesList(rows, n int, firstCast string) string {
	var b strings.Builder
	for r := range rows {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := range n {
			if c > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "$%d", r*n+c+1)
			if c == 0 {
				b.WriteString(firstCast)
			}
		}
		b.WriteByte(')')
	}
	return b.String()
}
