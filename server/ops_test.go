package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/capturedev/capture/server"
	"github.com/capturedev/capture/server/servertest"
	"github.com/capturedev/capture/store"
)

// running is a server on loopback ports until the test ends.
type running struct {
	srv  *server.Server
	st   *store.Store
	boot store.Bootstrap
	base string // the HTTP listener's root
}

func runServer(t *testing.T) *running {
	t.Helper()
	st, boot := servertest.Open(t, "free")
	return runServerWith(t, st, boot, servertest.Config(t))
}

// runServerWith runs a server of st with cfg until the test ends.
func runServerWith(t *testing.T, st *store.Store, boot store.Bootstrap, cfg server.Config) *running {
	t.Helper()
	srv, err := server.Listen(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	return &running{srv: srv, st: st, boot: boot, base: strings.TrimSuffix(srv.APIBase(), "/api/v1")}
}

func (r *running) get(t *testing.T, path, key string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", r.base+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	r := runServer(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, body := r.get(t, path, "")
		if resp.StatusCode != 200 || body != "ok" {
			t.Errorf("%s = %d %q, want 200 ok without a key", path, resp.StatusCode, body)
		}
	}

	// A database that cannot commit makes the server unready, and says so
	// in the error envelope; the process still answers as alive.
	r.st.Close()
	resp, body := r.get(t, "/readyz", "")
	var env struct {
		Error struct{ Code, Message string }
	}
	if resp.StatusCode != 503 || json.Unmarshal([]byte(body), &env) != nil || env.Error.Code != "unavailable" ||
		resp.Header.Get("Retry-After") == "" {
		t.Errorf("/readyz with the database closed = %d %s", resp.StatusCode, body)
	}
	if resp, body := r.get(t, "/healthz", ""); resp.StatusCode != 200 || body != "ok" {
		t.Errorf("/healthz = %d %q", resp.StatusCode, body)
	}
}

// A database file removed while serving makes the server unready, saying
// why, and refuses captures, instead of acknowledging captures
// into a file the next start will not open.
func TestDatabaseFileRemovedWhileServing(t *testing.T) {
	t.Parallel()
	r := runServer(t)
	if r.st.Shared() {
		t.Skip("SQLite only: PostgreSQL has no file to lose")
	}
	// A message to delete through the API once the file is gone: a
	// delete always writes, where a purge of an empty inbox may not.
	msgID, err := r.st.InsertMessage(t.Context(), &store.NewMessage{InboxID: r.boot.Inbox.ID, ReceivedAt: time.Now(),
		Subject: "kept?", Raw: []byte("Subject: kept?\r\n\r\nx")})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(r.st.Path()); err != nil {
		t.Fatal(err)
	}
	const cause = "capture.db was removed or replaced while serving; restart serve"
	resp, body := r.get(t, "/readyz", "")
	if resp.StatusCode != 503 || !strings.Contains(body, cause) {
		t.Errorf("/readyz with %s removed = %d %s, want 503 naming the cause", store.DBFile, resp.StatusCode, body)
	}
	resp, err = http.Post(r.srv.CaptureBase()+"/"+r.boot.Endpoint.ID+"/hook", "text/plain", strings.NewReader("lost?"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "removed") {
		t.Errorf("webhook with %s removed = %d %s, want 503 with Retry-After naming the cause", store.DBFile, resp.StatusCode, b)
	}
	// The API's writes say the same.
	req, _ := http.NewRequest("DELETE", r.srv.APIBase()+"/messages/"+msgID, nil)
	req.Header.Set("Authorization", "Bearer "+r.boot.Secret)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(b), "removed") {
		t.Errorf("delete with %s removed = %d %s, want 503 naming the cause", store.DBFile, resp.StatusCode, b)
	}
}

// scrape reads /metrics with the Prometheus text parser.
func (r *running) scrape(t *testing.T) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	resp, body := r.get(t, "/metrics", "")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams, body
}

