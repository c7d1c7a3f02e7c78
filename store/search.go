package store

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/capturedev/capture/store/addrlist"
)

// Full-text search (MessageFilter.Q, RequestFilter.Q).
//
// What matches: a query is words and "quoted phrases", all of which a
// capture must contain. A message's fields include the values of the
// verification codes found in it (§15), so that the value `codes` gives
// finds the message however the code was set out ("582 931"). Text is
// compared folded (lower case, accents and other combining marks removed,
// compatibility forms decomposed) with every run of characters that are
// not letters or digits read as one space; a word or phrase matches when
// its folded text is a substring of a field's
// (searchtext.go has the fields and the folding). So "abc12" finds
// "xyzabc123", "élan" finds "Elan", and "user@example.com" finds the
// address however it is punctuated.
//
// How: a word-level FTS5 index plus a vocabulary of its tokens.
//
//   - messages_search and requests_search hold, per capture, its distinct
//     folded tokens: contentless (the text is in the capture's row
//     already) and detail=none (no positions), so a capture costs one short
//     posting per distinct token, and no text is stored twice.
//   - search_terms is every token of 3 to 32 characters the index holds
//     (and the first 32 characters of longer ones), with a trigram index.
//     Terms no capture holds any more leave it in background sweeps
//     after the pruner (searchvocab.go), so that a data dir at its cap
//     stops growing. A query word is looked up there first: "abc12"
//     becomes the tokens that contain it, xyzabc123 OR abc123 OR …, and
//     that is the FTS5 query. A word of one token is then answered by the
//     index exactly, without reading any text.
//   - Phrases, words of several tokens (user@example.com), words of one or
//     two characters and words in more than maxExpansion tokens narrow the
//     candidates as far as the index can; each candidate's text is then
//     checked, newest first, until the page is full.
//   - A capture's tokens are written in the capture's own transaction, to
//     messages_search_staged (requests_search_staged). Every
//     indexInterval, indexStaged moves staged rows into FTS5 in batches and
//     adds their new tokens to the vocabulary in the same transaction, so
//     the vocabulary always covers what FTS5 holds. FTS5 writes a segment,
//     and merges, at every commit: written directly, at the one or two
//     messages a commit holds under SMTP load, the index took the server's
//     CPU per message in `capture bench smtp` from 160 to 255 µs; staged,
//     to about 190. A search reads the few staged rows itself
//     (search_staged_match, which finds a word inside their tokens without
//     the vocabulary) and merges them with the index's, so a capture is
//     found, and wakes a waiting search, as soon as it is committed.
//
// Measured at a million 2 KiB messages of varied text
// (BenchmarkSearch1M): the index adds 500 bytes a message (9 %), and a
// rare word, a word in 1 % of the messages, or a part of either, takes
// about 1 ms for the first page. A trigram index over all the text, the
// obvious way to search substrings with FTS5, took 1,050 bytes a message
// of the same text (a posting for each of its ~1,000 distinct trigrams,
// which no number of messages amortizes) and nearly three times the work
// to insert; with detail=none it cannot tell that a word's trigrams are
// adjacent either, so it would need the same check of the text.
//
// On PostgreSQL (the same words, results and order): messages_search and
// requests_search hold each capture's tokens as text, written in the
// capture's own transaction (GIN takes writes into its pending list, so
// nothing is staged), under a pg_trgm index. Every query token narrows the
// rows with LIKE '%token%', which the trigram index serves, and each
// candidate's tokens then settle the query with stagedMatch, exactly as
// the vocabulary and FTS5 do on SQLite; phrases and short words are
// checked in the text as on SQLite. There is no vocabulary: a word in
// many tokens costs the candidates it names, not a fallback to the text.
//
// Known limits: inside a token longer than 32 characters only its first 32
// are searched (the start of a hash is found, its middle is not), and a
// token's characters past its 128th byte not at all; a query of words of
// one or two characters only reads rows until a page is full; the
// vocabulary keeps tokens whose captures were deleted until the next
// sweep, which waits for it to grow by a quarter.

const (
	// maxQueryBytes and maxQueryWords bound a query's work.
	maxQueryBytes = 1024
	maxQueryWords = 16
	// maxExpansion is the most vocabulary tokens one word becomes in the
	// index query; a word found in more tokens is checked in the text.
	maxExpansion = 128
)

