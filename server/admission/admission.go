// Package admission bounds the memory that ingest holds at once. Work
// whose memory grows with its input (a webhook body being read and stored,
// an SMTP message being read, parsed and stored) reserves that many bytes
// from one shared budget first; when the budget is spent, new work waits
// for room, in arrival order, and is refused after a deadline instead of
// the process running out of memory.
package admission

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sync/semaphore"
)

// ErrBusy means the budget had no room for the work before its deadline.
// Callers refuse it as temporarily unavailable (HTTP 503, SMTP 451).
var ErrBusy = errors.New("busy: too much ingest in progress")

// Budget is a number of bytes shared by concurrent work. A nil *Budget
// admits everything at once.
type Budget struct {
	sem  *semaphore.Weighted
	size int64
}

// New returns a budget of size bytes.
func New(size int64) *Budget {
	return &Budget{sem: semaphore.NewWeighted(size), size: size}
}

// Within returns the context to reserve with: it gives up after wait, with
// ErrBusy as the reason. One context for a piece of work and all its Grow
// calls bounds its waiting in all.
func Within(parent context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(parent, wait, ErrBusy)
}

// Reservation is bytes held from a budget until Release.
type Reservation struct {
	b    *Budget
	held int64
}

// Reserve waits for n bytes of the budget until ctx ends, and then returns
// its cause (ErrBusy from Within, context.Canceled at shutdown). Work
// larger than the whole budget reserves the whole budget: it runs, alone.
func (b *Budget) Reserve(ctx context.Context, n int64) (*Reservation, error) {
	r := &Reservation{b: b}
	if err := r.Grow(ctx, n); err != nil {
		return nil, err
	}
	return r, nil
}

// Grow makes the reservation n bytes when it holds fewer. It gives back
// what it holds before it waits, so that two reservations that both grow
// never wait for each other; when it fails it holds nothing, and the work
// must stop.
func (r *Reservation) Grow(ctx context.Context, n int64) error {
	if r.b == nil {
		return nil
	}
	n = min(n, r.b.size)
	if n <= r.held {
		return nil
	}
	if r.b.sem.TryAcquire(n - r.held) {
		r.held = n
		return nil
	}
	r.Release()
	if err := r.b.sem.Acquire(ctx, n); err != nil {
		return context.Cause(ctx)
	}
	r.held = n
	return nil
}

// Release gives the reservation back. It may be called more than once.
func (r *Reservation) Release() {
	if r == nil || r.b == nil || r.held == 0 {
		return
	}
	r.b.sem.Release(r.held)
	r.held = 0
}
