package store

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkInsertRequestParallel measures small captures committed through
// the group-commit writer by many concurrent callers, each waiting for its
// own commit, as the capture listeners do.
func BenchmarkInsertRequestParallel(b *testing.B) {
	benchInsertRequests(b, 64, "/hook", []byte(`{"event":"payment.succeeded","id":"evt_123","amount":4200}`),
		[]Header{{Name: "Content-Type", Values: []string{"application/json"}}})
}

// BenchmarkInsertRequestParallel1KiB is the store's share of the webhook
// benchmark (`capture bench webhook`, wrk with post1k.lua): the same 1 KiB
// JSON body and headers, from 64 concurrent callers (32 × GOMAXPROCS, 2
// here, as wrk -c64).
func BenchmarkInsertRequestParallel1KiB(b *testing.B) {
	prefix := `{"event":"bench.post1k","id":"evt_0001","data":{"pad":"`
	body := []byte(prefix + strings.Repeat("x", 1024-len(prefix)-len(`"}}`)) + `"}}`)
	benchInsertRequests(b, 32, "/bench", body, []Header{{Name: "Content-Type", Values: []string{"application/json"}},
		{Name: "Content-Length", Values: []string{"1024"}}, {Name: "Host", Values: []string{"127.0.0.1:8025"}}})
}

// benchInsertRequests stores the same JSON request from parallelism ×
// GOMAXPROCS callers, and reports the rate and the CPU per insert.
func benchInsertRequests(b *testing.B, parallelism int, path string, body []byte, headers []Header) {
	s, endpointID := benchStore(b)
	b.SetParallelism(parallelism)
	cpu := processCPU(b)
	b.ResetTimer()
	defer cpu.report(b, "insert")
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, err := s.InsertRequest(b.Context(), &NewRequest{
				EndpointID: endpointID, ReceivedAt: time.Now(), Method: "POST", Path: path,
				ContentType: "application/json", RemoteAddr: "127.0.0.1:5000", Headers: headers, Body: body,
			})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
}

// cpuMeter reports the process's CPU time (user and system, every
// goroutine, SQLite's included) per operation: on a shared machine a
// steadier figure than the rate.
type cpuMeter struct{ start time.Duration }

func processCPU(b *testing.B) cpuMeter { return cpuMeter{cpuTime(b)} }