// value is the value of the sample of family name whose labels include
// every pair of want; -1 when there is none.
func value(fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	f, ok := fams[name]
	if !ok {
		return -1
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(want); i += 2 {
			if labels[want[i]] != want[i+1] {
				match = false
			}
		}
		if !match {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

// eventually scrapes until ok holds: the store reports a commit right
// after answering the sender, and a closed connection is counted when the
// server sees it closed.
func (r *running) eventually(t *testing.T, what string, ok func(map[string]*dto.MetricFamily) bool) map[string]*dto.MetricFamily {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		fams, _ := r.scrape(t)
		if ok(fams) {
			return fams
		}
		select {
		case <-deadline:
			t.Fatalf("metrics never showed %s", what)
		case <-tick.C:
		}
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	r := runServer(t)
	project := r.boot.Project.ID
	fams, _ := r.scrape(t)
	for name, typ := range map[string]dto.MetricType{
		"capture_ingest_commit_seconds":      dto.MetricType_HISTOGRAM,
		"capture_commit_batch_size":          dto.MetricType_HISTOGRAM,
		"capture_api_refused_total":          dto.MetricType_COUNTER,
		"capture_captures_refused_total":     dto.MetricType_COUNTER,
		"capture_active_waits":               dto.MetricType_GAUGE,
		"capture_database_size_bytes":        dto.MetricType_GAUGE,
		"capture_wal_size_bytes":             dto.MetricType_GAUGE,
		"capture_connections_open":           dto.MetricType_GAUGE,
		"capture_connections_accepted_total": dto.MetricType_COUNTER,
		"go_goroutines":                      dto.MetricType_GAUGE,
		"process_resident_memory_bytes":      dto.MetricType_GAUGE,
	} {
		if f, ok := fams[name]; !ok || f.GetType() != typ || f.GetHelp() == "" {
			t.Errorf("%s: %v, want a %s with help", name, f, typ)
		}
	}
	if v := value(fams, "capture_database_size_bytes"); v <= 0 {
		t.Errorf("database size %v", v)
	}
	if v := value(fams, "capture_api_refused_total", "code", "unauthorized"); v != 0 {
		t.Errorf("unauthorized before any call = %v, want 0", v)
	}

	// Two webhooks and an email, a refused call, a wait held, an SMTP
	// connection open.
	capture := "http://" + r.srv.CaptureAddr().String() + "/" + r.boot.Endpoint.ID
	for _, body := range []string{"secret-body-1", "secret-body-2"} {
		resp, err := http.Post(capture+"/hook", "text/plain", strings.NewReader(body))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("capture: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	// Two refused: a path that names no endpoint, a body over the plan.
	for _, refused := range []struct {
		url    string
		body   string
		status int
	}{
		{"http://" + r.srv.CaptureAddr().String() + "/whe_nope/hook", "x", 404},
		{capture + "/hook", strings.Repeat("x", 1<<20+1), 413},
	} {
		resp, err := http.Post(refused.url, "text/plain", strings.NewReader(refused.body))
		if err != nil || resp.StatusCode != refused.status {
			t.Fatalf("refused capture: %v %v, want %d", resp, err, refused.status)
		}
		resp.Body.Close()
	}
	if _, err := r.st.InsertMessage(t.Context(), &store.NewMessage{InboxID: r.boot.Inbox.ID, ReceivedAt: time.Now(),
		Subject: "secret-subject", Raw: []byte("Subject: secret-subject\r\n\r\nx")}); err != nil {
		t.Fatal(err)
	}
	if resp, _ := r.get(t, "/api/v1/me", "cap_wrong"); resp.StatusCode != 401 {
		t.Fatalf("bad key: %d", resp.StatusCode)
	}
	smtp, err := net.Dial("tcp", r.srv.StartTLSAddrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(smtp).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	waitCtx, stopWait := context.WithCancel(t.Context())
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		req, _ := http.NewRequestWithContext(waitCtx, "GET",
			r.srv.APIBase()+"/inboxes/"+r.boot.Inbox.ID+"/messages?to=nobody&wait=30", nil)
		req.Header.Set("Authorization", "Bearer "+r.boot.Secret)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()

	fams = r.eventually(t, "the captures, the refusal, the wait and the connection", func(f map[string]*dto.MetricFamily) bool {
		return value(f, "capture_captures_total", "kind", "webhook", "project", project) == 2 &&
			value(f, "capture_captures_total", "kind", "email", "project", project) == 1 &&
			value(f, "capture_active_waits", "project", project) == 1 &&
			value(f, "capture_connections_open", "listener", "smtp_starttls") == 1
	})
	if v := value(fams, "capture_ingest_commit_seconds", "kind", "webhook"); v != 2 {
		t.Errorf("webhook commit latencies observed: %v, want 2", v)
	}
	if v := value(fams, "capture_ingest_commit_seconds", "kind", "email"); v != 1 {
		t.Errorf("email commit latencies observed: %v, want 1", v)
	}
	if v := value(fams, "capture_commit_batch_size"); v < 3 {
		t.Errorf("commit batches observed: %v, want at least 3", v)
	}
	if v := value(fams, "capture_api_refused_total", "code", "unauthorized"); v != 1 {
		t.Errorf("unauthorized calls: %v, want 1", v)
	}
	for _, c := range []struct {
		kind, code string
		want       float64
	}{{"webhook", "not_found", 1}, {"webhook", "quota_exceeded", 1}, {"webhook", "unavailable", 0}, {"email", "quota_exceeded", 0}} {
		if v := value(fams, "capture_captures_refused_total", "kind", c.kind, "code", c.code); v != c.want {
			t.Errorf("%s refused with %s: %v, want %v", c.kind, c.code, v, c.want)
		}
	}
	if v := value(fams, "capture_connections_accepted_total", "listener", "capture"); v < 1 {
		t.Errorf("capture connections accepted: %v", v)
	}
	if v := value(fams, "capture_connections_accepted_total", "listener", "http"); v < 2 {
		t.Errorf("http connections accepted: %v", v)
	}

	// Closing gives back what was held.
	stopWait()
	<-waited
	smtp.Close()
	r.eventually(t, "the wait and the SMTP connection gone", func(f map[string]*dto.MetricFamily) bool {
		return value(f, "capture_active_waits", "project", project) == 0 &&
			value(f, "capture_connections_open", "listener", "smtp_starttls") == 0
	})

	// Nothing a capture holds, nor any id of a key, inbox or endpoint.
	_, text := r.scrape(t)
	for _, secret := range []string{"secret-body", "secret-subject", r.boot.Secret, r.boot.Key.ID,
		r.boot.Inbox.ID, r.boot.Inbox.SMTPPassword, r.boot.Endpoint.ID} {
		if strings.Contains(text, secret) {
			t.Errorf("/metrics holds %q", secret)
		}
	}
}
