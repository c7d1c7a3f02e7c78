package admission

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestReservationsShareTheBudget(t *testing.T) {
	b := New(100)
	a, err := b.Reserve(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	// No room for 60 more: the second waits until the first is released.
	got := make(chan error, 1)
	go func() {
		r, err := b.Reserve(t.Context(), 60)
		if err == nil {
			r.Release()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("second reservation did not wait: %v", err)
	default:
	}
	a.Release()
	a.Release() // twice is harmless
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// Work larger than the budget runs alone rather than never.
	whole, err := b.Reserve(t.Context(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	whole.Release()
}

func TestNoRoomBeforeTheDeadlineIsBusy(t *testing.T) {
	b := New(10)
	hold, err := b.Reserve(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Release()
	ctx, cancel := Within(t.Context(), time.Millisecond)
	defer cancel()
	if _, err := b.Reserve(ctx, 1); !errors.Is(err, ErrBusy) {
		t.Fatalf("got %v, want ErrBusy", err)
	}
	// Ended for another reason (shutdown): that reason.
	parent, stop := context.WithCancel(t.Context())
	stop()
	ctx, cancel = Within(parent, time.Hour)
	defer cancel()
	if _, err := b.Reserve(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: got %v", err)
	}
}

func TestGrowGivesBackWhileItWaits(t *testing.T) {
	b := New(100)
	small, _ := b.Reserve(t.Context(), 10)
	other, _ := b.Reserve(t.Context(), 10)
	// Both want 95 now. Holding their 10 while waiting would deadlock:
	// each waits for the other's 10. Grow lets go first.
	done := make(chan error, 2)
	for _, r := range []*Reservation{small, other} {
		go func() {
			err := r.Grow(t.Context(), 95)
			r.Release()
			done <- err
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	var nilBudget *Budget
	r, err := nilBudget.Reserve(t.Context(), 1<<40)
	if err != nil || r.Grow(t.Context(), 1<<50) != nil {
		t.Fatal("a nil budget admits everything")
	}
	r.Release()
}