// QueryError is a search query that cannot be parsed. It is ErrInvalid.
type QueryError struct {
	Param  string // the parameter the query came in ("q")
	Reason string
}

func (e *QueryError) Error() string { return fmt.Sprintf("%s: %s: %s", ErrInvalid, e.Param, e.Reason) }
func (e *QueryError) Unwrap() error { return ErrInvalid }

// parseQuery splits q into its words and phrases, each normalized as
// normalizeText does; a word of several tokens contains spaces.
//
// A term ends at a space outside quotation marks; the marks pair up
// (an odd number is an error, wherever they are), and are punctuation
// like any other once they have kept the spaces between a pair inside
// the term. So `"quick brown" fox` is a phrase and a word, and
// `"status":"paid"`, pasted from a JSON body, is one term, status:paid,
// as is `{"note":"two words"}`; `"status" "paid"` is two.
func parseQuery(q string) ([]string, error) {
	bad := func(format string, args ...any) error {
		return &QueryError{Param: "q", Reason: fmt.Sprintf(format, args...)}
	}
	if len(q) > maxQueryBytes {
		return nil, bad("longer than %d bytes", maxQueryBytes)
	}
	if !utf8.ValidString(q) {
		return nil, bad("not valid UTF-8")
	}
	var words []string
	seen := map[string]bool{}
	add := func(raw string) {
		if w := normalizeText(raw); w != "" && !seen[w] {
			seen[w] = true
			words = append(words, w)
		}
	}
	quoted := false
	start := 0
	for i, r := range q {
		switch {
		case r == '"':
			quoted = !quoted
		case !quoted && unicode.IsSpace(r):
			add(q[start:i])
			start = i + utf8.RuneLen(r)
		}
	}
	if quoted {
		return nil, bad(`a quotation mark is not closed: end the phrase with "`)
	}
	add(q[start:])
	if len(words) == 0 {
		return nil, bad("nothing to search for: give a word with letters or digits")
	}
	if len(words) > maxQueryWords {
		return nil, bad("more than %d words", maxQueryWords)
	}
	return words, nil
}

// searchPlan is how one query runs.
type searchPlan struct {
	// words are the query's words and phrases, normalized.
	words []string
	// groups narrow the search through the index: a match holds at least
	// one term of every group. None when no word can use the index.
	groups [][]indexTerm
	// check lists the words the index cannot settle: each candidate's
	// text must contain them.
	check []string
}

// indexTerm is a token of the index or, with prefix, every token that
// starts with it.
type indexTerm struct {
	tok    string
	prefix bool
}

// planSearch parses q and expands its words through the vocabulary.
func (s *Store) planSearch(ctx context.Context, q string) (searchPlan, error) {
	words, err := parseQuery(q)
	if err != nil {
		return searchPlan{}, err
	}
	p := searchPlan{words: words}
	add := func(tok string, part tokenPart) (bool, error) {
		terms, exact, err := s.expand(ctx, tok, part)
		if terms != nil {
			p.groups = append(p.groups, terms)
		}
		return exact, err
	}
	for _, w := range words {
		toks := strings.Split(w, " ")
		if len(toks) == 1 {
			exact, err := add(toks[0], inside)
			if err != nil {
				return searchPlan{}, err
			}
			if !exact {
				p.check = append(p.check, w)
			}
			continue
		}
		// Several tokens: the first ends a token of the text, those in
		// between are whole tokens, the last starts one; the text decides.
		p.check = append(p.check, w)
		if _, err := add(toks[0], atEnd); err != nil {
			return searchPlan{}, err
		}
		for _, t := range toks[1 : len(toks)-1] {
			p.groups = append(p.groups, []indexTerm{{tok: t}})
		}
		if _, err := add(toks[len(toks)-1], atStart); err != nil {
			return searchPlan{}, err
		}
	}
	return p, nil
}

// tokenPart says where in a token of the text a query token must be.
type tokenPart int

const (
	inside tokenPart = iota
	atStart
	atEnd
)

