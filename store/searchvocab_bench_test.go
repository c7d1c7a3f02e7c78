package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkVocabularySweep sweeps the vocabulary an endpoint at the free
// plan's cap leaves after 37,500 webhooks with four unique ids each, the
// way Stripe sends them (about 150,000 terms, 40,000 of them held), while
// a sender captures 500 webhooks a second. It reports the vocabulary
// before and after, how long the slices' writes took, and the sender's
// captures during the sweep and before it.
//
//	go test ./store -run '^$' -bench VocabularySweep -benchtime 1x
func BenchmarkVocabularySweep(b *testing.B) {
	for range b.N {
		b.StopTimer()
		ctx := context.Background()
		s, err := openSQLite(ctx, filepath.Join(b.TempDir(), DBFile), indexInterval, slog.Default())
		if err != nil {
			b.Fatal(err)
		}
		p, err := s.CreateProject(ctx, "bench", "free")
		if err != nil {
			b.Fatal(err)
		}
		ep, err := s.CreateEndpoint(ctx, p.ID, "stripe", nil)
		if err != nil {
			b.Fatal(err)
		}
		const total, kept = 37_500, 10_000
		old := time.Now().Add(-p.Plan.Retention - time.Hour)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Go(func() {
				for i := g; i < total; i += 8 {
					at := time.Now()
					if i < total-kept {
						at = old
					}
					if _, err := s.InsertRequest(ctx, stripeWebhook(ep.ID, at)); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		if err := s.indexStaged(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := s.prune(ctx, time.Now()); err != nil {
			b.Fatal(err)
		}
		if err := s.indexStaged(ctx); err != nil {
			b.Fatal(err)
		}

		// A sender capturing a webhook every 2 ms, first alone, then while
		// the vocabulary is swept.
		send := func(stop <-chan struct{}, n int) []time.Duration {
			var took []time.Duration
			tick := time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
			for i := 0; n == 0 || i < n; i++ {
				select {
				case <-stop:
					return took
				case <-tick.C:
				}
				start := time.Now()
				if _, err := s.InsertRequest(ctx, stripeWebhook(ep.ID, time.Now())); err != nil {
					b.Error(err)
					return took
				}
				took = append(took, time.Since(start))
			}
			return took
		}
		alone := send(nil, 1000)

		stateStart := time.Now()
		sw := vocabularySweep{force: true}
		if err := s.queryRow(ctx, vocabularyStateQuery).Scan(&sw.terms, &sw.deleted); err != nil {
			b.Fatal(err)
		}
		stateTook := time.Since(stateStart)
		stop := make(chan struct{})
		var during []time.Duration
		var sending sync.WaitGroup
		sending.Go(func() { during = send(stop, 0) })
		b.StartTimer()
		start := time.Now()
		err = s.sweepVocabulary(ctx, &sw)
		took := time.Since(start)
		b.StopTimer()
		close(stop)
		sending.Wait()
		if err != nil {
			b.Fatal(err)
		}
		var after int64
		if err := s.queryRow(ctx, `SELECT count(*) FROM search_terms`).Scan(&after); err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
		quantile := func(d []time.Duration, q float64) float64 {
			d = slices.Sorted(slices.Values(d))
			return ms(d[int(float64(len(d)-1)*q)])
		}
		b.ReportMetric(float64(sw.terms), "terms-before")
		b.ReportMetric(float64(after), "terms-after")
		b.ReportMetric(float64(sw.slices), "slices")
		b.ReportMetric(quantile(sw.writes, 0.5), "slice-write-p50-ms")
		b.ReportMetric(quantile(sw.writes, 0.9), "slice-write-p90-ms")
		b.ReportMetric(ms(sw.longest), "slice-work-max-ms")
		b.ReportMetric(ms(stateTook), "state-query-ms")
		b.ReportMetric(quantile(alone, 1), "capture-max-ms-alone")
		b.ReportMetric(quantile(during, 1), "capture-max-ms-sweeping")
		b.ReportMetric(quantile(alone, 0.5), "capture-p50-ms-alone")
		b.ReportMetric(quantile(alone, 0.99), "capture-p99-ms-alone")
		b.ReportMetric(quantile(during, 0.5), "capture-p50-ms-sweeping")
		b.ReportMetric(quantile(during, 0.99), "capture-p99-ms-sweeping")
		b.Logf("%d terms, %d after; sweep %s in %d slices; slice writes p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms; %d captures during it",
			sw.terms, after, took.Round(time.Millisecond), sw.slices, quantile(sw.writes, 0.5), quantile(sw.writes, 0.9),
			quantile(sw.writes, 0.99), quantile(sw.writes, 1), len(during))
	}
}

// stripeWebhook is a webhook as Stripe sends one, with four unique ids.
func stripeWebhook(endpointID string, at time.Time) *NewRequest {
	id := func() string {
		var u [16]byte
		rand.Read(u[:])
		return hex.EncodeToString(u[:])
	}
	body := fmt.Sprintf(`{"id":"evt_%s","type":"invoice.paid","data":{"object":{"id":"in_%s","customer":"cus_%s"}}}`, id(), id(), id())
	return &NewRequest{EndpointID: endpointID, ReceivedAt: at, Method: "POST", Path: "/hooks/stripe",
		ContentType: "application/json", Headers: []Header{{Name: "Idempotency-Key", Values: []string{id()}}},
		Body: []byte(body)}
}
