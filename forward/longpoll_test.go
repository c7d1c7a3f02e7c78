package forward_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/forward/internal/capturetest"
)

// pulls is a proxy to the read API that records every list call of
// requests: the cursor, since and wait it asked for, when it was sent and
// answered, the status and the ids it brought back. While gated, list
// calls wait at the proxy, so that a test can change the endpoint while
// the client has no call in flight.
type pulls struct {
	api string

	mu      sync.Mutex
	calls   []*pull
	changed chan struct{}
	gate    chan struct{}
}

type pull struct {
	after, since, wait string
	sent, arrived      time.Time
	gated              bool
	status             int
	ids                []string
	done               bool
}

func newPulls(t *testing.T, srv *capturetest.Server) *pulls {
	u, _ := url.Parse(srv.HTTPBase)
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &pulls{changed: make(chan struct{})}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "GET" || !strings.HasSuffix(r.URL.Path, "/requests") {
			rp.ServeHTTP(w, r)
			return
		}
		q := r.URL.Query()
		c := &pull{after: q.Get("after"), since: q.Get("since"), wait: q.Get("wait"), sent: time.Now()}
		var gate chan struct{}
		p.update(func() {
			p.calls = append(p.calls, c)
			gate, c.gated = p.gate, p.gate != nil
		})
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
			}
		}
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		rp.ServeHTTP(rec, r)
		var l struct{ Items []struct{ ID string } }
		json.Unmarshal(rec.body.Bytes(), &l)
		p.update(func() {
			c.arrived, c.done, c.status = time.Now(), true, rec.status
			for _, it := range l.Items {
				c.ids = append(c.ids, it.ID)
			}
		})
	}))
	t.Cleanup(proxy.Close)
	p.api = proxy.URL + "/api/v1"
	return p
}

type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

func (p *pulls) update(fn func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn()
	close(p.changed)
	p.changed = make(chan struct{})
}

// close holds the list calls that come from now on at the proxy, until the
// returned func is called.
func (p *pulls) closeGate() (open func()) {
	gate := make(chan struct{})
	p.update(func() { p.gate = gate })
	return sync.OnceFunc(func() {
		p.update(func() { p.gate = nil })
		close(gate)
	})
}

// waitGated waits until the client's latest list call is held at the
// closed gate: the client, one call at a time, then has none in flight.
func (p *pulls) waitGated(t *testing.T) {
	t.Helper()
	p.waitFor(t, "a pull held at the gate", func(cs []pull) bool {
		return len(cs) > 0 && cs[len(cs)-1].gated && !cs[len(cs)-1].done
	})
}

// waitFor returns a copy of the calls once ok holds for them.
func (p *pulls) waitFor(t *testing.T, what string, ok func([]pull) bool) []pull {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		calls := make([]pull, len(p.calls))
		for i, c := range p.calls {
			calls[i] = *c
		}
		changed := p.changed
		p.mu.Unlock()
		if ok(calls) {
			return calls
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("no %s within %s: %+v", what, waitTimeout, calls)
		}
	}
}

// A new capture is delivered by the very pull that was holding when it
// arrived, not by a later one, and an idle client makes one call per
// interval.
func TestForwardLongPoll(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		srv.Post(t, "POST", "/baseline", nil, nil)
		p := newPulls(t, srv)
		h := newHandler(t, nil)
		const interval = 3
		s := c.start(t, opts{api: p.api, key: srv.Key, endpoint: srv.EndpointID, to: h.URL, interval: interval})
		s.ready(t)

		// A capture while a pull holds: that pull brings it back.
		holding := p.waitFor(t, "a holding pull", func(cs []pull) bool { return len(cs) > 1 && !cs[len(cs)-1].done })
		n := len(holding)
		id := srv.Post(t, "POST", "/new", nil, []byte("x"))
		h.waitFor(t, 1)
		calls := p.waitFor(t, "the holding pull's answer", func(cs []pull) bool { return cs[n-1].done })
		if got := calls[n-1].ids; len(got) != 1 || got[0] != id {
			t.Errorf("the pull holding when %s was captured brought back %v", id, got)
		}

		// Idle: every pull asks to hold for the interval, and they come no
		// faster than one per interval (a held call lasts that long).
		calls = p.waitFor(t, "two idle pulls", func(cs []pull) bool { return len(cs) >= n+3 && cs[n+2].done })
		idle := calls[n:]
		for i, c := range idle {
			if c.wait != strconv.Itoa(interval) {
				t.Errorf("idle pull %d asked to wait %q, want the interval, %d", i, c.wait, interval)
			}
		}
		span := idle[len(idle)-1].sent.Sub(idle[0].sent)
		if limit := int(span/(interval*time.Second)) + 1; len(idle) > limit+1 {
			t.Errorf("%d pulls in %s, want at most one per %ds interval", len(idle), span, interval)
		}
	})
}

