package capture

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capturedev/capture/cmd/bench/webload"
	"github.com/capturedev/capture/store"
)

// BenchmarkCapture drives the listener with keep-alive connections posting
// 1 KiB JSON bodies, each answered after its commit. "null" is a handler
// that reads the body and answers without storing: the ceiling to compare
// against in the same run.
func BenchmarkCapture(b *testing.B) {
	body := []byte(`{"event":"bench.post1k","id":"evt_0001","data":{"pad":"` + strings.Repeat("x", 1024-58) + `"}}`)
	if len(body) != 1024 {
		b.Fatalf("body is %d bytes", len(body))
	}
	const conns = 64
	b.Run("capture", func(b *testing.B) { benchCapture(b, body, conns) })
	b.Run("null", func(b *testing.B) {
		url := benchServe(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			writeID(w, "req_x")
		}))
		benchLoad(b, url, body, conns)
	})
}

func benchCapture(b *testing.B, body []byte, conns int) {
	st, err := store.Open(b.Context(), filepath.Join(b.TempDir(), "capture.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	p, err := st.CreateProject(b.Context(), "bench", "free")
	if err != nil {
		b.Fatal(err)
	}
	ep, err := st.CreateEndpoint(b.Context(), p.ID, "bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	h := New(st, Config{})
	benchLoad(b, benchServe(b, h)+"/"+ep.ID+"/hook", body, conns)
}

func benchServe(b *testing.B, h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := NewServer(h)
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

func benchLoad(b *testing.B, url string, body []byte, conns int) {
	b.ResetTimer()
	res, err := webload.Run(b.Context(), webload.Options{URL: url, Conns: conns, Requests: b.N, Body: body})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if res.Errors > 0 || res.Requests != b.N {
		b.Fatalf("%d of %d requests, %d errors", res.Requests, b.N, res.Errors)
	}
	b.ReportMetric(res.PerSecond(), "req/s")
	b.ReportMetric(float64(res.P50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(res.P99.Microseconds()), "p99-µs")
}