// vocabularyQueries find, for a query token, the vocabulary's tokens that
// hold it where tokenPart says: the trigram index serves inside and atEnd,
// the term's own index atStart.
var vocabularyQueries = map[tokenPart]string{
	inside:  `SELECT term FROM search_terms_trigram WHERE term LIKE '%' || ?1 || '%' LIMIT ?2`,
	atEnd:   `SELECT term FROM search_terms_trigram WHERE term LIKE '%' || ?1 LIMIT ?2`,
	atStart: `SELECT term FROM search_terms WHERE term >= ?1 AND term < ?1 || char(1114111) LIMIT ?2`,
}

// expand returns the index terms for the tokens that hold tok where part
// says, and whether they find exactly the captures whose text does. It
// returns nil when the index cannot narrow the search: tok is too short for
// the trigram index, or too many tokens hold it. Each token is named: an
// FTS5 prefix query (tok*) first merges the postings of every token it
// covers, a cost that grows with the store, while an OR of tokens reads
// only as far as the page needs.
func (s *Store) expand(ctx context.Context, tok string, part tokenPart) ([]indexTerm, bool, error) {
	n := utf8.RuneCountInString(tok)
	if n > vocabMaxRunes {
		// Only a token longer than the vocabulary keeps can hold it, and
		// only its start is searched.
		if part == atEnd {
			return nil, false, nil
		}
		return []indexTerm{{tok: tok, prefix: true}}, part == inside, nil
	}
	if n < vocabMinRunes && part != atStart {
		return nil, false, nil
	}
	if !s.b.vocabulary() {
		// PostgreSQL: the trigram index narrows the search, and
		// stagedMatch settles the word on each row as the vocabulary
		// and FTS5 do on SQLite.
		return nil, part == inside, nil
	}
	rows, err := s.query(ctx, vocabularyQueries[part], tok, maxExpansion+1)
	if err != nil {
		return nil, false, fmt.Errorf("search vocabulary: %w", err)
	}
	defer rows.Close()
	var terms []indexTerm
	if n < vocabMinRunes {
		terms = append(terms, indexTerm{tok: tok}) // too short for the vocabulary itself
	}
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, false, fmt.Errorf("search vocabulary: %w", err)
		}
		// A term as long as the vocabulary keeps may be the start of a
		// longer token, which the index holds whole.
		terms = append(terms, indexTerm{tok: t, prefix: utf8.RuneCountInString(t) == vocabMaxRunes})
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("search vocabulary: %w", err)
	}
	switch {
	case len(terms) > maxExpansion:
		return nil, false, nil
	case len(terms) == 0:
		// No token holds it, so nothing matches: a term no row has.
		return []indexTerm{{tok: tok}}, true, nil
	}
	return terms, true, nil
}

// ftsQuery is the plan's groups as an FTS5 query. Tokens hold only
// letters, digits and marks, never a quotation mark.
func (p searchPlan) ftsQuery() string {
	var b strings.Builder
	for i, g := range p.groups {
		if i > 0 {
			b.WriteString(" AND ")
		}
		if len(g) > 1 {
			b.WriteByte('(')
		}
		for j, t := range g {
			if j > 0 {
				b.WriteString(" OR ")
			}
			b.WriteString(`"` + t.tok + `"`)
			if t.prefix {
				b.WriteByte('*')
			}
		}
		if len(g) > 1 {
			b.WriteByte(')')
		}
	}
	return b.String()
}

// stagedQuery is the plan's words for search_staged_match, one a line;
// a word the text check settles starts with '?'.
func (p searchPlan) stagedQuery() string {
	lines := make([]string, len(p.words))
	for i, w := range p.words {
		lines[i] = w
		if slices.Contains(p.check, w) {
			lines[i] = "?" + w
		}
	}
	return strings.Join(lines, "\n")
}

// stagedMatch reports whether tokens, a staged row, holds every word of
// query (a stagedQuery) as the index will once the row has moved there:
// exactly for the words the index settles, and for those the text check
// settles, whether the row may hold them.
func stagedMatch(tokens, query string) bool {
	for word := range strings.SplitSeq(query, "\n") {
		if checked, ok := strings.CutPrefix(word, "?"); ok {
			for tok := range strings.SplitSeq(checked, " ") {
				if !strings.Contains(tokens, tok) {
					return false
				}
			}
		} else if !stagedHas(tokens, word) {
			return false
		}
	}
	return true
}

