package store

import (
	"errors"
	"sync"
	"testing"
	"time"
)

type commits struct {
	mu       sync.Mutex
	batches  []int
	captures []string // kind:collection
	queued   []time.Duration
}

func (c *commits) BatchCommitted(ops int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batches = append(c.batches, ops)
}

func (c *commits) CaptureCommitted(kind CaptureKind, collectionID string, queued time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.captures = append(c.captures, kind.String()+":"+collectionID)
	c.queued = append(c.queued, queued)
}

// The observer hears of each commit and each capture in it, by kind and
// collection, with how long it waited; other writes are batches only.
func TestObserverHearsCommits(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	p := mustProject(t, s, "p", "free")
	e, _ := s.CreateEndpoint(ctx, p.ID, "e", nil)
	in, err := s.CreateInbox(ctx, p.ID, "i")
	if err != nil {
		t.Fatal(err)
	}
	var c commits
	s.SetObserver(&c)
	insertRequests(t, s, e.ID, "/a")
	if _, err := s.InsertMessage(ctx, &NewMessage{InboxID: in.ID, ReceivedAt: time.Now(), Subject: "s", Raw: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateEndpoint(ctx, p.ID, "not a capture", nil); err != nil {
		t.Fatal(err)
	}
	s.SetObserver(nil)
	insertRequests(t, s, e.ID, "/unheard")

	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.batches) != 3 || c.batches[0] != 1 {
		t.Errorf("batches %v, want three of one operation", c.batches)
	}
	want := []string{"webhook:" + e.ID, "email:" + in.ID}
	if len(c.captures) != 2 || c.captures[0] != want[0] || c.captures[1] != want[1] {
		t.Errorf("captures %v, want %v", c.captures, want)
	}
	for _, q := range c.queued {
		if q <= 0 || q > time.Minute {
			t.Errorf("queued %s", q)
		}
	}
}

func TestPingAndSizes(t *testing.T) {
	s := newStore(t)
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	db, wal, err := s.FileSizes()
	// PostgreSQL keeps its write-ahead log to itself.
	if err != nil || db == 0 || (wal == 0) != s.Shared() {
		t.Errorf("FileSizes = %d, %d, %v; want both above zero after a write", db, wal, err)
	}
	p := mustProject(t, s, "p", "free")
	e, _ := s.CreateEndpoint(t.Context(), p.ID, "e", nil)
	owners, err := s.CollectionProjects(t.Context())
	if err != nil || owners[e.ID] != p.ID {
		t.Errorf("CollectionProjects = %v, %v", owners, err)
	}
	s.Close()
	if err := s.Ping(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("Ping after Close = %v, want ErrClosed", err)
	}
}
