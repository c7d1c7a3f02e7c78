// Package metrics is what `capture serve` reports at /metrics, in the
// Prometheus text format: captures by kind and project, how long a capture
// waits for its commit, commit batch sizes, active waits, refused API calls,
// open connections, and the size of the database and its write-ahead log.
// No metric carries capture content or the id of a key or secret; project
// ids, which are not secrets, label what is counted per project.
//
// The hot path is counters and histograms updated in place: the store
// reports commits through store.Observer, the listeners count connections
// through Listener, and everything that costs a query is read at scrape
// time.
package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/capturedev/capture/store"
)

// Store is what the metrics read from the database at scrape time.
type Store interface {
	CollectionProjects(ctx context.Context) (map[string]string, error)
	FileSizes() (db, wal int64, err error)
}

var _ Store = (*store.Store)(nil)

// Config says where the metrics come from.
type Config struct {
	Store  Store
	Logger *slog.Logger
}

// Metrics holds capture's metrics and serves them. It is a store.Observer.
type Metrics struct {
	cfg Config
	reg *prometheus.Registry

	commitWait     *prometheus.HistogramVec
	emailWait      prometheus.Observer
	webhookWait    prometheus.Observer
	batchSize      prometheus.Histogram
	refused        *prometheus.CounterVec
	captureRefused *prometheus.CounterVec
	connsOpen      *prometheus.GaugeVec
	connsAccepted  *prometheus.CounterVec

	// counts holds a *collectionCount per inbox or endpoint id.
	counts sync.Map

	mu     sync.Mutex
	owners map[string]string // collection id → project id, never forgotten

	sizesRead    flight[[2]int64]
	projectsRead flight[map[string]string]
}

var _ store.Observer = (*Metrics)(nil)

// collectionCount counts the captures committed into one collection.
type collectionCount struct {
	kind store.CaptureKind
	n    atomic.Uint64
}

var (
	capturesDesc = prometheus.NewDesc("capture_captures_total",
		"Captures committed, by kind (email, webhook) and project id.", []string{"kind", "project"}, nil)
	waitsDesc = prometheus.NewDesc("capture_active_waits",
		"Long-polls (wait=) holding one of their project's wait slots, by project id.", []string{"project"}, nil)
)

// New registers every metric in a registry of its own.
func New(cfg Config) *Metrics {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Metrics{cfg: cfg, reg: prometheus.NewRegistry(), owners: map[string]string{}}
	m.commitWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "capture_ingest_commit_seconds",
		Help: "Time from a capture being handed to the store until its commit, by kind; the sender is answered after it.",
		// From half a millisecond, a commit's usual cost, to the 5 s after
		// which a capture is refused.
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"kind"})
	m.emailWait = m.commitWait.WithLabelValues(store.EmailCapture.String())
	m.webhookWait = m.commitWait.WithLabelValues(store.WebhookCapture.String())
	m.batchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "capture_commit_batch_size",
		Help:    "Writes committed together in one transaction (group commit).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 10), // up to the writer's 512
	})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capture_api_refused_total",
		Help: "Read API calls answered with an error, by error code (rate_limited, too_many_waits, unauthorized, …).",
	}, []string{"code"})
	for _, code := range []string{"rate_limited", "too_many_waits", "unauthorized"} {
		m.refused.WithLabelValues(code)
	}
	m.captureRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capture_captures_refused_total",
		Help: "Webhooks, and emails over SMTP (and sign-ins) or a provider API, refused, by kind and error code: quota_exceeded (413, 552), unavailable (503, 451, 452), unauthorized (535, 401), invalid_parameter, not_found, …",
	}, []string{"kind", "code"})
	for _, kind := range []string{"webhook", "email"} {
		for _, code := range []string{"quota_exceeded", "unavailable"} {
			m.captureRefused.WithLabelValues(kind, code)
		}
	}
	m.connsOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "capture_connections_open",
		Help: "Connections open now, by listener (http, capture, smtp_starttls, smtp_tls).",
	}, []string{"listener"})
	m.connsAccepted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capture_connections_accepted_total",
		Help: "Connections accepted, by listener (http, capture, smtp_starttls, smtp_tls).",
	}, []string{"listener"})

	m.reg.MustRegister(m.commitWait, m.batchSize, m.refused, m.captureRefused, m.connsOpen, m.connsAccepted,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		(*sizes)(m),
		(*scraped)(m),
	)
	return m
}

// Handler serves the metrics in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(m.cfg.Logger.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// BatchCommitted implements store.Observer.
func (m *Metrics) BatchCommitted(ops int) { m.batchSize.Observe(float64(ops)) }

// CaptureCommitted implements store.Observer.
func (m *Metrics) CaptureCommitted(kind store.CaptureKind, collectionID string, queued time.Duration) {
	switch kind {
	case store.EmailCapture:
		m.emailWait.Observe(queued.Seconds())
	case store.WebhookCapture:
		m.webhookWait.Observe(queued.Seconds())
	}
	c, ok := m.counts.Load(collectionID)
	if !ok {
		c, _ = m.counts.LoadOrStore(collectionID, &collectionCount{kind: kind})
	}
	c.(*collectionCount).n.Add(1)
}

// Refused counts a read API call answered with error code.
func (m *Metrics) Refused(code string) { m.refused.WithLabelValues(code).Inc() }

// WebhookRefused counts a webhook the capture listener refused with code.
func (m *Metrics) WebhookRefused(code string) {
	m.captureRefused.WithLabelValues("webhook", code).Inc()
}

// EmailRefused counts an SMTP message or sign-in refused with code.
func (m *Metrics) EmailRefused(code string) { m.captureRefused.WithLabelValues("email", code).Inc() }

