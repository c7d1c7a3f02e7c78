package smtp

import (
	"log/slog"
	"testing"

	"github.com/capturedev/capture/server/smtp/smtpload"
)

// BenchmarkSMTPIngest drives the real STARTTLS listener with 8 connections,
// each authenticated once and sending 2 KiB messages one after another;
// every message counts only once its 250 (sent after the commit) is read.
// b.N is the number of messages.
func BenchmarkSMTPIngest(b *testing.B) {
	e := newEnv(b, "team", Config{Logger: slog.New(slog.DiscardHandler)})
	b.ResetTimer()
	res, err := smtpload.Run(b.Context(), smtpload.Options{
		Addr:       e.starttls,
		Mode:       "starttls",
		User:       e.inbox.ID,
		Pass:       e.inbox.SMTPPassword,
		CAFile:     e.caFile,
		ServerName: "localhost",
		Conns:      8,
		Msgs:       b.N,
		Size:       2048,
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.Rate(), "msgs/s")
	b.ReportMetric(float64(res.P50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(res.P99.Microseconds())/1000, "p99-ms")
	if n := e.count(b); n < min(b.N, 1000) {
		b.Fatalf("%d messages stored, want %d", n, b.N)
	}
}
