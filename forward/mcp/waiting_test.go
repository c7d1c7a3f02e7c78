package mcp

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Only the part of a tool that holds for captures ends when the server
// begins to stop: a list without wait is finished like any call in flight.
func TestOnlyWaitsEndAtTheStop(t *testing.T) {
	stopping := make(chan struct{})
	tl := tools{stopping: stopping}
	plain, stopPlain := tl.waiting(t.Context(), false)
	defer stopPlain()
	held, stopHeld := tl.waiting(t.Context(), true)
	defer stopHeld()
	close(stopping)
	select {
	case <-held.Done():
		if !errors.Is(context.Cause(held), errStopping) {
			t.Errorf("a held wait ended with %v, want the stop", context.Cause(held))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a held wait went on past the stop")
	}
	if plain.Err() != nil {
		t.Errorf("a list without wait was cut at the stop: %v", context.Cause(plain))
	}
}
