package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/server/metrics"
	"github.com/capturedev/capture/server/outage"
	"github.com/capturedev/capture/store"
)

// readyTimeout bounds how long /readyz waits for its write to commit: an
// orchestrator's probe must get an answer even when the database hangs.
const readyTimeout = 2 * time.Second

// ops serves what operators and orchestrators read on the HTTP listener,
// without authentication: liveness, readiness and metrics (SPEC §18).
type ops struct {
	store   *store.Store
	metrics *metrics.Metrics
	log     *slog.Logger

	// One readiness write at a time: probes that come while one is out
	// share its answer, so a stalled database does not pile them up.
	mu       sync.Mutex
	inflight *flight

	// outage logs failed probes once for as long as they fail: an
	// orchestrator probes every few seconds.
	outage *outage.Log
}

// flight is one readiness write; err is set before done is closed.
type flight struct {
	done chan struct{}
	err  error
}

func newOps(st *store.Store, log *slog.Logger) *ops {
	return &ops{store: st, metrics: metrics.New(metrics.Config{Store: st, Logger: log}), log: log,
		outage: outage.New(log, "not ready", "ready again", "failed_probes")}
}

func (o *ops) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		// The process answers, so it is alive; nothing else is checked.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok")
	})
	mux.HandleFunc("GET /readyz", o.readyz)
	mux.Handle("GET /metrics", o.metrics.Handler())
}

// readyz answers 200 once a real write has committed through the writer
// that commits captures, and 503 when it fails or takes longer than
// readyTimeout.
func (o *ops) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := o.ping(ctx); err != nil {
		msg := "the database cannot commit: " + err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			msg = "the database did not commit within " + readyTimeout.String()
		}
		// One cause for readiness, whose probes time out before the
		// store gives its own reason: what each probe met is for debug.
		o.outage.Refused("the database cannot commit", err)
		contract.WriteError(w, &contract.Error{Code: contract.CodeUnavailable, Message: msg, RetryAfter: time.Second})
		return
	}
	o.outage.Taken()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ok")
}

// ping runs the store's readiness write, or joins the one already out, and
// waits for it as long as ctx allows.
func (o *ops) ping(ctx context.Context) error {
	o.mu.Lock()
	f := o.inflight
	if f == nil {
		f = &flight{done: make(chan struct{})}
		o.inflight = f
		go func() {
			// Once queued, a write ends when committed, whatever its
			// context says; it is bounded by the store, not by a probe.
			f.err = o.store.Ping(context.Background())
			o.mu.Lock()
			o.inflight = nil
			o.mu.Unlock()
			close(f.done)
		}()
	}
	o.mu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}
