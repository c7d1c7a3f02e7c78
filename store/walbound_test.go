package store

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// uniqueIDsBody is a webhook body of n records, each with ids no other
// record has: every one adds new terms to the search vocabulary.
func uniqueIDsBody(seed, n int) []byte {
	var b strings.Builder
	b.WriteString(`{"records":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"%s-%s","customer":"cus_%s","amount":%d}`,
			hexOf("id", seed*n+i, 8), hexOf("uuid", seed*n+i, 24), hexOf("cus", seed*n+i, 14), i*7)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// TestIndexMovesKeepWALBounded moves into the search index the captures
// of webhooks full of unique ids, whose new terms cost each move megabytes
// of WAL, and checks that the WAL stays near restartFrames rather than
// growing by every move made back to back (SPEC §13: the WAL stays
// bounded). Scaled down: a 256 KiB restart point, moves of 128 new terms.
func TestIndexMovesKeepWALBounded(t *testing.T) {
	sqliteOnly(t, "PostgreSQL stages nothing")
	setVar(t, &restartFrames, 64)
	setVar(t, &maxTermsPerMove, 128)
	f := newSearchFixture(t)
	s := f.s
	b := s.b.(*sqliteDB)
	const hooks = 5
	for i := range hooks {
		if _, err := s.InsertRequest(t.Context(), &NewRequest{EndpointID: f.endpoint.ID, ReceivedAt: time.Now(),
			Method: "POST", Path: "/hook", ContentType: "application/json", Body: uniqueIDsBody(i, 100)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := b.checkpoint("TRUNCATE"); err != nil {
		t.Fatal(err)
	}
	// The WAL's size before each commit, the moves' included: the file
	// only grows until the WAL is truncated, so its size is its peak.
	var peak atomic.Int64
	walSize := func() {
		if fi, err := os.Stat(b.path + "-wal"); err == nil && fi.Size() > peak.Load() {
			peak.Store(fi.Size())
		}
	}
	var moves atomic.Int64
	count := func() { walSize(); moves.Add(1) }
	s.beforeCommit.Store(&count)
	for f.staged() > 0 {
		if err := s.indexStaged(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	walSize()
	s.beforeCommit.Store(nil)
	const bound = 512 << 10
	t.Logf("%d moves, WAL peak %.1f MiB", moves.Load(), float64(peak.Load())/(1<<20))
	if peak.Load() > bound {
		t.Errorf("the WAL reached %.1f MiB over %d moves, past %d KiB", float64(peak.Load())/(1<<20), moves.Load(), bound>>10)
	}
	// Every capture is still found by its ids.
	for _, i := range []int{0, hooks / 2, hooks - 1} {
		q := hexOf("uuid", i*100+3, 24)
		page, err := s.Requests(t.Context(), f.endpoint.ID, RequestFilter{Q: q}, Page{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != 1 {
			t.Errorf("search %s found %d requests, want 1", q, len(page.Items))
		}
	}
}
