package store

import (
	"sync"
	"testing"
	"time"

	"github.com/capturedev/capture/store/pgtest"
)

// While PostgreSQL does not answer at all (every process of it stopped,
// as a hung server or a network partition looks), a read fails as
// unavailable at its bound rather than holding its caller without limit,
// saying that the database did not answer; a write nothing committed says
// the same, not a SQLite cause. Once the server answers again, every read
// and write goes through: no connection cut off at the bound is handed
// out again.
func TestUnresponsiveDatabaseIsUnavailable(t *testing.T) {
	if !pgtest.Requested() {
		t.Skip("PostgreSQL only: a stopped SQLite disk cannot be stood in for")
	}
	own := pgtest.Private(t)
	const bound = 300 * time.Millisecond
	s, err := OpenPostgres(t.Context(), own.URL, WithReadTimeout(bound))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	p := mustProject(t, s, "p", "free")
	if _, err := s.Project(ctx, p.ID); err != nil {
		t.Fatal(err)
	}

	// More reads at once than the pool has connections: some wait for
	// one, the others wait on the database.
	reads := func() []error {
		errs := make([]error, 24)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() { _, errs[i] = s.Project(ctx, p.ID) })
		}
		wg.Wait()
		return errs
	}
	own.Freeze(t)
	for i, err := range reads() {
		if !IsUnavailable(err) || Why(err) != "the database did not answer within "+bound.String() {
			t.Errorf("read %d of a database that does not answer: %v (why %q), want unavailable", i, err, Why(err))
		}
	}
	if err := s.Ping(ctx); !IsUnavailable(err) || Why(err) != noAnswer {
		t.Errorf("write to a database that does not answer: %v (why %q), want %q", err, Why(err), noAnswer)
	}

	own.Thaw(t)
	for i, err := range reads() {
		if err != nil {
			t.Errorf("read %d once the database answers again: %v", i, err)
		}
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("write once the database answers again: %v", err)
	}
}
