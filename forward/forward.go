// Package forward is capture's forwarding client: it pulls the requests an
// endpoint captures from the read API and delivers each to a local HTTP
// handler, so that a webhook sent to a capture URL reaches code running on
// a developer's machine without a tunnel. The same client, as one Python
// file, is embedded for machines without Go.
package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/server/api/resend"
)

// Limits of the pull interval and the delivery timeout.
const (
	MinInterval     = time.Second
	MaxInterval     = 60 * time.Second
	DefaultInterval = 2 * time.Second
	DeliveryTimeout = 30 * time.Second
)

// Output formats.
const (
	OutputText = "text"
	OutputJSON = "json"
)

// recordTimeout bounds recording a delivery on the server, also after a
// stop, so that the last delivery still shows in the request's history.
const recordTimeout = 10 * time.Second

// Config is what `capture forward` was asked for.
type Config struct {
	// Endpoint is the id (whe_…) whose captured requests are forwarded.
	Endpoint string
	// To is the local handler's base URL; see ParseTarget.
	To         string
	Interval   time.Duration
	ReplayLast int
	// Start is the moment forwarding counts from: requests captured after
	// it are forwarded, even those captured while the client was still
	// checking the key and listing the endpoint. `capture forward` passes
	// its launch; zero means when Run is called.
	Start time.Time
	// Output is OutputText (the default) or OutputJSON: NDJSON on Stdout.
	Output string
	// Stdout gets the banner, deliveries and summary; Stderr warnings and
	// status lines.
	Stdout, Stderr io.Writer
	// Color adds ANSI colours to text output.
	Color  bool
	Client *apiclient.Client
	// RefusedKey is what to say when the API refuses the key: where it
	// came from and how to get one that works. "" says to set
	// CAPTURE_API_KEY.
	RefusedKey string
	// HTTP delivers to the local handler; nil means a client that sends
	// directly (no proxy), follows no redirects and gives up after
	// DeliveryTimeout.
	HTTP *http.Client
}

// StartError is a failure before forwarding began: a bad key, an unknown
// endpoint, an API that does not answer, a bad setting. Its message is one
// line meant for the user as it is.
type StartError struct{ Err error }

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

func startErrorf(format string, args ...any) error {
	return &StartError{fmt.Errorf(format, args...)}
}

// ParseTarget turns a --to value into the handler's base URL. A value
// without a scheme ("localhost:3000") means http://. The URL keeps its
// path as given, a trailing slash included, since a capture of the bare
// capture URL is delivered to that very path (resend.Join); a path of
// slashes alone is the root, written without one.
func ParseTarget(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("the local handler URL is empty")
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" || !portInRange(u.Port()) {
		return "", fmt.Errorf("%q is not an http:// or https:// URL of a local handler (e.g. localhost:3000)", s)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%q: give the handler's base URL without query, fragment or user info", s)
	}
	out := u.String()
	if strings.Trim(u.Path, "/") == "" {
		out = strings.TrimRight(out, "/")
	}
	return out, nil
}

