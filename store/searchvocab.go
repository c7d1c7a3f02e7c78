package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The vocabulary's clean-up (SQLite). search_terms gains every new token
// its captures bring and nothing takes a term out when the captures that
// held it are pruned or deleted: webhooks with unique ids at a capture
// cap grew it by 72,000 terms every 18,000 requests while the captures
// stayed at 10,000. A sweep walks the vocabulary in term order, a slice
// of sweepTerms terms per transaction, and deletes the terms no capture
// holds any more.
//
// A term is held when a token of FTS5 (messages_search, requests_search)
// or of a staged row is the term, or, for a term of vocabMaxRunes
// characters, starts with it: exactly what the term stands for in expand.
// FTS5's own vocabulary (fts5vocab) answers for FTS5 by a range read of
// the slice's terms; it leaves out rows deleted from a contentless_delete
// table at once, not at the next merge, and sees the rows the open
// transaction has moved in (TestFTS5VocabSeesDeletes holds SQLite to
// both). Staged rows count as holders, so a row still being filed over
// several transactions (fileTermsOf) keeps its terms.
//
// Each slice runs through the writer, so no capture is written between
// reading what is held and deleting what is not, and it takes the deleted
// terms out of the writer's cache of stored terms: the next capture that
// brings one files it again.

// Variables so that tests can make them small.
var (
	// sweepTerms bounds the vocabulary terms one slice checks, so that
	// ingest queued behind a slice waits a few milliseconds at most: a
	// slice of 256 held the writer 4 ms (median; BenchmarkVocabularySweep),
	// about 15 µs a term, most of it the trigram index's deletes and their
	// merges at commit. Smaller slices cost more commits for the same
	// work.
	sweepTerms = 256
	// sweepMinTerms is the smallest vocabulary worth sweeping.
	sweepMinTerms int64 = 4096
)

// sweepMark is what the writer remembers of its last sweep, to tell when
// the next one pays.
type sweepMark struct {
	swept bool
	// terms is how many terms the sweep kept; deleted is captures
	// deleted ever (vocabularyStateQuery) when it began.
	terms, deleted int64
}

// due reports whether a sweep pays, with terms in the vocabulary and
// deleted captures deleted ever. Only a deleted capture leaves terms
// nobody holds; a sweep costs the whole vocabulary, so after the first
// (which finds what earlier runs left) it waits for the vocabulary to grow
// by a quarter: its cost is then a few terms' worth per term filed, and
// the vocabulary stays within about 5/4 of what the captures hold.
func (m sweepMark) due(terms, deleted int64) bool {
	if terms < sweepMinTerms || deleted <= m.deleted {
		return false
	}
	return !m.swept || terms >= m.terms+m.terms/4+sweepMinTerms/4
}

// vocabularyStateQuery reads the vocabulary's size and the captures
// deleted ever: every capture took the next seq, and the counters hold
// those still stored. (A seq taken again after the newest capture went is
// missed, which only delays a sweep.)
const vocabularyStateQuery = `SELECT (SELECT count(*) FROM search_terms),
	coalesce((SELECT max(seq) FROM messages), 0) + coalesce((SELECT max(seq) FROM requests), 0)
	- coalesce((SELECT sum(message_count) FROM inboxes), 0) - coalesce((SELECT sum(request_count) FROM endpoints), 0)`

// vocabularySweep is one sweep's progress and outcome.
type vocabularySweep struct {
	// force sweeps whether or not it pays (tests, benchmarks).
	force bool
	// terms and deleted are the vocabulary's state before the sweep
	// (vocabularyStateQuery).
	terms, deleted int64
	// after is the last term checked; the next slice starts past it.
	after string
	// kept and removed count terms, slices the writes; longest is the
	// longest a slice's work took in its transaction, writes how long
	// each slice's write took from queueing to commit.
	kept, removed int64
	slices        int
	longest       time.Duration
	writes        []time.Duration
}

// tidyVocabulary sweeps the vocabulary when that pays (sweepMark.due);
// the pruner calls it.
func (s *Store) tidyVocabulary(ctx context.Context) (vocabularySweep, error) {
	sw := vocabularySweep{}
	if !s.b.vocabulary() {
		return sw, nil // PostgreSQL keeps no vocabulary
	}
	if err := s.queryRow(ctx, vocabularyStateQuery).Scan(&sw.terms, &sw.deleted); err != nil {
		return sw, fmt.Errorf("search vocabulary: %w", err)
	}
	err := s.sweepVocabulary(ctx, &sw)
	return sw, err
}

