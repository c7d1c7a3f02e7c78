// Package outage logs a passing failure that refuses captures (the disk
// full, the database locked, stalled or unreachable) once for as long as
// it lasts, rather than once for every capture it refuses: at the first
// refusal for each cause, and when captures are taken again, with how many
// were refused meanwhile. Each refusal itself is for debug.
package outage

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capturedev/capture/store"
)

// Log follows the refusals of one listener (or of readiness probes).
type Log struct {
	log                   *slog.Logger
	refused, taken, count string

	refusing atomic.Bool // read without the lock for every capture taken
	mu       sync.Mutex
	causes   []string // of the refusals under way, in the order they came
	n        int
	since    time.Time
}

// New returns a Log that logs refused (an ERROR) at the first refusal for
// each cause, and taken (INFO) when they end, with their count under the
// key count: for example "capture: webhooks refused", "capture: webhooks
// taken again", "refused".
func New(log *slog.Logger, refused, taken, count string) *Log {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Log{log: log, refused: refused, taken: taken, count: count}
}

// Refused records one refusal because of why (what store.Why says) with
// err, and logs it unless refusals for that cause are under way already.
// attrs describe this refusal: they go on the line that logs a new cause,
// and on every refusal's line at debug.
func (l *Log) Refused(why string, err error, attrs ...any) {
	l.mu.Lock()
	if !l.refusing.Load() {
		l.since = time.Now()
		l.refusing.Store(true)
	}
	l.n++
	first := !slices.Contains(l.causes, why)
	if first {
		l.causes = append(l.causes, why)
	}
	l.mu.Unlock()
	// Built only for a line that is written: an outage refuses every
	// capture, and at the default level logs one of them.
	switch {
	case first:
		l.log.Error(l.refused, append([]any{"why", why, "err", err}, attrs...)...)
	case l.log.Enabled(context.Background(), slog.LevelDebug):
		l.log.Debug(l.refused, append([]any{"why", why, "err", err}, attrs...)...)
	}
}

// Failed records a store call that failed with err: a failure that
// passes (the disk full, the database locked or unreachable: store.Why
// names it) is a refusal, logged once while it lasts; anything else is
// logged as msg, each time.
func (l *Log) Failed(err error, msg string, attrs ...any) {
	if why := store.Why(err); why != "" {
		l.Refused(why, err, attrs...)
		return
	}
	l.log.Error(msg, append(attrs, "err", err)...)
}

// Taken records that a capture was taken (or a probe answered): refusals
// under way end, which is logged with their count. Cheap when there were
// none.
func (l *Log) Taken() {
	if !l.refusing.Load() {
		return
	}
	l.mu.Lock()
	if !l.refusing.Load() {
		l.mu.Unlock()
		return
	}
	causes, n, since := l.causes, l.n, l.since
	l.refusing.Store(false)
	l.causes, l.n = nil, 0
	l.mu.Unlock()
	l.log.Info(l.taken, l.count, n, "for", time.Since(since).Round(time.Millisecond), "why", strings.Join(causes, "; "))
}