// When the project's wait slots are all taken, the client pulls without
// holding, once per interval, and still delivers; once a slot frees it
// holds again.
func TestForwardNoWaitSlot(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		api := srv.Client()
		ctx, release := context.WithCancel(t.Context())
		defer release()
		var held sync.WaitGroup
		for range 4 {
			held.Go(func() {
				// Nothing arrives in the inbox: each holds a slot, takes it
				// again when its wait ends, and tries again when the probe
				// below had it.
				for ctx.Err() == nil {
					_, err := api.Messages(ctx, srv.InboxID, apiclient.MessageQuery{To: "nobody", Wait: 30 * time.Second})
					if err != nil {
						select { // the probe had the slot: take it after
						case <-ctx.Done():
						case <-time.After(10 * time.Millisecond):
						}
					}
				}
			})
		}
		p := newPulls(t, srv)
		probe := func() bool {
			_, err := api.Requests(t.Context(), srv.EndpointID, apiclient.RequestQuery{Wait: time.Second, Path: "/probe"})
			return err != nil
		}
		eventually(t, "the four waits holding every slot", probe)

		h := newHandler(t, nil)
		s := c.start(t, opts{api: p.api, key: srv.Key, endpoint: srv.EndpointID, to: h.URL})
		s.ready(t)
		s.stderr.waitContains(t, "wait slots are taken", 1)
		srv.Post(t, "POST", "/slotless", nil, nil)
		h.waitFor(t, 1)

		release()
		held.Wait()
		s.stderr.waitContains(t, "a wait slot is free again", 1)
		srv.Post(t, "POST", "/held", nil, nil)
		if got := uris(h.waitFor(t, 2)); got[1] != "POST /held" {
			t.Errorf("delivered %v", got)
		}
		if n := strings.Count(s.stderr.String(), "wait slots are taken"); n != 1 {
			t.Errorf("%d lines about the wait slots, want one per episode:\n%s", n, s.stderr)
		}
	})
}

// purge deletes every request of the endpoint, as DELETE
// /endpoints/{id}/requests does for a developer clearing it.
func purge(t *testing.T, srv *capturetest.Server) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "DELETE", srv.APIBase+"/endpoints/"+srv.EndpointID+"/requests", nil)
	req.Header.Set("Authorization", "Bearer "+srv.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("purge: %s", resp.Status)
	}
}

// lostCursorLines returns the warnings about a lost cursor.
func lostCursorLines(stderr string) []string {
	var out []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "no longer exists") {
			out = append(out, line)
		}
	}
	return out
}

