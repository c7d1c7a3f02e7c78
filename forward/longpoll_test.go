package forward_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/forward/internal/capturetest"
)

// pulls is a proxy to the read API that records every list call of
// requests: the wait it asked for, when it was sent and answered, and the
// ids it brought back.
type pulls struct {
	api string

	mu      sync.Mutex
	calls   []*pull
	changed chan struct{}
}

type pull struct {
	wait          string
	sent, arrived time.Time
	ids           []string
	done          bool
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
		c := &pull{wait: r.URL.Query().Get("wait"), sent: time.Now()}
		p.update(func() { p.calls = append(p.calls, c) })
		rec := &recorder{ResponseWriter: w}
		rp.ServeHTTP(rec, r)
		var l struct{ Items []struct{ ID string } }
		json.Unmarshal(rec.body.Bytes(), &l)
		p.update(func() {
			c.arrived, c.done = time.Now(), true
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
	body bytes.Buffer
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
