package server_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/storetest"
)

// Several `serve` replicas share one PostgreSQL database (SPEC §19). These
// tests run two real processes on one database, whichever backend the rest
// of the suite runs on.

// startReplicas starts n replicas on a fresh database at once, and returns
// them with the one that bootstrapped it first.
func startReplicas(t testing.TB, n int) (url string, first *serveProc, all []*serveProc) {
	t.Helper()
	url = storetest.PostgresDatabase(t)
	for i := range n {
		all = append(all, launchServe(t, filepath.Join(t.TempDir(), fmt.Sprint("replica", i)), "--database", url))
	}
	for _, p := range all {
		p.awaitBanner()
		if p.banner["API key"] != "" {
			if first != nil {
				t.Fatalf("two replicas bootstrapped the database: keys %s and %s", first.banner["API key"], p.banner["API key"])
			}
			first = p
		}
	}
	if first == nil {
		t.Fatal("no replica bootstrapped the database")
	}
	return url, first, all
}

// apiGet calls the read API of p with key and returns the status and body.
func apiGet(ctx context.Context, p *serveProc, key, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", p.banner["Read API"]+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// heldWaits reads how many waits p holds now, from its metrics.
func heldWaits(t testing.TB, p *serveProc) int {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(p.banner["Read API"], "/api/v1") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "capture_active_waits{") {
			var v float64
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
			n += int(v)
		}
	}
	return n
}

// awaitWaits returns once p holds at least n waits. The test must know a
// wait is held before it sends what wakes it; there is no event to watch
// from outside the process, so it asks, a bounded number of times.
func awaitWaits(t testing.TB, p *serveProc, n int) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for range 2000 {
		if heldWaits(t, p) >= n {
			return
		}
		<-tick.C
	}
	t.Fatalf("%s holds fewer than %d waits", p.banner["Read API"], n)
}

