package wait

import (
	"context"
	"errors"
	"time"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/server/api/contract"
)

// ErrTimedOut is returned by NextMessage and NextRequest when nothing
// matched before the deadline.
var ErrTimedOut = errors.New("timed out")

// Finder waits for captures over the read API.
type Finder struct {
	Client *apiclient.Client
	// PollWait bounds each long-poll; zero means the API's maximum, 30 s.
	// Waits longer than that are chained.
	PollWait time.Duration
	// Until, when set, is when the wait ends, in place of ctx's deadline:
	// no long-poll holds past it, and once it has passed with nothing
	// found the answer is ErrTimedOut. ctx then bounds only the calls, so
	// that a wait that ends at once still looks at what is there.
	Until time.Time
	// FailFast ends the wait at once with the error of an API that does
	// not answer or answers 503 unavailable (shutting down), instead of
	// retrying it until Until: for a caller that is itself asked again
	// (an MCP tool), which should say so now rather than at the end of
	// its time. 429 answers are still retried as they ask.
	FailFast bool
	// polled hears of every filtered list call that returned, with how
	// long it was asked to hold and how many captures it found.
	polled func(hold time.Duration, found int)
	// retryBase is the first pause after the API did not answer.
	retryBase time.Duration
	// beforeLastTry runs when an outage has left only the try at Until,
	// before its pause.
	beforeLastTry func()
}

// SinceStart is the since= that keeps exactly the captures received from
// start on: since keeps captures strictly after it, and capture times are
// whole milliseconds, so it is one millisecond before start's.
func SinceStart(start time.Time) time.Time {
	return start.Truncate(time.Millisecond).Add(-time.Millisecond)
}

// NextMessage returns the oldest message of the inbox that matches q's
// filters and was received strictly after q.Since (and, when q.After is
// set, after that message), waiting for one until ctx ends or Until;
// ErrTimedOut when that came first. q's other paging fields are ignored.
func (f *Finder) NextMessage(ctx context.Context, inboxID string, q apiclient.MessageQuery) (contract.MessageSummary, error) {
	return next(ctx, f, collection[contract.MessageSummary]{
		after: q.After,
		newest: func(ctx context.Context) (string, error) {
			l, err := f.Client.Messages(ctx, inboxID, apiclient.MessageQuery{Limit: 1})
			return firstID(l, err, func(m contract.MessageSummary) string { return m.ID })
		},
		list: func(ctx context.Context, p apiclient.Page, hold time.Duration) (contract.List[contract.MessageSummary], error) {
			return f.Client.Messages(ctx, inboxID, apiclient.MessageQuery{To: q.To, From: q.From, Subject: q.Subject, Q: q.Q,
				Since: q.Since, Wait: hold, Before: p.Before, After: p.After, Limit: contract.MaxLimit})
		},
	})
}

// NextRequest is NextMessage for the requests of an endpoint.
func (f *Finder) NextRequest(ctx context.Context, endpointID string, q apiclient.RequestQuery) (contract.RequestSummary, error) {
	return next(ctx, f, collection[contract.RequestSummary]{
		after: q.After,
		newest: func(ctx context.Context) (string, error) {
			l, err := f.Client.Requests(ctx, endpointID, apiclient.RequestQuery{Limit: 1})
			return firstID(l, err, func(r contract.RequestSummary) string { return r.ID })
		},
		list: func(ctx context.Context, p apiclient.Page, hold time.Duration) (contract.List[contract.RequestSummary], error) {
			return f.Client.Requests(ctx, endpointID, apiclient.RequestQuery{Method: q.Method, Path: q.Path, Q: q.Q,
				Since: q.Since, Wait: hold, Before: p.Before, After: p.After, Limit: contract.MaxLimit})
		},
	})
}

func firstID[T any](l contract.List[T], err error, id func(T) string) (string, error) {
	if err != nil || len(l.Items) == 0 {
		return "", err
	}
	return id(l.Items[0]), nil
}

// collection is one inbox or endpoint as next reads it: its newest
// capture, and its captures that match the filters (since included).
type collection[T any] struct {
	// after is the capture to start after, if any.
	after  string
	newest func(ctx context.Context) (string, error)
	list   func(ctx context.Context, p apiclient.Page, hold time.Duration) (contract.List[T], error)
}

// next finds the oldest matching capture, chaining long-polls of at most
// PollWait until ctx's deadline.
//
// since alone would be correct, but every commit to the collection wakes a
// waiting call, which then filters the whole collection again. So each
// round first reads the collection's newest capture (unfiltered), then
// lists the matches after the cursor. When that list comes back empty,
// every capture up to the one read first was checked, since it existed
// before the list ran: it becomes the cursor, and the next round's
// waiting call looks only at what is newer. The first round has no cursor
// yet (unless the caller gave one) and does not hold, so the whole
// collection is filtered once only.
func next[T any](ctx context.Context, f *Finder, c collection[T]) (T, error) {
	var zero T
	pollWait := f.PollWait
	if pollWait <= 0 {
		pollWait = contract.MaxWait
	}
	cursor := c.after
	for round := 0; ; round++ {
		candidate, err := call(ctx, f, c.newest)
		if err != nil {
			return zero, err
		}
		hold := time.Duration(0)
		if cursor != "" || candidate == "" {
			hold = pollWait
			if d, ok := f.deadline(ctx); ok {
				hold = min(hold, time.Until(d))
			}
			if hold <= 0 && round > 0 {
				return zero, ErrTimedOut
			}
			// The first round looks at what is there even when the
			// wait is already over.
			hold = max(hold, 0)
		}
		after := cursor
		l, err := call(ctx, f, func(ctx context.Context) (contract.List[T], error) {
			// Asked again after an outage, it holds only what is left.
			h := hold
			if d, ok := f.deadline(ctx); ok && h > 0 {
				h = max(min(h, time.Until(d)), 0)
			}
			return c.list(ctx, apiclient.Page{After: after}, h)
		})
		if contract.IsCode(err, contract.CodeInvalidCursor) {
			// The cursor was deleted or pruned: filter everything again.
			cursor = ""
			continue
		}
		if err != nil {
			return zero, err
		}
		if f.polled != nil {
			f.polled(hold, len(l.Items))
		}
		if len(l.Items) > 0 {
			if after != "" {
				// The page after a cursor holds the oldest matches.
				return l.Items[len(l.Items)-1], nil
			}
			return oldest(ctx, f, c, l)
		}
		if candidate != "" {
			cursor = candidate
		}
	}
}

