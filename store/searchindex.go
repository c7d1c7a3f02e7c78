package store

import (
	"context"
	"hash/maphash"
	"strings"
	"time"
)

// The write side of search: the writer stages each capture's tokens in the
// transaction that stores the capture; indexStaged moves staged rows into
// FTS5 in batches, and adds their new tokens to the vocabulary in the same
// transaction, so the vocabulary always covers what FTS5 holds.

const (
	// indexInterval is how often staged rows move into FTS5; a search
	// reads the staged ones directly, so this bounds only how many it
	// may have to read.
	indexInterval = 200 * time.Millisecond
	// indexChunk bounds the rows one move takes, so captures queued
	// behind it wait for one short transaction at most (moveTokenBytes
	// bounds it too, for rows with many tokens). Each move leaves FTS5
	// one segment, which its merges then rewrite level by level: moves
	// of 512 small webhooks instead of 128 cost the writer about 5% less
	// per capture (BenchmarkInsertRequestParallel1KiB).
	indexChunk = 512
	// vocabCacheSize bounds each of the two generations of terms the
	// writer knows are in search_terms: common words then cost no
	// statement at all. At 1<<15 the two took 6 MiB of a 13 MiB live
	// heap after 200,000 messages, which a GOGC of 400 made 30 MiB
	// of RSS; a word in use stays in the newer generation.
	vocabCacheSize = 1 << 13
)

// indexMessage stages a stored message's tokens (on PostgreSQL, indexes
// them).
func (t *wtx) indexMessage(seq int64, tokens string) error {
	_, err := t.exec(`INSERT INTO `+t.b.indexTable("messages_search")+` (seq, tokens) VALUES (?, ?)`, seq, tokens)
	return err
}

// indexLoop moves staged rows into FTS5 in the background.
func (s *Store) indexLoop(interval time.Duration) {
	s.every(interval, s.indexDone, func() {
		// A move that fails leaves the rows staged, where searches still
		// find them; the next tick tries again.
		s.indexStaged(context.Background())
	})
}

// stagedIndex is a staging table and the FTS5 table its rows move to.
type stagedIndex struct{ staged, fts string }

// stagedIndexes are the staged tables, in the order of messagesStaged and
// requestsStaged.
var stagedIndexes = [...]stagedIndex{
	messagesStaged: {"messages_search_staged", "messages_search"},
	requestsStaged: {"requests_search_staged", "requests_search"},
}

// The staged tables, by their place in stagedIndexes.
const (
	messagesStaged = iota
	requestsStaged
)