// stagedHas reports whether a token of tokens holds word as expand finds
// it: inside the token's first vocabMaxRunes characters, or at its start
// when word is longer.
func stagedHas(tokens, word string) bool {
	n := utf8.RuneCountInString(word)
	if !strings.Contains(tokens, word) {
		return false
	}
	for tok := range strings.SplitSeq(tokens, " ") {
		if n > vocabMaxRunes && strings.HasPrefix(tok, word) {
			return true
		}
		if term, ok := vocabularyTerm(tok); ok && n <= vocabMaxRunes && strings.Contains(term, word) {
			return true
		}
	}
	return false
}

// ftsSource makes k run the plan against the FTS5 table fts and its
// staged rows (SQLite).
func (p searchPlan) ftsSource(k *keyset, fts string) {
	if len(p.groups) == 0 {
		return
	}
	// The index drives the query, newest match first: with the
	// collection joined the other way round, a rare word would read
	// the whole collection to fill a page. The staged rows, the
	// newest, come second, and the page merges both in seq order.
	staged := fts + "_staged"
	k.sources = []source{{
		from:   fts + ` CROSS JOIN ` + k.table + ` ON ` + k.table + `.seq = ` + fts + `.rowid`,
		seqCol: fts + `.rowid`, where: fts + ` MATCH ?`, args: []any{p.ftsQuery()}, ownerBounds: true,
	}, {
		from:   staged + ` CROSS JOIN ` + k.table + ` ON ` + k.table + `.seq = ` + staged + `.seq`,
		seqCol: staged + `.seq`, where: `search_staged_match(` + staged + `.tokens, ?)`, args: []any{p.stagedQuery()},
	}}
}

// trigramSource makes k read its rows joined to index, a table of each
// capture's tokens with a trigram index (PostgreSQL's pg_trgm), narrowed to
// those whose tokens hold every query token somewhere (the index serves
// those of three characters or more); the scan then settles the plan with
// stagedMatch.
func (p searchPlan) trigramSource(k *keyset, index string) {
	var conds []string
	var args []any
	seen := map[string]bool{}
	for _, w := range p.words {
		for tok := range strings.SplitSeq(w, " ") {
			if seen[tok] {
				continue
			}
			seen[tok] = true
			// Every token of a match holds each token of every word, even
			// one too short for the trigrams to narrow. Tokens hold only
			// letters, digits and marks: nothing LIKE reads as a wildcard.
			conds = append(conds, index+`.tokens LIKE ?`)
			args = append(args, "%"+tok+"%")
		}
	}
	k.sources = []source{{
		from:   k.table + ` JOIN ` + index + ` ON ` + index + `.seq = ` + k.table + `.seq`,
		seqCol: k.table + `.seq`, where: strings.Join(conds, " AND "), args: args,
	}}
	k.columns += ", " + index + ".tokens"
	k.windowed = true
}