// After its endpoint is purged, an idle client says so once and goes on
// holding each pull, without a cursor, for what is captured next: a capture
// after a while is brought back by a held pull, as before the purge.
func TestForwardPurgeHolds(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		p := newPulls(t, srv)
		h := newHandler(t, nil)
		const interval = "1"
		s := c.start(t, opts{api: p.api, key: srv.Key, endpoint: srv.EndpointID, to: h.URL})
		s.ready(t)
		first := srv.Post(t, "POST", "/first", nil, nil)
		h.waitFor(t, 1)
		purge(t, srv)

		// The cursor, first, is refused once; one re-list finds the
		// endpoint empty; then an idle while of held pulls.
		refused := func(cs []pull) int {
			return slices.IndexFunc(cs, func(c pull) bool { return c.status == http.StatusBadRequest })
		}
		calls := p.waitFor(t, "three pulls after the refused one", func(cs []pull) bool {
			i := refused(cs)
			return i >= 0 && len(cs) > i+3 && cs[i+3].done
		})
		i := refused(calls)
		if calls[i].after != first {
			t.Errorf("the refused pull asked after %q, want the purged cursor %s", calls[i].after, first)
		}
		if relist := calls[i+1]; relist.after != "" || relist.wait != "" || len(relist.ids) != 0 {
			t.Errorf("after the refusal: %+v, want one re-list without cursor or wait, finding nothing", relist)
		}
		for j, c := range calls[i+2 : i+4] {
			if c.after != "" || c.since == "" || c.wait != interval || c.status != http.StatusOK {
				t.Errorf("idle pull %d after the purge: %+v, want one holding %ss since the last capture seen, without cursor", j, c, interval)
			}
		}

		// A capture now is brought back by a held pull: the one holding
		// when it arrived or, if that one just timed out, the next.
		n := len(p.waitFor(t, "a holding pull", func(cs []pull) bool { return !cs[len(cs)-1].done }))
		second := srv.Post(t, "POST", "/second", nil, nil)
		if got := uris(h.waitFor(t, 2)); !slices.Equal(got, []string{"POST /first", "POST /second"}) {
			t.Errorf("delivered %v, want first, then second, once each", got)
		}
		calls = p.waitFor(t, "the pull bringing second back", func(cs []pull) bool {
			return slices.ContainsFunc(cs[n-1:], func(c pull) bool { return slices.Contains(c.ids, second) })
		})
		by := calls[n-1+slices.IndexFunc(calls[n-1:], func(c pull) bool { return slices.Contains(c.ids, second) })]
		if by.wait != interval || by.after != "" {
			t.Errorf("%s was brought back by %+v, want a pull holding %ss", second, by, interval)
		}
		for _, c := range calls[i+1:] {
			if c.status != http.StatusOK {
				t.Errorf("pull %+v after the re-list, want none refused", c)
			}
		}

		want := "warning: cursor " + first + " no longer exists (deleted or pruned); " +
			"new baseline: none (the endpoint is empty); forwarding what is captured next"
		if got := lostCursorLines(s.stderr.String()); !slices.Equal(got, []string{want}) {
			t.Errorf("lost-cursor warnings %q, want once:\n%q", got, want)
		}
	})
}

// The baseline after a lost cursor is the newest request left that the
// client had already seen; what is newer is delivered, and the warning
// says so, once.
func TestForwardLostCursorBaseline(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		srv := capturetest.Start(t)
		api := srv.Client()
		p := newPulls(t, srv)
		h := newHandler(t, nil)
		old := srv.Post(t, "POST", "/old", nil, nil)
		s := c.start(t, opts{api: p.api, key: srv.Key, endpoint: srv.EndpointID, to: h.URL})
		if ready := s.ready(t); ready["baseline"] != old {
			t.Fatalf("ready = %v", ready)
		}
		x := srv.Post(t, "POST", "/x", nil, nil)
		h.waitFor(t, 1)
		waitRecorded(t, api, x, 1)

		// With no pull in flight, x (the cursor) goes and y comes.
		open := p.closeGate()
		p.waitGated(t)
		if err := api.DeleteRequest(t.Context(), x); err != nil {
			t.Fatal(err)
		}
		y := srv.Post(t, "POST", "/y", nil, nil)
		open()
		h.waitFor(t, 2)
		waitRecorded(t, api, y, 1)

		// Then everything goes, and z comes.
		open = p.closeGate()
		p.waitGated(t)
		purge(t, srv)
		z := srv.Post(t, "POST", "/z", nil, nil)
		open()
		h.waitFor(t, 3)
		waitRecorded(t, api, z, 1)

		// Nothing more to say once caught up.
		srv.Post(t, "POST", "/w", nil, nil)
		if got := uris(h.waitFor(t, 4)); !slices.Equal(got, []string{"POST /x", "POST /y", "POST /z", "POST /w"}) {
			t.Errorf("delivered %v, want x, y, z, w once each", got)
		}
		want := []string{
			"warning: cursor " + x + " no longer exists (deleted or pruned); new baseline: " + old +
				" (the newest request left that was already seen); forwarding the 1 request captured after it",
			"warning: cursor " + y + " no longer exists (deleted or pruned); new baseline: none " +
				"(no request left was already seen); forwarding the 1 request left",
		}
		if got := lostCursorLines(s.stderr.String()); !slices.Equal(got, want) {
			t.Errorf("lost-cursor warnings:\n%q\nwant:\n%q", got, want)
		}
	})
}
