package store

import (
	"fmt"
	"sync"
	"testing"
)

// A purge deletes in chunks, each its own transaction, so captures are
// written between them; it deletes what the collection held when it began
// and nothing of another collection, and the counter stays the count.
func TestPurgeInChunks(t *testing.T) {
	// The index mover's commits would count among the purge's.
	s := newStoreIndexedByHand(t)
	ctx := t.Context()
	p := mustProject(t, s, "p", "team")
	e, _ := s.CreateEndpoint(ctx, p.ID, "e", nil)
	other, _ := s.CreateEndpoint(ctx, p.ID, "other", nil)
	const held = purgeChunk*2 + purgeChunk/2
	fill := func() {
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < held; i += 8 {
					if _, err := s.InsertRequest(ctx, &NewRequest{EndpointID: e.ID, Method: "POST", Path: fmt.Sprintf("/%d", i)}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	kept := insertRequests(t, s, other.ID, "/a", "/b")

	fill()
	before := s.commits.Load()
	if err := s.PurgeEndpoint(ctx, p.ID, e.ID); err != nil {
		t.Fatal(err)
	}
	if n := s.commits.Load() - before; n != 3 {
		t.Errorf("%d rows purged in %d commits, want one per chunk of %d", held, n, purgeChunk)
	}

	// Captures keep arriving while a purge runs.
	fill()
	var wg sync.WaitGroup
	arriving := make(chan struct{})
	wg.Go(func() {
		defer close(arriving)
		for i := range 50 {
			if _, err := s.InsertRequest(ctx, &NewRequest{EndpointID: e.ID, Method: "POST", Path: fmt.Sprintf("/during/%d", i)}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	if err := s.PurgeEndpoint(ctx, p.ID, e.ID); err != nil {
		t.Fatal(err)
	}
	<-arriving
	wg.Wait()

	var rows int64
	s.queryRow(ctx, `SELECT count(*) FROM requests WHERE endpoint_id = ?`, e.ID).Scan(&rows)
	got, _ := s.Endpoint(ctx, p.ID, e.ID)
	if got.RequestCount != rows || rows > 50 {
		t.Errorf("after the purge: counter %d, %d rows (at most the 50 that arrived during it)", got.RequestCount, rows)
	}
	var old int64
	s.queryRow(ctx, `SELECT count(*) FROM requests WHERE endpoint_id = ? AND path NOT LIKE '/during/%'`, e.ID).Scan(&old)
	if old != 0 {
		t.Errorf("%d requests from before the purge left", old)
	}
	l, _ := s.Requests(ctx, other.ID, RequestFilter{}, Page{})
	if o, _ := s.Endpoint(ctx, p.ID, other.ID); len(l.Items) != len(kept) || o.RequestCount != int64(len(kept)) {
		t.Errorf("the other endpoint: %d items, counter %d", len(l.Items), o.RequestCount)
	}
}