func (m cpuMeter) report(b *testing.B, op string) {
	b.ReportMetric(float64((cpuTime(b)-m.start).Microseconds())/float64(b.N), "cpu-µs/"+op)
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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

// BenchmarkInsertMessage stores a typical 2 KiB confirmation email, one
// commit per message: under SMTP load the writer's batches hold one or two
// messages, because each connection waits for its 250 before sending more.
func BenchmarkInsertMessage(b *testing.B) {
	s, inboxID := benchInbox(b)
	text := "Confirm your address: https://app.example.com/confirm?token=0123456789abcdef\n" +
		strings.Repeat("The quick brown fox jumps over the lazy dog. 0123456789 abcdefghijklmnopqr\n", 26)
	raw := []byte("From: Bench <bench@example.com>\r\nTo: <to@example.com>\r\nSubject: bench\r\n\r\n" +
		strings.ReplaceAll(text, "\n", "\r\n"))
	date := time.Now()
	m := &NewMessage{InboxID: inboxID, EnvelopeFrom: "bench@example.com", EnvelopeTo: []string{"to@example.com"},
		From: &Address{Name: "Bench", Address: "bench@example.com"}, To: []Address{{Address: "to@example.com"}},
		Subject: "bench", Date: &date, MessageID: "1@bench",
		Headers: []Header{{Name: "From", Values: []string{"Bench <bench@example.com>"}},
			{Name: "To", Values: []string{"<to@example.com>"}}, {Name: "Subject", Values: []string{"bench"}}},
		Text: &text, Snippet: text[:200],
		Links: []Link{{URL: "https://app.example.com/confirm?token=0123456789abcdef", Origin: "https://app.example.com"}},
		Raw:   raw}
	b.ResetTimer()
	for b.Loop() {
		m.ReceivedAt = time.Now()
		if _, err := s.InsertMessage(b.Context(), m); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
}

// BenchmarkListRequestsLastDelivery lists the newest page of an endpoint
// holding a million requests, a tenth of them delivered, each item with its
// newest delivery: the join costs one index probe per listed request, so
// the page costs what it costs on an empty endpoint.
func BenchmarkListRequestsLastDelivery(b *testing.B) {
	s, endpointID := benchStore(b)
	const requests, deliveredEvery = 1_000_000, 10
	err := s.write(b.Context(), func(t *wtx) error {
		rows := make([][]any, 0, maxRowsPerInsert)
		content := pack(bytesSection([]byte("[]")), bytesSection([]byte("{}")))
		for i := range requests {
			rows = append(rows, []any{NewID("req_"), endpointID, ms(time.Now()), "POST", "/hook", "",
				"application/json", 2, "127.0.0.1:1", content})
			if len(rows) == maxRowsPerInsert || i == requests-1 {
				if err := t.insertRows("requests", requestColumns, rows); err != nil {
					return err
				}
				rows = rows[:0]
			}
		}
		_, err := t.exec(`INSERT INTO deliveries (id, request_seq, kind, target_url, status, response_status, duration_ms, created_at)
			SELECT 'dlv_' || seq, seq, 'forward', 'http://localhost:3000/hook', 'delivered', 200, 1, received_at
			FROM requests WHERE seq % ? = 0`, deliveredEvery)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, limit := range []int{20, MaxLimit} {
		b.Run(fmt.Sprintf("limit=%d", limit), func(b *testing.B) {
			for b.Loop() {
				l, err := s.Requests(b.Context(), endpointID, RequestFilter{}, Page{Limit: limit})
				if err != nil || len(l.Items) != limit || l.Items[0].LastDelivery == nil && l.Items[9].LastDelivery == nil {
					b.Fatalf("Requests = %d items, %v", len(l.Items), err)
				}
			}
		})
	}
}

// BenchmarkInsertMessageParallel is what `capture bench smtp` makes the
// store do: eight sessions, each storing the 2 KiB smtpload message with a
// numbered subject and waiting for its commit before sending the next.
func BenchmarkInsertMessageParallel(b *testing.B) {
	s, inboxID := benchInbox(b)
	var session atomic.Int64
	b.SetParallelism(4) // 4 × GOMAXPROCS (2 here) sessions
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := session.Add(1)
		for seq := 0; pb.Next(); seq++ {
			if _, err := s.InsertMessage(b.Context(), smtploadMessage(inboxID, id, seq)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
}

// benchInbox is a benchmark store with an inbox.
func benchInbox(b *testing.B) (*Store, string) {
	s, _ := benchStore(b)
	p, err := s.Project(b.Context(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	in, err := s.CreateInbox(b.Context(), p.ID, "bench")
	if err != nil {
		b.Fatal(err)
	}
	return s, in.ID
}

// smtploadMessage is the seq-th message of an smtpload session: what
// `capture bench smtp` sends, one line repeated to 2 KiB of text.
func smtploadMessage(inboxID string, session int64, seq int) *NewMessage {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnopqrstu\n", 26)
	subject := fmt.Sprintf("smtpload %d-%d", session, seq)
	raw := []byte("From: <from@example.com>\r\nTo: <to@example.com>\r\nSubject: " + subject + "\r\n\r\n" +
		strings.ReplaceAll(text, "\n", "\r\n"))
	return &NewMessage{InboxID: inboxID, ReceivedAt: time.Now(), EnvelopeFrom: "from@example.com",
		EnvelopeTo: []string{"to@example.com"}, From: &Address{Address: "from@example.com"},
		To: []Address{{Address: "to@example.com"}}, Subject: subject, Text: &text, Snippet: text[:200], Raw: raw}
}