// Replicas starting together bootstrap once, present one certificate, and
// a capture through one wakes a wait held by the other.
func TestReplicasBootstrapOnceAndWakeEachOther(t *testing.T) {
	_, first, ps := startReplicas(t, 2)
	a, b := ps[0], ps[1]
	key := first.banner["API key"]
	if a.banner["Inbox"] != b.banner["Inbox"] || a.endpointID() != b.endpointID() {
		t.Errorf("the replicas show different defaults: inbox %s and %s, endpoint %s and %s",
			a.banner["Inbox"], b.banner["Inbox"], a.endpointID(), b.endpointID())
	}

	// The same certificate on both, which the CA `capture ca` prints
	// vouches for.
	var presented [][]byte
	for _, p := range ps {
		conn, err := tls.Dial("tcp", p.smtpTLS, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("implicit TLS on %s: %v", p.smtpTLS, err)
		}
		presented = append(presented, conn.ConnectionState().PeerCertificates[0].Raw)
		conn.Close()
		tp, err := p.smtpSession(p.banner["Inbox"], first.banner["SMTP password"])
		if err != nil {
			t.Fatalf("SMTP verified by the shared CA on %s: %v", p.smtp, err)
		}
		tp.Close()
	}
	if string(presented[0]) != string(presented[1]) {
		t.Error("the replicas present different certificates")
	}

	endpoint := a.endpointID()
	got := make(chan string, 1)
	go func() {
		_, body, err := apiGet(context.Background(), b, key, "/endpoints/"+endpoint+"/requests?wait=20")
		if err != nil {
			body = err.Error()
		}
		got <- body
	}()
	awaitWaits(t, b, 1)
	status, _, body, err := post(a.captureURL()+"/through-a", "{}")
	if err != nil || status != 200 {
		t.Fatalf("capture through A: %d %v", status, err)
	}
	var ack struct{ ID string }
	json.Unmarshal([]byte(body), &ack)
	select {
	case list := <-got:
		if !strings.Contains(list, ack.ID) || !strings.Contains(list, "/through-a") {
			t.Errorf("the wait on B returned %s, want %s", list, ack.ID)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the wait on B was not woken by the capture through A")
	}
}

// The per-project wait limit and the per-key rate limit hold across
// replicas: four waits spread over both leave no room for a fifth on
// either, and a key's burst is spent wherever its calls land.
func TestReplicasShareLimits(t *testing.T) {
	_, first, ps := startReplicas(t, 2)
	a, b := ps[0], ps[1]
	key := first.banner["API key"]
	endpoint := a.endpointID()
	ctx, cancel := context.WithCancel(t.Context())
	var held sync.WaitGroup
	for i, p := range []*serveProc{a, a, b, b} {
		held.Go(func() {
			apiGet(ctx, p, key, fmt.Sprintf("/endpoints/%s/requests?wait=30&path=/never/%d", endpoint, i))
		})
	}
	awaitWaits(t, a, 2)
	awaitWaits(t, b, 2)
	for _, p := range ps {
		status, body, err := apiGet(t.Context(), p, key, "/endpoints/"+endpoint+"/requests?wait=5&path=/fifth")
		if err != nil || status != 429 || !strings.Contains(body, "too_many_waits") {
			t.Errorf("a fifth wait on %s: %d %s %v, want 429 too_many_waits", p.banner["Read API"], status, body, err)
		}
	}
	cancel()
	held.Wait()

	// The free plan allows bursts of 100 calls and 50 a second after.
	// 300 calls, half on each replica: each alone would take its 150 (a
	// burst and a little refill) if each counted for itself; shared, the
	// key runs out unless the calls took four seconds or more.
	var limited atomic.Int64
	var calls sync.WaitGroup
	for w := range 10 {
		calls.Go(func() {
			p := ps[w%2]
			for range 30 {
				status, _, err := apiGet(t.Context(), p, key, "/me")
				if err == nil && status == 429 {
					limited.Add(1)
				}
			}
		})
	}
	calls.Wait()
	if limited.Load() == 0 {
		t.Error("300 calls of one key over two replicas were all allowed: each replica counted alone")
	}
}

// kill -9 of one replica under load loses nothing it acknowledged: every
// capture either replica answered 200 for is stored.
func TestReplicaKilledUnderLoadLosesNothingAcknowledged(t *testing.T) {
	url, _, ps := startReplicas(t, 2)
	a, b := ps[0], ps[1]
	endpoint := a.endpointID()
	base := func(p *serveProc) string { return p.captureURL()[:strings.LastIndex(p.captureURL(), "/")] }

	var mu sync.Mutex
	acked := map[string]bool{}
	var fromA atomic.Int64
	killed := make(chan struct{})
	var load sync.WaitGroup
	for w := range 8 {
		p := ps[w%2]
		load.Go(func() {
			client := &http.Client{Timeout: 10 * time.Second}
			for i := range 150 {
				resp, err := client.Post(fmt.Sprintf("%s/%s/w%d/%d", base(p), endpoint, w, i), "application/json", strings.NewReader("{}"))
				if err != nil {
					continue // the replica is gone
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var ack struct{ ID string }
				if resp.StatusCode == 200 && json.Unmarshal(body, &ack) == nil && ack.ID != "" {
					mu.Lock()
					acked[ack.ID] = true
					mu.Unlock()
					if p == a && fromA.Add(1) == 100 {
						close(killed)
					}
				}
			}
		})
	}
	loaded := make(chan struct{})
	go func() { load.Wait(); close(loaded) }()
	select {
	case <-killed:
		a.cmd.Process.Signal(syscall.SIGKILL)
	case <-loaded:
		t.Fatalf("replica A acknowledged %d captures of its 600, not the 100 to kill it after", fromA.Load())
	}
	<-loaded

	st, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stored := map[string]bool{}
	page := store.Page{Limit: store.MaxLimit}
	for {
		l, err := st.Requests(t.Context(), endpoint, store.RequestFilter{}, page)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.Items {
			stored[r.ID] = true
		}
		if l.Next == "" {
			break
		}
		page.Before = l.Next
	}
	missing := 0
	for id := range acked {
		if !stored[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged captures are not stored", missing, len(acked))
	}
	// The survivor still serves.
	if status, _, _, err := post(b.captureURL()+"/after", "{}"); err != nil || status != 200 {
		t.Errorf("the surviving replica after the kill: %d %v", status, err)
	}
}

// BenchmarkCrossReplicaWake measures how long a wait held by one replica
// takes to return after a capture through the other is acknowledged.
//
//	go test -run '^$' -bench CrossReplicaWake -benchtime 50x ./server/
func BenchmarkCrossReplicaWake(b *testing.B) {
	_, first, ps := startReplicas(b, 2)
	a, w := ps[0], ps[1]
	key := first.banner["API key"]
	endpoint := a.endpointID()
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		returned := make(chan time.Time, 1)
		go func() {
			apiGet(context.Background(), w, key, fmt.Sprintf("/endpoints/%s/requests?wait=20&path=/wake/%d", endpoint, i))
			returned <- time.Now()
		}()
		awaitWaits(b, w, 1)
		status, _, _, err := post(fmt.Sprintf("%s/wake/%d", a.captureURL(), i), "{}")
		acked := time.Now()
		if err != nil || status != 200 {
			b.Fatalf("capture: %d %v", status, err)
		}
		lat = append(lat, (<-returned).Sub(acked))
		for heldWaits(b, w) > 0 {
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}
