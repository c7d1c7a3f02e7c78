package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
)

// Why names what the user can act on, for each way a database refuses.
func TestWhy(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("syntax error"), ""},
		{fmt.Errorf("%w: %w: disk full", ErrUnavailable, ErrDiskFull), "the disk is full"},
		{unavailableBecause("the disk could not be written", errors.New("disk I/O error")), "the disk could not be written"},
		{fmt.Errorf("commit: %w", unavailableBecause("the database cannot be written (a read-only file system, or its permissions)", errors.New("readonly"))),
			"the database cannot be written (a read-only file system, or its permissions)"},
		{ErrClosed, "the server is stopping"},
		{errNoCommit, "nothing committed within 5s (the database is locked by another process, or the disk stalled)"},
		{fmt.Errorf("%w: %w", errNoCommit, context.DeadlineExceeded), "nothing committed within 5s (the database is locked by another process, or the disk stalled)"},
		{errNoAnswer, "nothing committed within 5s (the database did not answer in time, or is locked by another process)"},
		{fmt.Errorf("%w: %w", errNoAnswer, context.DeadlineExceeded), "nothing committed within 5s (the database did not answer in time, or is locked by another process)"},
		{fmt.Errorf("%w: locked", ErrUnavailable), "the database cannot take writes now"},
		// A read's own error, as PostgreSQL's driver gives it.
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), "lost the connection to the database"},
		// A bound on a call, not a lost connection.
		{fmt.Errorf("read inbox: %w", context.DeadlineExceeded), "the database did not answer in time"},
	} {
		if got := Why(tt.err); got != tt.want {
			t.Errorf("Why(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

// A lost PostgreSQL connection is never worded with the database's
// address: the reason reaches webhook senders and SMTP clients.
func TestLostConnectionKeepsTheAddressOut(t *testing.T) {
	why, ok := (&postgresDB{where: "postgres://alice@db.internal:5432/capture"}).unavailable(fmt.Errorf("insert: %w", io.ErrUnexpectedEOF))
	if !ok || why != "lost the connection to the database" {
		t.Errorf("unavailable = %q, %v; want the lost connection without its address", why, ok)
	}
}
