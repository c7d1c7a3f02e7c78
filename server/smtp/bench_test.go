package smtp

import (
	"log/slog"
	"testing"

	"github.com/capturedev/capture/cmd/bench/smtpload"
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
	in, err := e.st.Inbox(b.Context(), "", e.inbox.ID)
	if err != nil {
		b.Fatal(err)
	}
	if in.MessageCount != int64(b.N) {
		b.Fatalf("%d messages stored, want %d", in.MessageCount, b.N)
	}
}

// TestLoadDriver runs the load driver behind `capture bench smtp` in each
// of its modes against the real listeners.
func TestLoadDriver(t *testing.T) {
	e := newEnv(t, "team", Config{AllowInsecureAuth: true, Logger: slog.New(slog.DiscardHandler)})
	total := 0
	for _, tt := range []struct{ mode, addr string }{
		{"starttls", e.starttls}, {"tls", e.implicit}, {"plain", e.starttls},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			res, err := smtpload.Run(t.Context(), smtpload.Options{
				Addr: tt.addr, Mode: tt.mode, User: e.inbox.ID, Pass: e.inbox.SMTPPassword,
				CAFile: e.caFile, ServerName: "localhost", Conns: 3, Msgs: 40, Size: 2048,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Msgs != 40 || res.Errors != 0 || res.P50 <= 0 || res.P99 < res.P50 {
				t.Errorf("result %+v", res)
			}
			total += res.Msgs
		})
	}
	if n, _ := e.st.Inbox(t.Context(), "", e.inbox.ID); n.MessageCount != int64(total) {
		t.Errorf("%d messages stored, want %d", n.MessageCount, total)
	}

	res, err := smtpload.Run(t.Context(), smtpload.Options{
		Addr: e.starttls, User: e.inbox.ID, Pass: "wrong", CAFile: e.caFile, ServerName: "localhost", Conns: 2, Msgs: 10,
	})
	if err == nil || res.Msgs != 0 || res.Errors == 0 {
		t.Errorf("wrong password: %+v, %v", res, err)
	}
	if _, err := smtpload.Run(t.Context(), smtpload.Options{Addr: e.starttls, Mode: "carrier-pigeon"}); err == nil {
		t.Error("unknown mode accepted")
	}
}
