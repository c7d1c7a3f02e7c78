package tui

import (
	"context"
	"errors"
	"net/http"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/server/api/contract"
)

// Every call to the API runs in a tea.Cmd and comes back as one of these
// messages. Commands capture plain values, never the model, which only
// Update touches.

// op names a kind of call, so that a failing one is retried on its own
// schedule and its error cleared when it next succeeds.
type op int

const (
	opMe op = iota
	opSources
	opList
	opOlder
	opPoll
	opDetail
	opDeliveries
)

type meMsg struct {
	me  contract.Me
	err error
}

type sourcesMsg struct {
	inboxes   []contract.Inbox
	endpoints []contract.Endpoint
	err       error
}

// pageMsg answers a list load (older false) or a page of older captures.
type pageMsg struct {
	gen   int
	older bool
	items []capture
	next  string
	err   error
}

type pollMsg struct {
	gen   int
	items []capture
	next  string
	err   error
}

type detailMsg struct {
	id  string
	msg *contract.Message
	req *contract.Request
	err error
}

type rawMsg struct {
	id  string
	raw []byte
	err error
}

// deliveriesMsg answers a fresh read of the newest captures of the list,
// for the last delivery of each request shown and for the captures
// deleted elsewhere since they were listed. all is set when the answer
// holds every capture of the source (no older page).
type deliveriesMsg struct {
	gen   int
	items []capture
	all   bool
	err   error
}

type replayMsg struct {
	id     string
	replay contract.Replay
	err    error
}

type deleteMsg struct {
	id string
	// gone is set when the capture had been deleted already.
	gone bool
	err  error
}

type savedMsg struct {
	path string
	err  error
}

type noticeMsg struct {
	text string
	err  error
}

type retryMsg struct {
	op  op
	gen int
}

type tickMsg struct{}

type pollSettledMsg struct{ seq int }

type detailDueMsg struct{ id string }

const (
	// pageSize is how many captures a list load or an older page brings.
	pageSize = 50
	// pollWait holds each long-poll well under the API's 30 s cap.
	pollWait = 25 * time.Second
	// pollSettle is how long a long-poll must hold before it counts as
	// working again after an error.
	pollSettle = 700 * time.Millisecond
	// followDelay is how long the list cursor must rest on a capture
	// before the side-by-side detail fetches it.
	followDelay = 120 * time.Millisecond
	// refreshEvery re-reads what no wait covers: the sources' counts, and
	// the deliveries of requests already shown.
	refreshEvery = 5 * time.Second
)

func loadMe(ctx context.Context, c *apiclient.Client) tea.Cmd {
	return func() tea.Msg {
		me, err := c.Me(ctx)
		return meMsg{me, err}
	}
}

func loadSources(ctx context.Context, c *apiclient.Client) tea.Cmd {
	return func() tea.Msg {
		inboxes, err := apiclient.All(ctx, c.Inboxes)
		if err != nil {
			return sourcesMsg{err: err}
		}
		endpoints, err := apiclient.All(ctx, c.Endpoints)
		if err != nil {
			return sourcesMsg{err: err}
		}
		return sourcesMsg{inboxes: inboxes, endpoints: endpoints}
	}
}

// listQuery is one list call of a source: a page, or a wait for newer.
type listQuery struct {
	kind          sourceKind
	id            string
	f             filter
	before, after string
	limit         int
	wait          time.Duration
}

func (q listQuery) run(ctx context.Context, c *apiclient.Client) ([]capture, string, error) {
	if q.kind == kindEndpoint {
		l, err := c.Requests(ctx, q.id, apiclient.RequestQuery{Method: q.f.Method, Path: q.f.Path, Q: q.f.Q,
			Before: q.before, After: q.after, Limit: q.limit, Wait: q.wait})
		if err != nil {
			return nil, "", err
		}
		out := make([]capture, len(l.Items))
		for i := range l.Items {
			out[i] = capture{req: &l.Items[i]}
		}
		return out, l.Next, nil
	}
	l, err := c.Messages(ctx, q.id, apiclient.MessageQuery{To: q.f.To, From: q.f.From, Subject: q.f.Subject, Q: q.f.Q,
		Before: q.before, After: q.after, Limit: q.limit, Wait: q.wait})
	if err != nil {
		return nil, "", err
	}
	out := make([]capture, len(l.Items))
	for i := range l.Items {
		out[i] = capture{msg: &l.Items[i]}
	}
	return out, l.Next, nil
}

