package store

import (
	"context"
	"errors"
	"fmt"
)

// because is a database failure with its cause in words a user can act on
// ("the disk could not be written"), which every surface's refusal repeats.
type because struct {
	why string
	err error
}

func (b *because) Error() string { return b.why + ": " + b.err.Error() }
func (b *because) Unwrap() error { return b.err }

// unavailableBecause is ErrUnavailable for why, err the database's own
// error.
func unavailableBecause(why string, err error) error {
	return fmt.Errorf("%w: %w", ErrUnavailable, &because{why: why, err: err})
}

// Why says why the database could not take a read or write, for the
// refusal that asks the client to retry: the disk is full, it cannot be
// written, the file is gone, nothing committed in time, the server is
// stopping. "" when err is not such a failure.
func Why(err error) string {
	var b *because
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrDiskFull):
		return ErrDiskFull.Error()
	case errors.As(err, &b):
		return b.why
	case errors.Is(err, ErrClosed):
		return "the server is stopping"
	case errors.Is(err, errNoCommit):
		return noCommit
	case errors.Is(err, errNoAnswer):
		return noAnswer
	case errors.Is(err, ErrUnavailable):
		return "the database cannot take writes now"
	case errors.Is(err, context.DeadlineExceeded):
		return "the database did not answer in time"
	}
	// A read's error comes straight from the database.
	if why, ok := driverUnavailable(err); ok {
		if why == "" {
			why = "the database is busy or cannot be reached"
		}
		return why
	}
	return ""
}

// driverUnavailable is what either database's driver error says of the
// database's state (backend.unavailable), for errors that did not pass
// through the writer: reads.
func driverUnavailable(err error) (string, bool) {
	if why, ok := (&postgresDB{}).unavailable(err); ok {
		return why, true
	}
	return (&sqliteDB{}).unavailable(err)
}
