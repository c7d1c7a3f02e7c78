package metrics

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/store"
)

// stalledStore is a database that does not answer until released.
type stalledStore struct{ released chan struct{} }

func (s stalledStore) CollectionProjects(ctx context.Context) (map[string]string, error) {
	select {
	case <-s.released:
	case <-ctx.Done():
	}
	return nil, ctx.Err()
}

func (s stalledStore) FileSizes() (int64, int64, error) {
	<-s.released
	return 1 << 20, 0, nil
}

// A scrape while the database does not answer is answered once its read
// is given up, without the sizes it could not read (not as 0, a real
// drop to Prometheus), and with everything else.
func TestScrapeOfAStalledDatabase(t *testing.T) {
	st := stalledStore{released: make(chan struct{})}
	m := New(Config{Store: st})
	m.CaptureCommitted(store.WebhookCapture, "whe_1", time.Millisecond)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()        // which waits for the scrape: after
	defer close(st.released) // the database answers

	type answer struct {
		body string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.Get(srv.URL)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- answer{string(b), err}
	}()
	var a answer
	select {
	case a = <-got:
	case <-time.After(30 * time.Second): // a bound on the test only
		t.Fatal("the scrape waited for the database")
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	for _, gone := range []string{"capture_database_size_bytes", "capture_wal_size_bytes"} {
		if strings.Contains(a.body, gone) {
			t.Errorf("a scrape reported %s, which it could not read", gone)
		}
	}
	if !strings.Contains(a.body, `capture_captures_total{kind="webhook",project="unknown"} 1`) {
		t.Errorf("the scrape lost what did not need the database:\n%s", a.body)
	}
}