func loadPage(ctx context.Context, c *apiclient.Client, gen int, older bool, q listQuery) tea.Cmd {
	return func() tea.Msg {
		items, next, err := q.run(ctx, c)
		return pageMsg{gen: gen, older: older, items: items, next: next, err: err}
	}
}

func poll(ctx context.Context, c *apiclient.Client, gen int, q listQuery) tea.Cmd {
	return func() tea.Msg {
		items, next, err := q.run(ctx, c)
		return pollMsg{gen: gen, items: items, next: next, err: err}
	}
}

func loadDetail(ctx context.Context, c *apiclient.Client, id string, k sourceKind) tea.Cmd {
	return func() tea.Msg {
		if k == kindEndpoint {
			r, err := c.Request(ctx, id)
			if err != nil {
				return detailMsg{id: id, err: err}
			}
			return detailMsg{id: id, req: &r}
		}
		m, err := c.Message(ctx, id)
		if err != nil {
			return detailMsg{id: id, err: err}
		}
		return detailMsg{id: id, msg: &m}
	}
}

func loadRaw(ctx context.Context, c *apiclient.Client, id string) tea.Cmd {
	return func() tea.Msg {
		raw, err := c.MessageRaw(ctx, id)
		return rawMsg{id, raw, err}
	}
}

// loadDeliveries reads the newest captures of the list again: a request's
// last delivery, which a forwarding client records a moment after the
// capture, and which of them are still there. One call, however many
// captures are shown.
func loadDeliveries(ctx context.Context, c *apiclient.Client, gen int, q listQuery) tea.Cmd {
	return func() tea.Msg {
		items, next, err := q.run(ctx, c)
		return deliveriesMsg{gen: gen, items: items, all: next == "", err: err}
	}
}

func lastDelivery(ds []contract.Delivery) *contract.Delivery {
	if len(ds) == 0 {
		return nil
	}
	d := ds[len(ds)-1]
	return &d
}

func replay(ctx context.Context, c *apiclient.Client, id string) tea.Cmd {
	return func() tea.Msg {
		r, err := c.Replay(ctx, id, nil)
		return replayMsg{id, r, err}
	}
}

func deleteCapture(ctx context.Context, c *apiclient.Client, id string, k sourceKind) tea.Cmd {
	return func() tea.Msg {
		var err error
		if k == kindEndpoint {
			err = c.DeleteRequest(ctx, id)
		} else {
			err = c.DeleteMessage(ctx, id)
		}
		if contract.IsCode(err, contract.CodeNotFound) {
			return deleteMsg{id: id, gone: true} // what was asked for holds
		}
		return deleteMsg{id: id, err: err}
	}
}

func tick(every time.Duration) tea.Cmd {
	return tea.Tick(every, func(time.Time) tea.Msg { return tickMsg{} })
}

// describe turns an API error into a short line for the status bar.
func describe(err error) string {
	var ae *contract.Error
	switch {
	case errors.Is(err, apiclient.ErrUnreachable):
		// The server is on the left of the status bar; the innermost
		// cause ("connection refused") is what is worth the room.
		inner := err
		for u := errors.Unwrap(inner); u != nil; u = errors.Unwrap(inner) {
			inner = u
		}
		return "cannot reach the API: " + inner.Error()
	case errors.As(err, &ae) && ae.Code == contract.CodeTooManyWaits:
		return "all of the project's wait slots are busy (429)"
	case errors.As(err, &ae) && ae.Status == http.StatusTooManyRequests:
		return "rate limited (429)"
	case errors.As(err, &ae) && ae.Status == http.StatusUnauthorized:
		return "the API refused the key (401): " + ae.Message
	case errors.As(err, &ae) && ae.Message != "":
		return ae.Message + " (" + ae.Code + ")"
	}
	return err.Error()
}