// indexStaged moves every staged row into FTS5, in transactions each as
// bounded as moveStaged makes them, checkpointing between them (walRoom).
func (s *Store) indexStaged(ctx context.Context) error {
	if s.b.indexTable("messages_search") == "messages_search" {
		return nil // PostgreSQL stages nothing
	}
	if b, ok := s.b.(*sqliteDB); ok && !b.reserve.room() {
		return nil // the disk is full: moves would take the room deletions need
	}
	// An idle store looks without taking the writer.
	var staged bool
	if err := s.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM messages_search_staged)
		OR EXISTS (SELECT 1 FROM requests_search_staged)`).Scan(&staged); err != nil || !staged {
		return err
	}
	for {
		more := false
		err := s.write(ctx, func(t *wtx) error {
			for ix := range stagedIndexes {
				m, err := t.moveStaged(ix)
				if err != nil {
					return err
				}
				more = more || m
			}
			return nil
		})
		if err != nil || !more {
			return err
		}
		if b, ok := s.b.(*sqliteDB); ok && !b.walRoom() {
			return nil // the next tick goes on
		}
	}
}

// A move holds the writer, and every capture queued behind it, so what
// one transaction takes is bounded by what it costs: about 1 µs per token
// into FTS5 and 10 µs per new vocabulary term (a row, and a trigram index
// entry per character). A body of random words (a 1 MiB field is about
// 110,000 new terms) would otherwise hold every capture for seconds.
const (
	// moveTokenBytes bounds the tokens one move takes into FTS5, unless
	// the first row alone has more.
	moveTokenBytes = 128 << 10
)

// maxTermsPerMove bounds the new vocabulary terms one move files; a
// variable so tests can make it small.
var maxTermsPerMove = 1024

// stagedRow is a staged index row.
type stagedRow struct {
	seq    int64
	tokens string
}

// moveStaged moves the oldest rows of staged table ix into FTS5, at most
// indexChunk of them and about moveTokenBytes of tokens, and queues their
// new terms for the vocabulary (flushTerms). A row with more new terms
// than maxTermsPerMove moves alone, once its terms have been filed over as
// many transactions as they need; until it moves, searches read it from
// staged. more reports rows left behind.
func (t *wtx) moveStaged(ix int) (more bool, err error) {
	staged, fts := stagedIndexes[ix].staged, stagedIndexes[ix].fts
	rows, err := t.query(`SELECT seq, tokens FROM `+staged+` ORDER BY seq LIMIT ?`, indexChunk)
	if err != nil {
		return false, err
	}
	var batch []stagedRow
	size := 0
	for rows.Next() {
		var r stagedRow
		if err := rows.Scan(&r.seq, &r.tokens); err != nil {
			rows.Close()
			return false, err
		}
		batch = append(batch, r)
		if size += len(r.tokens); size >= moveTokenBytes {
			break
		}
	}
	more = len(batch) == indexChunk || size >= moveTokenBytes
	rows.Close()
	if err := rows.Err(); err != nil || len(batch) == 0 {
		return false, err
	}
	v := t.w.vocab
	n := 0
	for _, r := range batch {
		if v.filing[ix].seq != r.seq {
			added, ok := v.addTokens(r.tokens, maxTermsPerMove)
			if ok {
				n++
				continue
			}
			v.unqueue(added)
		}
		if n > 0 {
			more = true
			break // the rows before it move now, it next time
		}
		filed, err := t.fileTermsOf(ix, r)
		if err != nil || !filed {
			return true, err
		}
		n++
		more = more || len(batch) > 1 // it moves alone
		break
	}
	last := batch[n-1].seq
	if _, err := t.exec(`INSERT INTO `+fts+` (rowid, tokens) SELECT seq, tokens FROM `+staged+` WHERE seq <= ?`, last); err != nil {
		return false, err
	}
	_, err = t.exec(`DELETE FROM `+staged+` WHERE seq <= ?`, last)
	return more, err
}

// fileTermsOf files the next maxTermsPerMove vocabulary terms of a row too
// large for one move, and reports whether all of them are now filed. The
// terms go in the order of the row's tokens, so where the last slice ended
// in them is where the next transaction resumes; a restart begins the row
// again, which INSERT OR IGNORE makes harmless.
func (t *wtx) fileTermsOf(ix int, r stagedRow) (bool, error) {
	v := t.w.vocab
	from := 0
	sum := maphash.String(v.seed, r.tokens)
	if f := v.filing[ix]; f.seq == r.seq && f.sum == sum {
		from = f.offset
	}
	rest := r.tokens[from:]
	var terms []any
	for len(rest) > 0 && len(terms) < maxTermsPerMove {
		tok, after, _ := strings.Cut(rest, " ")
		if term, ok := vocabularyTerm(tok); ok {
			terms = append(terms, term)
		}
		rest = after
	}
	if err := t.insertTerms(terms); err != nil {
		return false, err
	}
	v.filingNext[ix] = filing{seq: r.seq, sum: sum, offset: len(r.tokens) - len(rest)}
	return len(rest) == 0, nil
}

// vocabulary is the writer's view of search_terms: the terms it knows are
// stored, and those the open transaction adds. Only the writer goroutine
// uses it.
type vocabulary struct {
	// cur and prev are two generations of known terms: when cur is full
	// it becomes prev, so a term in use stays known and memory is bounded.
	cur, prev map[string]struct{}
	pending   map[string]struct{}
	// added is what the last addTokens queued, so that a row held back
	// can take its terms out again.
	added []string
	// filing is, for each staged table (the two move in one transaction,
	// and their seqs are apart), how far the terms of its row too large
	// for one move have been filed; filingNext is what the open
	// transaction makes of it.
	filing, filingNext [len(stagedIndexes)]filing
	seed               maphash.Seed
	// mark is what the last sweep of the vocabulary left (searchvocab.go).
	mark sweepMark
}

// filing is a row whose terms are filed over several transactions: those
// of its tokens before offset (a byte offset in its token list) are in
// search_terms. sum is a hash of the token list: a seq names another row
// once the newest capture is deleted and the next one takes its seq.
type filing struct {
	seq    int64
	sum    uint64
	offset int
}

func newVocabulary() *vocabulary {
	return &vocabulary{cur: map[string]struct{}{}, prev: map[string]struct{}{}, pending: map[string]struct{}{},
		seed: maphash.MakeSeed()}
}

// addTokens queues the vocabulary terms of a row's tokens (searchTokens)
// and returns those it queued; it stops, and reports false, once more
// than limit terms are queued in all.
func (v *vocabulary) addTokens(tokens string, limit int) (added []string, ok bool) {
	v.added = v.added[:0]
	for tok := range strings.SplitSeq(tokens, " ") {
		if term, ok := vocabularyTerm(tok); ok {
			v.add(term)
			if len(v.pending) > limit {
				return v.added, false
			}
		}
	}
	return v.added, true
}

// unqueue takes back terms addTokens queued.
func (v *vocabulary) unqueue(terms []string) {
	for _, t := range terms {
		delete(v.pending, t)
	}
}

// add queues term for the open transaction unless it is known to be
// stored already.
func (v *vocabulary) add(term string) {
	if _, ok := v.cur[term]; ok {
		return
	}
	if _, ok := v.prev[term]; ok {
		delete(v.prev, term)
		v.remember(term)
		return
	}
	if _, ok := v.pending[term]; !ok {
		v.pending[term] = struct{}{}
		v.added = append(v.added, term)
	}
}

// remember keeps a copy of term: a term is a slice of a capture's whole
// token list, which the cache must not keep alive.
func (v *vocabulary) remember(term string) {
	if len(v.cur) >= vocabCacheSize {
		v.prev, v.cur = v.cur, make(map[string]struct{}, vocabCacheSize)
	}
	v.cur[strings.Clone(term)] = struct{}{}
}

// committed remembers what the transaction that just committed stored.
func (v *vocabulary) committed() {
	for t := range v.pending {
		v.remember(t)
	}
	clear(v.pending)
	v.filing = v.filingNext
}

// forget drops what a failed transaction queued.
func (v *vocabulary) forget() {
	clear(v.pending)
	v.filingNext = v.filing
}

// flushTerms stores the queued terms search_terms lacks; a trigger indexes
// them by trigram.
func (t *wtx) flushTerms() error {
	v := t.w.vocab
	if len(v.pending) == 0 {
		return nil
	}
	terms := make([]any, 0, len(v.pending))
	for term := range v.pending {
		terms = append(terms, term)
	}
	return t.insertTerms(terms)
}

// insertTerms adds terms to search_terms, those it lacks.
func (t *wtx) insertTerms(terms []any) error {
	for len(terms) > 0 {
		n := min(len(terms), maxRowsPerInsert)
		if _, err := t.exec(`INSERT OR IGNORE INTO search_terms (term) VALUES `+
			strings.TrimSuffix(strings.Repeat("(?), ", n), ", "), terms[:n]...); err != nil {
			return err
		}
		terms = terms[n:]
	}
	return nil
}