// sweepVocabulary checks every term of the vocabulary, slice by slice,
// each slice a write of its own. Unless sw.force, the first slice begins
// only if the writer's sweepMark finds the sweep due. After each slice it
// leaves the writer to others for as long as the slice's work took, so
// that a sweep takes about half of it at most however busy ingest is:
// queued back to back, the slices would join nearly every batch of
// captures, and a capture would wait for one or two of them.
func (s *Store) sweepVocabulary(ctx context.Context, sw *vocabularySweep) error {
	for {
		var r sweepSlice
		skipped := false
		start := time.Now()
		err := s.write(ctx, func(t *wtx) error {
			v := t.w.vocab
			if sw.slices == 0 && !sw.force && !v.mark.due(sw.terms, sw.deleted) {
				skipped = true
				return nil
			}
			var err error
			if r, err = t.sweepSlice(sw.after); err != nil {
				return err
			}
			if r.last {
				v.mark = sweepMark{swept: true, terms: sw.kept + r.kept, deleted: sw.deleted}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("search vocabulary: %w", err)
		}
		if skipped {
			return nil
		}
		took := time.Since(start)
		sw.slices++
		sw.kept += r.kept
		sw.removed += r.removed
		sw.longest = max(sw.longest, r.took)
		sw.writes = append(sw.writes, took)
		if r.last {
			return nil
		}
		sw.after = r.next
		pause := time.NewTimer(r.took)
		select {
		case <-pause.C:
		case <-ctx.Done():
			pause.Stop()
			return ctx.Err()
		}
	}
}

// sweepSlice is what one slice did.
type sweepSlice struct {
	kept, removed int64
	// next is the last term checked; last says it was the vocabulary's.
	next string
	last bool
	took time.Duration
}

// sweepSlice deletes, of the sweepTerms terms after after, those nothing
// holds.
func (t *wtx) sweepSlice(after string) (sweepSlice, error) {
	start := time.Now()
	var r sweepSlice
	type term struct {
		id   int64
		term string
	}
	rows, err := t.query(`SELECT id, term FROM search_terms WHERE term > ? ORDER BY term LIMIT ?`, after, sweepTerms)
	if err != nil {
		return r, err
	}
	var terms []term
	for rows.Next() {
		var tm term
		if err := rows.Scan(&tm.id, &tm.term); err != nil {
			rows.Close()
			return r, err
		}
		terms = append(terms, tm)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return r, err
	}
	r.last = len(terms) < sweepTerms
	if len(terms) == 0 {
		r.took = time.Since(start)
		return r, nil
	}
	r.next = terms[len(terms)-1].term
	unheld := make(map[string]bool, len(terms))
	for _, tm := range terms {
		unheld[tm.term] = true
	}
	// Every token whose term is in the slice sorts from its first term
	// to past its last: a term is a prefix of its token, and no token
	// holds U+10FFFF, a noncharacter.
	lo, hi := terms[0].term, r.next+"\U0010FFFF"
	held := func(tok string) {
		if term, ok := vocabularyTerm(tok); ok {
			delete(unheld, term)
		}
	}
	for _, ix := range stagedIndexes {
		if err := t.eachIndexToken(ix, lo, hi, held); err != nil {
			return r, err
		}
	}
	var dead []int64
	v := t.w.vocab
	for _, tm := range terms {
		if unheld[tm.term] {
			dead = append(dead, tm.id)
			// Not stored once this commits; were it rolled back, the
			// cache only misses a term it would file again for nothing.
			delete(v.cur, tm.term)
			delete(v.prev, tm.term)
		}
	}
	r.kept, r.removed = int64(len(terms)-len(dead)), int64(len(dead))
	if len(dead) > 0 {
		ids, err := json.Marshal(dead)
		if err != nil {
			return r, err
		}
		// The trigram index has the terms' text as external content: it
		// takes an entry out given the text it was indexed with.
		if _, err := t.exec(`INSERT INTO search_terms_trigram (search_terms_trigram, rowid, term)
			SELECT 'delete', id, term FROM search_terms WHERE id IN (SELECT value FROM json_each(?))`, string(ids)); err != nil {
			return r, err
		}
		if _, err := t.exec(`DELETE FROM search_terms WHERE id IN (SELECT value FROM json_each(?))`, string(ids)); err != nil {
			return r, err
		}
	}
	r.took = time.Since(start)
	return r, nil
}

// eachIndexToken calls fn with every token of staged index ix, in FTS5
// from lo up to hi, in its staged rows all of them.
func (t *wtx) eachIndexToken(ix stagedIndex, lo, hi string, fn func(tok string)) error {
	vocab := "temp." + ix.fts + "_vocab"
	if _, err := t.exec(`CREATE VIRTUAL TABLE IF NOT EXISTS ` + vocab + ` USING fts5vocab(main, ` + ix.fts + `, row)`); err != nil {
		return err
	}
	rows, err := t.query(`SELECT term FROM `+vocab+` WHERE term >= ? AND term < ?`, lo, hi)
	if err != nil {
		return err
	}
	for rows.Next() {
		var tok string
		if err := rows.Scan(&tok); err != nil {
			rows.Close()
			return err
		}
		fn(tok)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if rows, err = t.query(`SELECT tokens FROM ` + ix.staged); err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var tokens string
		if err := rows.Scan(&tokens); err != nil {
			return err
		}
		for tok := range strings.SplitSeq(tokens, " ") {
			fn(tok)
		}
	}
	return rows.Err()
}
