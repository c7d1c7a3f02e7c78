package store

import (
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkInsertRequestParallel measures small captures committed through
// the group-commit writer by many concurrent callers, each waiting for its
// own commit, as the capture listeners do.
func BenchmarkInsertRequestParallel(b *testing.B) {
	s, endpointID := benchStore(b)
	body := []byte(`{"event":"payment.succeeded","id":"evt_123","amount":4200}`)
	b.SetParallelism(64) // 64 × GOMAXPROCS concurrent callers
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, err := s.InsertRequest(b.Context(), &NewRequest{
				EndpointID: endpointID, ReceivedAt: time.Now(), Method: "POST", Path: "/hook",
				ContentType: "application/json", RemoteAddr: "127.0.0.1:5000",
				Headers: []Header{{Name: "Content-Type", Values: []string{"application/json"}}}, Body: body,
			})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
}

func benchStore(b *testing.B) (*Store, string) {
	b.Helper()
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "capture.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	p, err := s.CreateProject(b.Context(), "bench", "team")
	if err != nil {
		b.Fatal(err)
	}
	e, err := s.CreateEndpoint(b.Context(), p.ID, "bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	return s, e.ID
}

// BenchmarkInsertRequestFewCallers is the same with 16 callers, closer to
// what a loaded listener hands the store at once.
func BenchmarkInsertRequestFewCallers(b *testing.B) {
	s, endpointID := benchStore(b)
	body := []byte(`{"event":"payment.succeeded","id":"evt_123","amount":4200}`)
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.InsertRequest(b.Context(), &NewRequest{EndpointID: endpointID, ReceivedAt: time.Now(),
				Method: "POST", Path: "/hook", RemoteAddr: "127.0.0.1:5000", Body: body}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
}
