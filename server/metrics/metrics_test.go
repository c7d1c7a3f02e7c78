package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/capturedev/capture/store"
)

type noStore struct{}

func (noStore) CollectionProjects(context.Context) (map[string]string, error) { return nil, nil }
func (noStore) FileSizes() (int64, int64, error)                              { return 0, 0, nil }

// What the writer calls on every commit allocates nothing once a
// collection has been seen: ingest pays a few atomic adds.
func TestCommitPathDoesNotAllocate(t *testing.T) {
	m := New(Config{Store: noStore{}})
	m.CaptureCommitted(store.WebhookCapture, "whe_1", time.Millisecond)
	allocs := testing.AllocsPerRun(1000, func() {
		m.BatchCommitted(3)
		m.CaptureCommitted(store.WebhookCapture, "whe_1", time.Millisecond)
		m.CaptureCommitted(store.EmailCapture, "whe_1", 2*time.Millisecond)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per commit, want 0", allocs)
	}
}

func BenchmarkCaptureCommitted(b *testing.B) {
	m := New(Config{Store: noStore{}})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.CaptureCommitted(store.WebhookCapture, "whe_1", time.Millisecond)
		}
	})
}
