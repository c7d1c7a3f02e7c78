package store

import (
	"context"
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
	// behind it wait for one short transaction at most.
	indexChunk = 128
	// vocabCacheSize bounds each of the two generations of terms the
	// writer knows are in search_terms: common words then cost no
	// statement at all. At 1<<15 the two took 6 MiB of a 13 MiB live
	// heap after 200,000 messages, which the collector's GOGC of 400
	// made 30 MiB of RSS; a word in use stays in the newer generation.
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

// stagedIndexes are the staged tables and the FTS5 tables they move to.
var stagedIndexes = [][2]string{{"messages_search_staged", "messages_search"}, {"requests_search_staged", "requests_search"}}

// indexStaged moves every staged row into FTS5, in transactions of at most
// indexChunk rows of each table.
func (s *Store) indexStaged(ctx context.Context) error {
	if s.b.indexTable("messages_search") == "messages_search" {
		return nil // PostgreSQL stages nothing
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
			for _, ix := range stagedIndexes {
				n, err := t.moveStaged(ix[0], ix[1])
				if err != nil {
					return err
				}
				more = more || n == indexChunk
			}
			return nil
		})
		if err != nil || !more {
			return err
		}
	}
}

// moveStaged moves the oldest indexChunk rows of staged into fts, and
// queues their tokens for the vocabulary (flushTerms).
func (t *wtx) moveStaged(staged, fts string) (int, error) {
	rows, err := t.query(`SELECT seq, tokens FROM `+staged+` ORDER BY seq LIMIT ?`, indexChunk)
	if err != nil {
		return 0, err
	}
	var n int
	var last int64
	for rows.Next() {
		var tokens string
		if err := rows.Scan(&last, &tokens); err != nil {
			rows.Close()
			return 0, err
		}
		n++
		t.w.vocab.addTokens(tokens)
	}
	rows.Close()
	if err := rows.Err(); err != nil || n == 0 {
		return 0, err
	}
	if _, err := t.exec(`INSERT INTO `+fts+` (rowid, tokens) SELECT seq, tokens FROM `+staged+` WHERE seq <= ?`, last); err != nil {
		return 0, err
	}
	_, err = t.exec(`DELETE FROM `+staged+` WHERE seq <= ?`, last)
	return n, err
}

// vocabulary is the writer's view of search_terms: the terms it knows are
// stored, and those the open transaction adds. Only the writer goroutine
// uses it.
type vocabulary struct {
	// cur and prev are two generations of known terms: when cur is full
	// it becomes prev, so a term in use stays known and memory is bounded.
	cur, prev map[string]struct{}
	pending   map[string]struct{}
}

func newVocabulary() *vocabulary {
	return &vocabulary{cur: map[string]struct{}{}, prev: map[string]struct{}{}, pending: map[string]struct{}{}}
}

// addTokens queues the vocabulary terms of a row's tokens (searchTokens).
func (v *vocabulary) addTokens(tokens string) {
	for tok := range strings.SplitSeq(tokens, " ") {
		if term, ok := vocabularyTerm(tok); ok {
			v.add(term)
		}
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
	v.pending[term] = struct{}{}
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
}

// forget drops what a failed transaction queued.
func (v *vocabulary) forget() { clear(v.pending) }

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