// ReadTimeout bounds what a scrape waits for the database: a scrape
// (Prometheus gives up after 10 s by default) is answered in time while
// the database does not answer, without what could not be read.
const ReadTimeout = 2 * time.Second

var (
	databaseSizeDesc = prometheus.NewDesc("capture_database_size_bytes", "Size of the SQLite database file.", nil, nil)
	walSizeDesc      = prometheus.NewDesc("capture_wal_size_bytes", "Size of the database's write-ahead log.", nil, nil)
)

// sizes reports the size of the database and its write-ahead log. When
// they cannot be read within ReadTimeout both are left out of the scrape,
// not reported as 0, which would read as a real drop: Prometheus marks
// them stale, and a gap (or absent()) shows the outage.
type sizes Metrics

func (s *sizes) Describe(ch chan<- *prometheus.Desc) {
	ch <- databaseSizeDesc
	ch <- walSizeDesc
}

func (s *sizes) Collect(ch chan<- prometheus.Metric) {
	m := (*Metrics)(s)
	v, err := m.sizesRead.do(ReadTimeout, func() ([2]int64, error) {
		db, wal, err := m.cfg.Store.FileSizes()
		return [2]int64{db, wal}, err
	})
	if err != nil {
		m.cfg.Logger.Warn("metrics: database size left out", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(databaseSizeDesc, prometheus.GaugeValue, float64(v[0]))
	ch <- prometheus.MustNewConstMetric(walSizeDesc, prometheus.GaugeValue, float64(v[1]))
}

// errNoAnswer is a read that took longer than its scrape would wait.
var errNoAnswer = fmt.Errorf("the database did not answer within %s", ReadTimeout)

// flight is one read of the database at a time: scrapes that come while
// it is out wait for it, each for as long as it will, and one that gives
// up leaves it running (bounded by the store) for the next.
type flight[T any] struct {
	mu  sync.Mutex
	out *call[T]
}

type call[T any] struct {
	done chan struct{}
	v    T
	err  error
}

func (f *flight[T]) do(wait time.Duration, read func() (T, error)) (T, error) {
	f.mu.Lock()
	c := f.out
	if c == nil {
		c = &call[T]{done: make(chan struct{})}
		f.out = c
		go func() {
			c.v, c.err = read()
			f.mu.Lock()
			f.out = nil
			f.mu.Unlock()
			close(c.done)
		}()
	}
	f.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-c.done:
		return c.v, c.err
	case <-t.C:
		var zero T
		return zero, errNoAnswer
	}
}

// scraped collects what is worked out at scrape time: captures per
// project, and the waits in progress.
type scraped Metrics

func (s *scraped) Describe(ch chan<- *prometheus.Desc) { ch <- capturesDesc }

func (s *scraped) Collect(ch chan<- prometheus.Metric) {
	m := (*Metrics)(s)
	type key struct {
		kind    store.CaptureKind
		project string
	}
	owners := m.projects()
	totals := map[key]uint64{}
	m.counts.Range(func(id, c any) bool {
		cc := c.(*collectionCount)
		project, ok := owners[id.(string)]
		if !ok {
			project = "unknown" // deleted before it was ever looked up
		}
		totals[key{cc.kind, project}] += cc.n.Load()
		return true
	})
	for k, n := range totals {
		ch <- prometheus.MustNewConstMetric(capturesDesc, prometheus.CounterValue, float64(n), k.kind.String(), k.project)
	}
}

// CollectWaits reports the long-polls in progress that waits returns, by
// project id; every project known to hold a collection is reported, at 0
// when it has none.
func (m *Metrics) CollectWaits(waits func() map[string]int) {
	m.reg.MustRegister(waitsCollector{m, waits})
}

type waitsCollector struct {
	m     *Metrics
	waits func() map[string]int
}

func (c waitsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- waitsDesc }

func (c waitsCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[string]int{}
	for _, project := range c.m.projects() {
		counts[project] = 0
	}
	for project, n := range c.waits() {
		counts[project] = n
	}
	for project, n := range counts {
		ch <- prometheus.MustNewConstMetric(waitsDesc, prometheus.GaugeValue, float64(n), project)
	}
}

// projects returns the project of every collection, asking the store again
// only when one was not known yet.
func (m *Metrics) projects() map[string]string {
	m.mu.Lock()
	unknown := len(m.owners) == 0
	m.counts.Range(func(id, _ any) bool {
		if _, ok := m.owners[id.(string)]; !ok {
			unknown = true
			return false
		}
		return true
	})
	m.mu.Unlock()
	if unknown {
		// Both collectors that ask come together: one read, not two in
		// turn, each bounded.
		owners, err := m.projectsRead.do(ReadTimeout, func() (map[string]string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return m.cfg.Store.CollectionProjects(ctx)
		})
		if err != nil {
			m.cfg.Logger.Warn("metrics: projects of inboxes and endpoints", "err", err)
		}
		m.mu.Lock()
		for id, project := range owners {
			m.owners[id] = project
		}
		m.mu.Unlock()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]string, len(m.owners))
	for id, project := range m.owners {
		out[id] = project
	}
	return out
}

// Listener counts the connections l accepts, and those still open, under
// the listener's name.
func (m *Metrics) Listener(name string, l net.Listener) net.Listener {
	return &countingListener{Listener: l, open: m.connsOpen.WithLabelValues(name),
		accepted: m.connsAccepted.WithLabelValues(name)}
}

type countingListener struct {
	net.Listener
	open     prometheus.Gauge
	accepted prometheus.Counter
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	l.accepted.Inc()
	l.open.Inc()
	return &countedConn{Conn: c, open: l.open}, nil
}

type countedConn struct {
	net.Conn
	open   prometheus.Gauge
	closed atomic.Bool
}

func (c *countedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.open.Dec()
	}
	return c.Conn.Close()
}
