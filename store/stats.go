package store

import (
	"context"
	"time"
)

// CaptureKind says what a write stored.
type CaptureKind uint8

const (
	NotACapture CaptureKind = iota
	EmailCapture
	WebhookCapture
)

func (k CaptureKind) String() string {
	switch k {
	case EmailCapture:
		return "email"
	case WebhookCapture:
		return "webhook"
	}
	return "other"
}

// Observer hears about every commit, on the writer's goroutine right after
// the commit: it must be quick, and it must not call the store.
type Observer interface {
	// BatchCommitted: one group commit of ops operations.
	BatchCommitted(ops int)
	// CaptureCommitted: one capture committed into a collection (inbox or
	// endpoint id), queued for that long before its commit ended.
	CaptureCommitted(kind CaptureKind, collectionID string, queued time.Duration)
}

// observer holds the Observer for an atomic swap while the writer runs.
type observer struct{ Observer }

// SetObserver makes o hear about every commit from now on; nil stops it.
func (s *Store) SetObserver(o Observer) {
	if o == nil {
		s.observer.Store(nil)
		return
	}
	s.observer.Store(&observer{o})
}

// Captured is how many captures this process has committed since it
// opened the store.
func (s *Store) Captured() uint64 { return s.captured.Load() }

// observeCommit counts a committed batch's captures and tells the
// observer about them.
func (s *Store) observeCommit(batch []*writeOp) {
	var n uint64
	for _, op := range batch {
		switch {
		case op.request != nil:
			n++
		case op.capture != NotACapture:
			n += uint64(len(op.collections))
		}
	}
	s.captured.Add(n)
	o := s.observer.Load()
	if o == nil {
		return
	}
	now := time.Now()
	o.BatchCommitted(len(batch))
	for _, op := range batch {
		switch {
		case op.request != nil:
			o.CaptureCommitted(WebhookCapture, op.request.endpointID, now.Sub(op.queued))
		default:
			for _, c := range op.collections {
				o.CaptureCommitted(op.capture, c, now.Sub(op.queued))
			}
		}
	}
}

// Ping commits a real, tiny write through the writer, as every capture is
// committed: it fails when the database cannot take writes. Like every
// write, it ends when committed whatever ctx says once queued; a caller
// that must answer in time waits for it on the side.
func (s *Store) Ping(ctx context.Context) error {
	return s.write(ctx, func(t *wtx) error {
		// A row added and taken away again leaves the table as it was but
		// its page written (an update to the same value would be skipped),
		// so the commit writes the WAL as a capture's does.
		if _, err := t.exec(`INSERT INTO schema_version (version) VALUES (-1)`); err != nil {
			return err
		}
		_, err := t.exec(`DELETE FROM schema_version WHERE version = -1`)
		return err
	})
}

// CollectionProjects maps every inbox and endpoint id to its project id.
func (s *Store) CollectionProjects(ctx context.Context) (map[string]string, error) {
	rows, err := s.query(ctx, `SELECT id, project_id FROM inboxes UNION ALL SELECT id, project_id FROM endpoints`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, project string
		if err := rows.Scan(&id, &project); err != nil {
			return nil, err
		}
		out[id] = project
	}
	return out, rows.Err()
}

// FileSizes are the sizes in bytes of the database on disk and of its
// write-ahead log (0 when there is none, or on PostgreSQL, which keeps its
// log to itself).
func (s *Store) FileSizes() (db, wal int64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.b.sizes(ctx)
}