// deadline is when the wait ends: Until, else ctx's deadline.
func (f *Finder) deadline(ctx context.Context) (time.Time, bool) {
	if !f.Until.IsZero() {
		return f.Until, true
	}
	return ctx.Deadline()
}

// oldest pages back from a newest-first page of matches to the oldest.
func oldest[T any](ctx context.Context, f *Finder, c collection[T], l contract.List[T]) (T, error) {
	for l.Next != "" {
		before := l.Next
		older, err := call(ctx, f, func(ctx context.Context) (contract.List[T], error) {
			return c.list(ctx, apiclient.Page{Before: before}, 0)
		})
		if err != nil {
			var zero T
			return zero, err
		}
		if len(older.Items) == 0 {
			break
		}
		l = older
	}
	return l.Items[len(l.Items)-1], nil
}

// call runs one API call under the clients' retry policy (Retry-After on
// 429 and 503), and also retries an API that does not answer, with
// backoff, as long as ctx allows: a server restarting mid-wait is not a
// reason to give up. ctx's deadline passing is ErrTimedOut. With Until
// set, nothing is retried past it: the API's last answer (too_many_waits,
// unavailable) is returned instead, for it says why nothing was found.
func call[T any](ctx context.Context, f *Finder, fn func(ctx context.Context) (T, error)) (T, error) {
	base := f.retryBase
	if base <= 0 {
		base = 250 * time.Millisecond
	}
	retryCtx := ctx
	if !f.Until.IsZero() {
		var cancel context.CancelFunc
		retryCtx, cancel = context.WithDeadline(ctx, f.Until)
		defer cancel()
	}
	// unreachable is the last outage met, named when the deadline comes
	// in the middle of a later attempt.
	var unreachable error
	if f.FailFast {
		fn = failFast(fn)
	}
	for attempt := 1; ; attempt++ {
		v, err := retryUntil(ctx, retryCtx, fn)
		var final *finalError
		switch {
		case err == nil:
			return v, nil
		case errors.As(err, &final):
			return v, final.err
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
			return v, &timedOut{last: unreachable}
		case !errors.Is(err, apiclient.ErrUnreachable):
			return v, err
		}
		unreachable = err
		pause := apiclient.Backoff(err, attempt, base, 5*time.Second)
		last := !f.Until.IsZero() && time.Until(f.Until) < pause
		if last {
			// One more try at the deadline itself, bounded by ctx: a serve
			// back by then is heard, and one still down is named so.
			if f.beforeLastTry != nil {
				f.beforeLastTry()
			}
			pause = max(time.Until(f.Until), 0)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return v, &timedOut{last: err}
			}
			return v, ctx.Err()
		case <-t.C:
		}
		if last {
			v, err := fn(ctx)
			if errors.Is(err, apiclient.ErrUnreachable) {
				return v, &timedOut{last: err}
			}
			return v, err
		}
	}
}

// finalError carries an answer that FailFast does not retry past the
// retry policy, which would otherwise retry it: it unwraps to nothing.
type finalError struct{ err error }

func (e *finalError) Error() string { return e.err.Error() }

// failFast is fn with its unavailable and unreachable answers final.
func failFast[T any](fn func(ctx context.Context) (T, error)) func(ctx context.Context) (T, error) {
	return func(ctx context.Context) (T, error) {
		v, err := fn(ctx)
		if errors.Is(err, apiclient.ErrUnreachable) || contract.IsCode(err, contract.CodeUnavailable) {
			return v, &finalError{err}
		}
		return v, err
	}
}

// timedOut is ErrTimedOut with the API failure that was being retried
// when time ran out, if any.
type timedOut struct{ last error }

func (e *timedOut) Error() string {
	if e.last == nil {
		return ErrTimedOut.Error()
	}
	return ErrTimedOut.Error() + " (" + e.last.Error() + ")"
}

func (e *timedOut) Is(target error) bool { return target == ErrTimedOut }

// Unwrap gives the last API failure, so that errors.Is(err,
// apiclient.ErrUnreachable) tells a wait cut short by an outage.
func (e *timedOut) Unwrap() error { return e.last }

// retryUntil runs fn under the clients' retry policy (Retry-After on 429
// and 503) while retryCtx allows, each call bounded by ctx. When retryCtx
// ends first, the API's last "later" answer comes back instead of the
// context's error: it says why nothing was found.
func retryUntil[T any](ctx, retryCtx context.Context, fn func(ctx context.Context) (T, error)) (T, error) {
	var asked error
	v, err := apiclient.Retry(retryCtx, func() (T, error) { return fn(ctx) },
		func(_ time.Duration, err error) { asked = err })
	if asked != nil && ctx.Err() == nil && retryCtx.Err() != nil && errors.Is(err, retryCtx.Err()) {
		return v, asked
	}
	return v, err
}
