package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// setVar sets *p to v for the test.
func setVar[T any](t *testing.T, p *T, v T) {
	saved := *p
	t.Cleanup(func() { *p = saved })
	*p = v
}

// hexOf is a token unique to kind and i, n hex digits long.
func hexOf(kind string, i, n int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s%d", kind, i))
	return hex.EncodeToString(sum[:])[:n]
}

// vocabularyOf lists search_terms.
func vocabularyOf(t *testing.T, s *Store) map[string]bool {
	t.Helper()
	rows, err := s.rdb.Query(`SELECT term FROM search_terms`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	terms := map[string]bool{}
	for rows.Next() {
		var term string
		if err := rows.Scan(&term); err != nil {
			t.Fatal(err)
		}
		terms[term] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return terms
}

// heldTerms are the terms the stored captures need: those of every token
// FTS5's own vocabulary lists (which the vocabulary must always hold),
// and those of the staged rows (filed when a row moves), each read whole.
func heldTerms(t *testing.T, s *Store) (fts, staged map[string]bool) {
	t.Helper()
	fts, staged = map[string]bool{}, map[string]bool{}
	add := func(terms map[string]bool, tok string) {
		if term, ok := vocabularyTerm(tok); ok {
			terms[term] = true
		}
	}
	err := s.write(t.Context(), func(w *wtx) error {
		clear(fts)
		clear(staged)
		for _, ix := range stagedIndexes {
			toks, err := ftsVocabulary(w, ix.fts)
			if err != nil {
				return err
			}
			for tok := range toks {
				add(fts, tok)
			}
			rows, err := w.query(`SELECT tokens FROM ` + ix.staged)
			if err != nil {
				return err
			}
			for rows.Next() {
				var tokens string
				if err := rows.Scan(&tokens); err != nil {
					rows.Close()
					return err
				}
				for tok := range strings.SplitSeq(tokens, " ") {
					add(staged, tok)
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fts, staged
}

// checkVocabulary checks that the vocabulary holds every term FTS5 needs,
// every term of a staged row that it held before, and nothing else.
func checkVocabulary(t *testing.T, s *Store, before map[string]bool) {
	t.Helper()
	terms := vocabularyOf(t, s)
	fts, staged := heldTerms(t, s)
	for term := range terms {
		if !fts[term] && !staged[term] {
			t.Errorf("kept %q, which nothing holds", term)
		}
	}
	for term := range fts {
		if !terms[term] {
			t.Errorf("lacks %q, which FTS5 holds", term)
		}
	}
	for term := range staged {
		if before[term] && !terms[term] {
			t.Errorf("deleted %q, which a staged row holds", term)
		}
	}
}

// ftsVocabulary lists the tokens fts5vocab finds in FTS5 table fts, with
// the rows that hold each, as the writer's transaction sees them.
func ftsVocabulary(w *wtx, fts string) (map[string]int, error) {
	if _, err := w.exec(`CREATE VIRTUAL TABLE IF NOT EXISTS temp.` + fts + `_vocab USING fts5vocab(main, ` + fts + `, row)`); err != nil {
		return nil, err
	}
	rows, err := w.query(`SELECT term, doc FROM temp.` + fts + `_vocab`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	toks := map[string]int{}
	for rows.Next() {
		var tok string
		var n int
		if err := rows.Scan(&tok, &n); err != nil {
			return nil, err
		}
		toks[tok] = n
	}
	return toks, rows.Err()
}

// checkTrigramIndex has FTS5 check the trigram index against search_terms.
func checkTrigramIndex(t *testing.T, s *Store) {
	t.Helper()
	err := s.write(t.Context(), func(w *wtx) error {
		_, err := w.exec(`INSERT INTO search_terms_trigram (search_terms_trigram, rank) VALUES ('integrity-check', 1)`)
		return err
	})
	if err != nil {
		t.Fatalf("trigram index: %v", err)
	}
}

// TestFTS5VocabSeesDeletes holds SQLite to what the sweep relies on:
// fts5vocab leaves out a row deleted from a contentless_delete table at
// once, not at the next merge, and lists the rows the open transaction
// has written.
func TestFTS5VocabSeesDeletes(t *testing.T) {
	f := newSearchFixture(t)
	if !f.s.b.vocabulary() {
		t.Skip("PostgreSQL has no vocabulary")
	}
	ctx := t.Context()
	var ids []string
	for i := range 40 {
		ids = append(ids, f.request(fmt.Sprint(i), NewRequest{Path: fmt.Sprintf("/keepword/goneword%d", i)}))
	}
	// All 40 in one FTS5 segment, then deleted one transaction at a time:
	// the segment stays, with tombstones for the deleted rows.
	if err := f.s.indexStaged(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[:30] {
		if err := f.s.DeleteRequest(ctx, f.project.ID, id); err != nil {
			t.Fatal(err)
		}
	}
	errRollBack := errors.New("roll back")
	err := f.s.write(ctx, func(w *wtx) error {
		toks, err := ftsVocabulary(w, "requests_search")
		if err != nil {
			return err
		}
		if toks["keepword"] != 10 {
			t.Errorf("keepword in %d rows, want 10", toks["keepword"])
		}
		for i := range 40 {
			if got, want := toks[fmt.Sprint("goneword", i)] > 0, i >= 30; got != want {
				t.Errorf("goneword%d listed %v, want %v", i, got, want)
			}
		}
		if _, err := w.exec(`INSERT INTO requests_search (rowid, tokens) VALUES (1000000, 'intxword')`); err != nil {
			return err
		}
		if _, err := w.exec(`DELETE FROM requests_search WHERE rowid = (SELECT seq FROM requests WHERE id = ?)`, ids[35]); err != nil {
			return err
		}
		if toks, err = ftsVocabulary(w, "requests_search"); err != nil {
			return err
		}
		if toks["intxword"] != 1 || toks["goneword35"] != 0 || toks["keepword"] != 9 {
			t.Errorf("inside the transaction: intxword %d, goneword35 %d, keepword %d; want 1, 0, 9",
				toks["intxword"], toks["goneword35"], toks["keepword"])
		}
		return errRollBack
	})
	if !errors.Is(err, errRollBack) {
		t.Fatal(err)
	}
}

// vocabularyCapture is a capture of TestVocabularySweep: its unique
// tokens, and the parts of them that must find it.
type vocabularyCapture struct {
	name   string
	tokens []string
	parts  []string
}

func TestVocabularySweep(t *testing.T) {
	setVar(t, &sweepTerms, 16)
	setVar(t, &sweepMinTerms, 64)
	f := newSearchFixture(t)
	ctx := t.Context()
	const messages, keepMessages, requests, keepRequests = 30, 10, 60, 20
	// The oldest are past the plan's retention.
	received := func(i, n, keep int) time.Time {
		if i < n-keep {
			return time.Now().Add(-f.project.Plan.Retention - time.Hour)
		}
		return now()
	}

	// shared(i) is a token of message i and of a request: of requests
	// 0-9, which go, for messages 20-29, which stay; of requests 40-59,
	// which stay, for messages 10-29. shared(0-9) goes with its messages.
	shared := func(i int) string { return "shared" + hexOf("shared", i, 10) }
	requestShares := func(i int) string {
		switch {
		case i < 10:
			return shared(i + 20)
		case i >= 40:
			return shared(i - 30)
		}
		return shared(1000 + i)
	}
	var msgs, reqs []vocabularyCapture
	for i := range messages {
		word, long := "mail"+hexOf("msg", i, 16), hexOf("mlong", i, 48)
		text := "Your code is in " + long + " and " + shared(i)
		m := vocabularyCapture{name: "m" + fmt.Sprint(i), tokens: []string{word, long},
			// Inside a word; inside a long token's first 32 characters;
			// its first 40, past what the vocabulary keeps of it.
			parts: []string{word[3:14], long[10:22], long[:40]}}
		f.message(m.name, NewMessage{Subject: "Invoice " + word, Text: &text, ReceivedAt: received(i, messages, keepMessages)})
		msgs = append(msgs, m)
	}
	for i := range requests {
		evt, key, cus := hexOf("evt", i, 24), hexOf("key", i, 40), hexOf("cus", i, 14)
		q := vocabularyCapture{name: "r" + fmt.Sprint(i), tokens: []string{evt, key, cus},
			parts: []string{evt[6:16], key[10:20], key[:36], cus[2:12]}}
		body := fmt.Sprintf(`{"id":"evt_%s","data":{"object":{"id":"in_%s","customer":"cus_%s","note":"%s"}}}`,
			evt, evt, cus, requestShares(i))
		f.request(q.name, NewRequest{Path: "/hooks/stripe", ContentType: "application/json", ReceivedAt: received(i, requests, keepRequests),
			Headers: []Header{{Name: "Idempotency-Key", Values: []string{key}}}, Body: []byte(body)})
		reqs = append(reqs, q)
		if i == requests-keepRequests/2 {
			// The newest stay staged through the sweep.
			if err := f.s.indexStaged(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	var before map[string]bool
	if f.s.b.vocabulary() {
		before = vocabularyOf(t, f.s)
	}

	n, err := f.s.Prune(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(messages - keepMessages + requests - keepRequests); n != want {
		t.Fatalf("pruned %d, want %d", n, want)
	}
	live := append(slices.Clone(msgs[messages-keepMessages:]), reqs[requests-keepRequests:]...)
	gone := append(slices.Clone(msgs[:messages-keepMessages]), reqs[:requests-keepRequests]...)

	if f.s.b.vocabulary() {
		after := vocabularyOf(t, f.s)
		if f.staged() == 0 {
			t.Fatal("nothing staged through the sweep")
		}
		checkVocabulary(t, f.s, before)
		if len(after) >= len(before)*3/4 {
			t.Errorf("vocabulary went from %d terms only to %d", len(before), len(after))
		}
		for _, c := range gone {
			for _, tok := range c.tokens {
				if term, _ := vocabularyTerm(tok); after[term] {
					t.Errorf("%s pruned, its %q still in the vocabulary", c.name, term)
				}
			}
		}
		for i := range 30 {
			if after[shared(i)] != (i >= 10) {
				t.Errorf("shared(%d) %q in the vocabulary: %v", i, shared(i), after[shared(i)])
			}
		}
		for i := 10; i < 40; i++ {
			if after[requestShares(i)] {
				t.Errorf("pruned request %d's %q in the vocabulary", i, requestShares(i))
			}
		}
		checkTrigramIndex(t, f.s)
		// Nothing deleted since: the next prune does not sweep again.
		if sw, err := f.s.tidyVocabulary(ctx); err != nil || sw.slices != 0 {
			t.Errorf("swept again, %d slices (%v)", sw.slices, err)
		}
	}

	find := func(t *testing.T) {
		for _, c := range live {
			for _, part := range c.parts {
				got := f.messages(MessageFilter{Q: part})
				if c.name[0] == 'r' {
					got = f.requests(RequestFilter{Q: part})
				}
				if !slices.Equal(got, []string{c.name}) {
					t.Errorf("q=%s found %v, want %s", part, got, c.name)
				}
			}
		}
		for _, c := range gone {
			for _, part := range c.parts {
				if got := append(f.messages(MessageFilter{Q: part}), f.requests(RequestFilter{Q: part})...); len(got) != 0 {
					t.Errorf("q=%s found %v of pruned %s", part, got, c.name)
				}
			}
		}
	}
	f.bothWays(find)

	// A pruned capture's token comes back: the writer knew it was stored,
	// and must not believe so any more.
	again := f.request("again", NewRequest{Path: "/hooks/" + gone[len(gone)-1].tokens[0]})
	f.message("again-mail", NewMessage{Subject: gone[0].tokens[0]})
	if err := f.s.indexStaged(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.requests(RequestFilter{Q: gone[len(gone)-1].parts[0]}); !slices.Equal(got, []string{"again"}) {
		t.Errorf("a pruned request's token in request %s: found %v", again, got)
	}
	if got := f.messages(MessageFilter{Q: gone[0].parts[0]}); !slices.Equal(got, []string{"again-mail"}) {
		t.Errorf("a pruned message's token in a new message: found %v", got)
	}
}

// TestVocabularySweepInterleaved lets captures in between the slices of a
// sweep: one brings back a term a slice before deleted, one a term a slice
// after is about to check, one has its terms filed over several moves
// while the sweep runs.
func TestVocabularySweepInterleaved(t *testing.T) {
	f := newSearchFixture(t)
	if !f.s.b.vocabulary() {
		t.Skip("PostgreSQL has no vocabulary")
	}
	setVar(t, &sweepTerms, 4)
	ctx := t.Context()
	var path strings.Builder
	path.WriteString("/aaadeadword/zzzdeadword")
	for i := range 20 {
		fmt.Fprintf(&path, "/mmm%02d", i)
	}
	old := f.request("old", NewRequest{Path: path.String()})
	if err := f.s.indexStaged(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.s.DeleteRequest(ctx, f.project.ID, old); err != nil {
		t.Fatal(err)
	}
	// So far the writer filed each of them, and knows them stored.
	slice := func(after string) sweepSlice {
		t.Helper()
		var r sweepSlice
		err := f.s.write(ctx, func(w *wtx) (err error) {
			r, err = w.sweepSlice(after)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := slice("")
	if terms := vocabularyOf(t, f.s); terms["aaadeadword"] || !terms["zzzdeadword"] {
		t.Fatalf("after the first slice (to %q): %v", r.next, slices.Sorted(maps.Keys(terms)))
	}
	f.request("back", NewRequest{Path: "/aaadeadword/zzzdeadword"})
	if err := f.s.indexStaged(ctx); err != nil {
		t.Fatal(err)
	}
	// Too many new terms for one move: filed two at a time, staged until
	// all are.
	setVar(t, &maxTermsPerMove, 2)
	var filed strings.Builder
	for i := range 6 {
		fmt.Fprintf(&filed, " pppfiledword%d", i)
	}
	f.request("filed", NewRequest{Path: "/x", Query: filed.String()})
	err := f.s.write(ctx, func(w *wtx) error {
		_, err := w.moveStaged(requestsStaged)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if f.staged() != 1 || !vocabularyOf(t, f.s)["pppfiledword0"] {
		t.Fatal("the first move did not file part of the row's terms and leave it staged")
	}
	for !r.last {
		r = slice(r.next)
	}
	if err := f.s.indexStaged(ctx); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]string{"aadeadwor": "back", "zzdeadwor": "back", "pfiledword0": "filed", "pfiledword5": "filed"} {
		if got := f.requests(RequestFilter{Q: q}); !slices.Equal(got, []string{want}) {
			t.Errorf("q=%s found %v, want %s", q, got, want)
		}
	}
	checkVocabulary(t, f.s, nil)
	checkTrigramIndex(t, f.s)
}

func TestSweepDue(t *testing.T) {
	for _, c := range []struct {
		mark           sweepMark
		terms, deleted int64
		due            bool
	}{
		{sweepMark{}, 100_000, 0, false},                    // nothing ever deleted
		{sweepMark{}, 100_000, 1, true},                     // the first since open
		{sweepMark{}, sweepMinTerms - 1, 500, false},        // too small to bother
		{sweepMark{true, 40_000, 500}, 100_000, 500, false}, // nothing deleted since
		{sweepMark{true, 40_000, 500}, 49_000, 900, false},  // deleted, but grown too little
		{sweepMark{true, 40_000, 500}, 52_000, 501, true},
	} {
		if got := c.mark.due(c.terms, c.deleted); got != c.due {
			t.Errorf("%+v due(%d, %d) = %v, want %v", c.mark, c.terms, c.deleted, got, c.due)
		}
	}
}

// A sweep on PostgreSQL does nothing: it keeps no vocabulary.
func TestTidyVocabularyPostgres(t *testing.T) {
	f := newSearchFixture(t)
	if f.s.b.vocabulary() {
		t.Skip("SQLite")
	}
	if sw, err := f.s.tidyVocabulary(context.Background()); err != nil || sw.slices != 0 {
		t.Fatalf("%+v, %v", sw, err)
	}
}