// portInRange reports whether a URL's port, when it has one, is one a
// connection can be made to: url.Parse takes any digits.
func portInRange(port string) bool {
	if port == "" {
		return true
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535
}

// Run forwards until ctx ends, then prints a summary and returns nil. It
// returns a *StartError when it cannot begin, and another error when the
// API refuses to go on (the key was revoked, the endpoint deleted).
func Run(ctx context.Context, cfg Config) error {
	f, err := newForwarder(cfg)
	if err != nil {
		return &StartError{err}
	}
	if err := f.start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	err = f.loop(ctx)
	f.out.summary(f.stats, time.Since(f.started))
	return err
}

func newForwarder(cfg Config) (*forwarder, error) {
	if cfg.Client == nil {
		return nil, errors.New("no API client")
	}
	if !strings.HasPrefix(cfg.Endpoint, "whe_") {
		return nil, fmt.Errorf("endpoint %q: want an endpoint id (whe_…)", cfg.Endpoint)
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Interval < MinInterval || cfg.Interval > MaxInterval {
		return nil, fmt.Errorf("interval %s: want 1 to 60 seconds", cfg.Interval)
	}
	if cfg.ReplayLast < 0 {
		return nil, fmt.Errorf("replay-last %d: want 0 or more", cfg.ReplayLast)
	}
	to, err := ParseTarget(cfg.To)
	if err != nil {
		return nil, err
	}
	base, _ := url.Parse(to)
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	var out printer
	switch cfg.Output {
	case "", OutputText:
		out = &textPrinter{w: cfg.Stdout, errw: cfg.Stderr, color: cfg.Color}
	case OutputJSON:
		out = &jsonPrinter{w: cfg.Stdout, errw: cfg.Stderr}
	default:
		return nil, fmt.Errorf("output %q: want text or json", cfg.Output)
	}
	hc := cfg.HTTP
	if hc == nil {
		hc = newDeliveryClient()
	}
	return &forwarder{cfg: cfg, api: cfg.Client, http: hc, to: to, base: base, out: out}, nil
}

// newDeliveryClient reports what the handler answered, redirects included,
// and never goes through a proxy: the handler is local by design.
func newDeliveryClient() *http.Client {
	return &http.Client{
		Transport:     resend.Transport(nil),
		Timeout:       DeliveryTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// stats count deliveries for the summary.
type stats struct {
	Deliveries int // attempts made
	OK         int // answered 2xx
	Non2xx     int // answered with another status
	Errors     int // no answer
}

type forwarder struct {
	cfg  Config
	api  *apiclient.Client
	http *http.Client
	to   string
	base *url.URL
	out  printer

	started time.Time
	// last is the cursor: the newest capture delivered or taken as the
	// baseline; "" when the endpoint held none.
	last string
	// seenUntil is the latest received_at of every capture seen so far. When
	// the cursor is gone, captures received after it are certainly new.
	seenUntil time.Time

	handlerDown bool
	apiDown     bool
	lastProblem string
	// waiting is set while the API asks to come back later.
	waiting bool
	// noWaitSlot is set while the project has no wait slot free for a pull.
	noWaitSlot bool
	stats      stats
}

func (f *forwarder) start(ctx context.Context) error {
	f.started = time.Now()
	launch := f.cfg.Start
	if launch.IsZero() {
		launch = f.started
	}
	api := f.api.BaseURL()
	me, err := callAPI(ctx, f, func() (contract.Me, error) { return f.api.Me(ctx) })
	switch {
	case errors.Is(err, apiclient.ErrUnreachable):
		return startErrorf("%v (is `capture serve` running? --api sets the URL)", err)
	case contract.IsCode(err, contract.CodeUnauthorized):
		if f.cfg.RefusedKey != "" {
			return startErrorf("the API at %s refused %s", api, f.cfg.RefusedKey)
		}
		return startErrorf("the API at %s refused the key (unknown or revoked): set %s to a valid key", api, apiclient.EnvAPIKey)
	case err != nil:
		return startErrorf("API at %s: %v", api, err)
	}
	ep, err := callAPI(ctx, f, func() (contract.Endpoint, error) { return f.api.Endpoint(ctx, f.cfg.Endpoint) })
	switch {
	case contract.IsCode(err, contract.CodeNotFound):
		return startErrorf("endpoint %s not found in project %q (`capture endpoint list` shows the ids)", f.cfg.Endpoint, me.Project.Name)
	case errors.Is(err, apiclient.ErrUnreachable):
		return startErrorf("%v", err)
	case err != nil:
		return startErrorf("API at %s: %v", api, err)
	}

	newest, err := f.existing(ctx, max(f.cfg.ReplayLast, 1), launch)
	switch {
	case errors.Is(err, apiclient.ErrUnreachable):
		return startErrorf("%v", err)
	case err != nil:
		return startErrorf("list the requests of %s: %v", f.cfg.Endpoint, err)
	}
	if len(newest) > 0 {
		f.last = newest[0].ID
	}
	for _, r := range newest {
		f.see(r)
	}
	f.out.ready(readyInfo{
		Time: time.Now(), API: api, Project: me.Project.Name, Endpoint: ep.ID, EndpointName: ep.Name,
		CaptureURL: ep.CaptureURL, To: f.to, Baseline: f.last, ReplayLast: f.cfg.ReplayLast, Interval: f.cfg.Interval,
	})

	replay := newest[:min(f.cfg.ReplayLast, len(newest))]
	for i := len(replay) - 1; i >= 0; i-- {
		if err := f.deliver(ctx, replay[i]); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// The replayed ones are a courtesy; the pull loop carries on
			// from the baseline whatever happened to them.
			f.out.warn("could not replay %s: %v", replay[i].ID, err)
		}
	}
	// Replays do not move the cursor: the baseline was the newest already.
	if len(newest) > 0 {
		f.last = newest[0].ID
	}
	return nil
}

// existing returns at least the n newest captures received by launch
// (fewer if the endpoint holds fewer), newest first; the ones received
// after launch are left out, for the pull loop to deliver as new. A whole
// page is read even for a small n, so that seenUntil covers captures
// committed slightly out of order.
func (f *forwarder) existing(ctx context.Context, n int, launch time.Time) ([]contract.RequestSummary, error) {
	// Capture times are kept in milliseconds: one received in the
	// launch's own millisecond may have come after it, and counts as new.
	launch = launch.Truncate(time.Millisecond)
	var out []contract.RequestSummary
	q := apiclient.RequestQuery{Limit: contract.MaxLimit}
	for {
		l, err := callAPI(ctx, f, func() (contract.List[contract.RequestSummary], error) {
			return f.api.Requests(ctx, f.cfg.Endpoint, q)
		})
		if err != nil {
			return nil, err
		}
		for _, r := range l.Items {
			if len(out) > 0 || r.ReceivedAt.Before(launch) {
				out = append(out, r)
			}
		}
		if len(out) >= n || l.Next == "" {
			return out, nil
		}
		q.Before = l.Next
	}
}

func (f *forwarder) see(r contract.RequestSummary) {
	if r.ReceivedAt.After(f.seenUntil) {
		f.seenUntil = r.ReceivedAt.Time
	}
}

// loop pulls until ctx ends. Each pull is a long-poll: the API holds it
// until a request is captured, which is then delivered at once, or until
// the interval has passed; an idle client so calls once per interval.
// Problems with the API are shown once, when they begin, and forwarding
// resumes from the cursor when they end.
func (f *forwarder) loop(ctx context.Context) error {
	for {
		began := time.Now()
		delivered, err := f.pull(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			// The pull said that the API answers again (answers), before
			// any delivery.
		case contract.IsCode(err, contract.CodeUnauthorized):
			return fmt.Errorf("the API refused the key (revoked?): %w", err)
		case contract.IsCode(err, contract.CodeNotFound):
			return fmt.Errorf("endpoint %s is gone: %w", f.cfg.Endpoint, err)
		case errors.Is(err, apiclient.ErrUnreachable):
			if !f.apiDown {
				f.apiDown = true
				f.out.warn("%v; retrying every %s", err, f.cfg.Interval)
			}
		default:
			if msg := err.Error(); msg != f.lastProblem {
				f.lastProblem = msg
				f.out.warn("pull failed: %v; retrying every %s", err, f.cfg.Interval)
			}
		}
		// After deliveries, look again at once: more may be waiting. After
		// an empty pull, keep to one call per interval, whether the API
		// held it (up to 30 s of a longer interval) or could not (no wait
		// slot free); after an error, wait the interval before retrying.
		pause := time.Duration(0)
		switch {
		case err != nil:
			pause = f.cfg.Interval
		case delivered == 0:
			pause = time.Until(began.Add(f.cfg.Interval))
		}
		if pause > 0 {
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
	}
}

// answers is told that a pull got its list from the API: after a problem,
// it says so, naming the cursor deliveries resume after ("" for none),
// before any of them is made.
func (f *forwarder) answers(cursor string) {
	if f.apiDown || f.lastProblem != "" {
		where := "from the start"
		if cursor != "" {
			where = "after " + cursor
		}
		f.out.info("API answers again; resuming %s", where)
	}
	f.apiDown, f.lastProblem = false, ""
}

// hold is how long each pull asks the API to hold: the interval, within
// the API's limit.
func (f *forwarder) hold() time.Duration { return min(f.cfg.Interval, contract.MaxWait) }

// pull delivers everything captured after the cursor, oldest first,
// following next until caught up, and returns how many it delivered. Its
// first call holds until a request is captured or the interval passes.
func (f *forwarder) pull(ctx context.Context) (int, error) {
	delivered, hold, rebased := 0, f.hold(), false
	for {
		if f.last == "" {
			n, err := f.pullFresh(ctx, "", hold)
			return delivered + n, err
		}
		after := f.last
		l, err := f.list(ctx, apiclient.RequestQuery{After: after, Limit: contract.MaxLimit, Wait: hold})
		if contract.IsCode(err, contract.CodeInvalidCursor) && !rebased {
			n, err := f.pullFresh(ctx, after, 0)
			delivered += n
			if err != nil || n > 0 {
				return delivered, err
			}
			// Nothing new: the pull goes on, holding from the new baseline
			// (or, on an empty endpoint, for its next capture), so that a
			// request captured now is still delivered at once. Once only:
			// a baseline gone as well is for the next pull.
			rebased = true
			continue
		}
		if err != nil {
			return delivered, err
		}
		f.answers(after)
		for i := len(l.Items) - 1; i >= 0; i-- {
			if err := f.deliver(ctx, l.Items[i]); err != nil {
				return delivered, err
			}
			delivered++
		}
		if l.Next == "" || len(l.Items) == 0 {
			return delivered, nil
		}
		// More are known to be there: no holding for them.
		hold = 0
	}
}

// errNoWaitSlot stands for a too_many_waits answer, which the client does
// not wait out as other 429s: it lists without holding instead.
var errNoWaitSlot = errors.New("no wait slot")

// list lists the endpoint's requests. A call that asks to hold takes one
// of the project's few wait slots; when all are taken (by other clients,
// viewers, tests), it lists without holding, and the loop's pause keeps
// it to one call per interval until a slot frees.
func (f *forwarder) list(ctx context.Context, q apiclient.RequestQuery) (contract.List[contract.RequestSummary], error) {
	if q.Wait > 0 {
		l, err := callAPI(ctx, f, func() (contract.List[contract.RequestSummary], error) {
			l, err := f.api.Requests(ctx, f.cfg.Endpoint, q)
			if contract.IsCode(err, contract.CodeTooManyWaits) {
				return l, errNoWaitSlot
			}
			return l, err
		})
		if !errors.Is(err, errNoWaitSlot) {
			if err == nil && f.noWaitSlot {
				f.noWaitSlot = false
				f.out.info("a wait slot is free again; requests are delivered as they are captured")
			}
			return l, err
		}
		if !f.noWaitSlot {
			f.noWaitSlot = true
			f.out.info("all of the project's wait slots are taken (too_many_waits); pulling every %s until one frees", f.cfg.Interval)
		}
		q.Wait = 0
	}
	return callAPI(ctx, f, func() (contract.List[contract.RequestSummary], error) {
		return f.api.Requests(ctx, f.cfg.Endpoint, q)
	})
}

// pullFresh lists without a cursor: while there is none (the endpoint was
// empty), holding up to hold for a capture received after everything seen
// so far, or when the cursor named by gone no longer exists. The newest
// capture already seen becomes the cursor (none when no such capture is
// left), and the captures received after everything seen are delivered, so
// that nothing is delivered twice and nothing new is missed.
func (f *forwarder) pullFresh(ctx context.Context, gone string, hold time.Duration) (int, error) {
	var fresh []contract.RequestSummary
	baseline := ""
	q := apiclient.RequestQuery{Limit: contract.MaxLimit, Wait: hold}
	if gone == "" {
		// Only what is new may end the hold; a re-list after a lost cursor
		// needs the older ones too, for its baseline.
		q.Since = f.seenUntil
	}
	for {
		l, err := f.list(ctx, q)
		if err != nil {
			return 0, err
		}
		q.Wait = 0
		for _, r := range l.Items {
			switch {
			case r.ReceivedAt.After(f.seenUntil):
				fresh = append(fresh, r)
			case baseline == "":
				baseline = r.ID
			}
		}
		if baseline != "" || l.Next == "" {
			break
		}
		q.Before = l.Next
	}
	f.answers(baseline)
	if gone != "" {
		f.out.warn("%s", lostCursor(gone, baseline, len(fresh)))
	}
	f.last = baseline
	for i := len(fresh) - 1; i >= 0; i-- {
		if err := f.deliver(ctx, fresh[i]); err != nil {
			return len(fresh) - 1 - i, err
		}
	}
	return len(fresh), nil
}

// lostCursor says what follows the loss of cursor gone: the new baseline,
// and the fresh captures delivered. Without a baseline, every capture
// left is fresh.
func lostCursor(gone, baseline string, fresh int) string {
	var next string
	switch {
	case baseline != "" && fresh > 0:
		next = fmt.Sprintf("new baseline: %s (the newest request left that was already seen); forwarding the %s captured after it", baseline, requestCount(fresh))
	case baseline != "":
		next = fmt.Sprintf("new baseline: %s (the newest request left that was already seen); forwarding what is captured next", baseline)
	case fresh == 0:
		next = "new baseline: none (the endpoint is empty); forwarding what is captured next"
	default:
		next = fmt.Sprintf("new baseline: none (no request left was already seen); forwarding the %s left", requestCount(fresh))
	}
	return fmt.Sprintf("cursor %s no longer exists (deleted or pruned); %s", gone, next)
}

func requestCount(n int) string {
	if n == 1 {
		return "1 request"
	}
	return strconv.Itoa(n) + " requests"
}

// deliver fetches one capture, sends it to the handler once, reports the
// result and records it on the server. An error means the capture was not
// delivered and the cursor did not move.
func (f *forwarder) deliver(ctx context.Context, s contract.RequestSummary) error {
	req, err := callAPI(ctx, f, func() (contract.Request, error) { return f.api.Request(ctx, s.ID) })
	if contract.IsCode(err, contract.CodeNotFound) {
		// Deleted since it was listed: nothing left to deliver.
		f.see(s)
		return nil
	}
	if err != nil {
		return err
	}
	res := f.send(ctx, req)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	f.last = s.ID
	f.see(s)
	f.count(res)
	f.out.delivery(res)
	f.noteHandler(res)
	f.record(ctx, res)
	return nil
}

func (f *forwarder) count(r result) {
	f.stats.Deliveries++
	switch {
	case r.Err != nil:
		f.stats.Errors++
	case r.Status >= 200 && r.Status < 300:
		f.stats.OK++
	default:
		f.stats.Non2xx++
	}
}

// noteHandler warns when the handler stops or starts answering; one line per
// change rather than one per failed delivery.
func (f *forwarder) noteHandler(r result) {
	down := r.Err != nil && r.Class != classOther
	switch {
	case down && !f.handlerDown:
		f.out.warn("local handler %s is unreachable (%s); deliveries fail until it answers", f.to, r.Class)
	case !down && r.Err == nil && f.handlerDown:
		f.out.info("local handler %s answers again", f.to)
	}
	if r.Err == nil || down {
		f.handlerDown = down
	}
}

func (f *forwarder) record(ctx context.Context, r result) {
	target, ms := r.URL, r.Duration.Milliseconds()
	if _, err := url.Parse(r.URL); err != nil {
		target = f.to
	}
	// The server keeps what fits its caps, and refuses more.
	target = contract.Clip(target, contract.MaxDeliveryTargetURL)
	rep := contract.DeliveryReport{TargetURL: &target, DurationMS: &ms}
	if r.Err != nil {
		msg := contract.Clip(r.Class+": "+r.ErrText, contract.MaxDeliveryError)
		rep.Error = &msg
	} else {
		status := r.Status
		rep.ResponseStatus = &status
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	_, err := callAPI(rctx, f, func() (contract.Delivery, error) { return f.api.RecordDelivery(rctx, r.ID, rep) })
	if err != nil {
		f.out.warn("could not record the delivery of %s on the server: %v", r.ID, err)
	}
}

// callAPI runs one API call under the clients' retry policy, waiting out
// answers that ask to come back later as long as ctx allows; a status line
// says so once per episode.
func callAPI[T any](ctx context.Context, f *forwarder, call func() (T, error)) (T, error) {
	v, err := apiclient.Retry(ctx, call, func(wait time.Duration, err error) {
		if f.waiting {
			return
		}
		f.waiting = true
		if contract.IsCode(err, contract.CodeUnavailable) {
			f.out.info("API unavailable for now; waiting %s as Retry-After asks", wait)
		} else {
			f.out.info("API rate limit reached; waiting %s as Retry-After asks", wait)
		}
	})
	f.waiting = false
	return v, err
}