// matches reports whether fields contain every word the plan checks.
func (p searchPlan) matches(fields []string) bool {
	if len(p.check) == 0 {
		return true
	}
	normalized := make([]string, len(fields))
	for i, f := range fields {
		normalized[i] = normalizeText(f)
	}
	for _, w := range p.check {
		found := false
		for _, f := range normalized {
			if strings.Contains(f, w) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// messageCheckCols are what checking a message's text reads beyond its
// summary.
func messageCheckCols(b backend) string {
	return `messages.content,
	(SELECT ` + b.jsonGroupArray("filename", "position") + ` FROM attachments WHERE message_seq = messages.seq),
	messages.codes`
}

// searchedBodies reads from a message's pack what search reads of its
// bodies: the first maxSearchField bytes of each (clip cuts them at a
// character), nil when absent.
func searchedBodies(u *unpacked) (text, html *string, err error) {
	read := func(i int) (*string, error) {
		b, ok, err := u.section(i, maxSearchField+utf8.UTFMax)
		if err != nil || !ok {
			return nil, err
		}
		s := string(b)
		return &s, nil
	}
	if text, err = read(messageText); err != nil {
		return nil, nil, err
	}
	html, err = read(messageHTML)
	return text, html, err
}

// maxSearchedHeaders bounds what search reads of a message's headers for
// the addresses its lists leave out (searchedAddresses).
const maxSearchedHeaders = 4 << 20

// searchedAddresses reads from a message's pack the names and addresses
// its To and Cc headers name, as search fields: every one, where the
// summary lists only the first ListedAddresses. Reading stays bounded as
// for any field: the headers up to maxSearchedHeaders bytes (a value cut
// there keeps the addresses before the cut), To and Cc each up to
// maxSearchField bytes of their values.
func searchedAddresses(u *unpacked) ([]string, error) {
	b, ok, err := u.section(messageHeaders, maxSearchedHeaders)
	if err != nil || !ok {
		return nil, err
	}
	var to, cc strings.Builder
	// The section is JSON [[name, [values…]], …], read a token at a
	// time: a section cut short still yields what comes before the cut.
	dec := json.NewDecoder(bytes.NewReader(b))
	next := func(want json.Delim) bool {
		t, err := dec.Token()
		return err == nil && t == want
	}
	if next('[') {
	headers:
		for dec.More() {
			if !next('[') {
				break
			}
			t, err := dec.Token()
			name, isName := t.(string)
			if err != nil || !isName || !next('[') {
				break
			}
			var into *strings.Builder
			switch {
			case strings.EqualFold(name, "To"):
				into = &to
			case strings.EqualFold(name, "Cc"):
				into = &cc
			}
			for dec.More() {
				t, err := dec.Token()
				if err != nil {
					break headers
				}
				if v, ok := t.(string); ok && into != nil && into.Len() < maxSearchField {
					if into.Len() > 0 {
						into.WriteString(", ")
					}
					into.WriteString(v)
				}
			}
			if !next(']') || !next(']') {
				break
			}
		}
	}
	var fields []string
	for _, list := range []string{clip(to.String()), clip(cc.String())} {
		for _, a := range parseAddressList(list) {
			fields = append(fields, a.Name, a.Address)
		}
	}
	return fields, nil
}

// parseAddressList reads the addresses of a header's decoded value as the
// message's lists were read from it: strictly, else leniently ("name
// <address>" or a word holding "@" from each item), so that a malformed
// list, or one cut short, still yields its addresses.
func parseAddressList(s string) []Address {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	if list, err := mail.ParseAddressList(s); err == nil {
		out := make([]Address, len(list))
		for i, a := range list {
			out[i] = Address{Name: a.Name, Address: a.Address}
		}
		return out
	}
	var out []Address
	for _, it := range addrlist.Split(s) {
		it = strings.TrimSpace(it)
		var a Address
		if i, j := strings.IndexByte(it, '<'), strings.LastIndexByte(it, '>'); i >= 0 && j > i {
			a.Address = strings.TrimSpace(it[i+1 : j])
			a.Name = strings.Trim(strings.TrimSpace(it[:i]), `"`)
		} else {
			for word := range strings.FieldsSeq(it) {
				if strings.Contains(word, "@") {
					a.Address = strings.Trim(word, `"'()<>`)
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

// searchPage pages through k with scan, or, when q is set, through the
// captures that search (searchMessages, searchRequests) finds for it, the
// plan and the page read from one snapshot.
func searchPage[T any](ctx context.Context, s *Store, k keyset, p Page, q string, scan func(*sql.Rows, *row) (T, error),
	search func(context.Context, *keyset, string) (func(*sql.Rows, *row) (T, error), error)) (List[T], error) {
	if q == "" {
		return page(ctx, s, k, p, scan)
	}
	ctx, done, err := s.snapshot(ctx)
	if err != nil {
		return List[T]{}, err
	}
	defer done()
	if scan, err = search(ctx, &k, q); err != nil {
		return List[T]{}, err
	}
	return page(ctx, s, k, p, scan)
}

// searchSource plans q and makes k read its rows through the index named
// index. tokens says each row brings its index tokens, to settle with
// stagedMatch; check, that its text must be read too. With neither, every
// row k reads is a match.
func (s *Store) searchSource(ctx context.Context, k *keyset, q, index string) (plan searchPlan, tokens, check bool, err error) {
	if plan, err = s.planSearch(ctx, q); err != nil {
		return searchPlan{}, false, false, err
	}
	if s.afterSearchPlan != nil {
		s.afterSearchPlan()
	}
	tokens, check = s.b.searchSource(k, plan, index), len(plan.check) > 0
	k.filtered = tokens || check
	return plan, tokens, check, nil
}

// searchMessages makes k a search of q and returns the scan for its rows.
func (s *Store) searchMessages(ctx context.Context, k *keyset, q string) (func(*sql.Rows, *row) (MessageSummary, error), error) {
	plan, tokens, check, err := s.searchSource(ctx, k, q, "messages_search")
	if err != nil {
		return nil, err
	}
	if !tokens && !check {
		return scanMessageRow, nil
	}
	if check {
		k.columns += ", " + messageCheckCols(s.b)
	}
	staged := plan.stagedQuery()
	return func(r *sql.Rows, base *row) (MessageSummary, error) {
		var toks string
		var content []byte
		var attachments, codes string
		var extra []any
		if tokens {
			extra = append(extra, &toks)
		}
		if check {
			extra = append(extra, &content, &attachments, &codes)
		}
		m, err := scanMessageSummary(r, base, nil, extra...)
		if err != nil || (tokens && !stagedMatch(toks, staged)) {
			return m, cmp.Or(err, errSkipRow)
		}
		if !check {
			return m, nil
		}
		var names []string
		if err := json.Unmarshal([]byte(attachments), &names); err != nil {
			return m, fmt.Errorf("message %s attachment names: %w", m.ID, err)
		}
		u, err := openPack(content)
		if err != nil {
			return m, fmt.Errorf("message %s: %w", m.ID, err)
		}
		text, html, err := searchedBodies(u)
		if err != nil {
			return m, fmt.Errorf("message %s: %w", m.ID, err)
		}
		var found []storedCode
		if err := json.Unmarshal([]byte(codes), &found); err != nil {
			return m, fmt.Errorf("message %s codes: %w", m.ID, err)
		}
		fields := messageSearchFields(m.Subject, m.From, m.To, m.Cc, text, html, names)
		for _, c := range found {
			fields = append(fields, c.Value)
		}
		if plan.matches(fields) {
			return m, nil
		}
		// The summary lists the first ListedAddresses of To and Cc; the
		// index holds the words of every address. A message whose header
		// named more is checked against all of them, read from its
		// headers: only then, as few messages name that many.
		if m.ToCount <= len(m.To) && m.CcCount <= len(m.Cc) {
			return m, errSkipRow
		}
		rest, err := searchedAddresses(u)
		if err != nil {
			return m, fmt.Errorf("message %s headers: %w", m.ID, err)
		}
		if len(rest) == 0 || !plan.matches(append(fields, rest...)) {
			return m, errSkipRow
		}
		return m, nil
	}, nil
}

// searchRequests makes k a search of q and returns the scan for its rows.
func (s *Store) searchRequests(ctx context.Context, k *keyset, q string) (func(*sql.Rows, *row) (RequestSummary, error), error) {
	plan, tokens, check, err := s.searchSource(ctx, k, q, "requests_search")
	if err != nil {
		return nil, err
	}
	if !tokens && !check {
		return scanRequestRow, nil
	}
	if check {
		k.columns += ", requests.content"
	}
	staged := plan.stagedQuery()
	return func(r *sql.Rows, base *row) (RequestSummary, error) {
		var toks string
		var content []byte
		var extra []any
		if tokens {
			extra = append(extra, &toks)
		}
		if check {
			extra = append(extra, &content)
		}
		q, err := scanRequestSummary(r, base, extra...)
		if err != nil || (tokens && !stagedMatch(toks, staged)) {
			return q, cmp.Or(err, errSkipRow)
		}
		if !check {
			return q, nil
		}
		headers, body, err := unpackRequest(content)
		if err != nil {
			return q, fmt.Errorf("request %s: %w", q.ID, err)
		}
		if !plan.matches(requestSearchFields(q.Path, q.Query, headers, body)) {
			return q, errSkipRow
		}
		return q, nil
	}, nil
}
