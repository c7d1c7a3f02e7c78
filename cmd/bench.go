package cmd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/capturedev/capture/cmd/bench"
	"github.com/capturedev/capture/cmd/bench/smtpload"
	"github.com/capturedev/capture/cmd/bench/webload"
)

func newBenchCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "bench",
		Short: "Measure a real capture server: SMTP ingest, webhook ingest, wait, list and forwarding latency",
		Long: `bench starts its own 'capture serve' in a throwaway data dir on free loopback
ports, drives it, prints what it measured and the server's peak memory, and
stops it. Every capture counted was acknowledged only after its commit.`,
	}
	c.PersistentFlags().Int("conns", 8, "concurrent connections")
	c.PersistentFlags().String("server", "", "binary to run as the server, to compare builds (default: this one)")
	c.PersistentFlags().Int("replicas", 1, "servers sharing the --database (an empty postgres:// database) that smtp and webhook spread their load over")

	smtp := &cobra.Command{
		Use: "smtp", Short: "SMTP ingest over STARTTLS + AUTH (or --mode tls)", Args: noArgs,
		Example: "  capture bench smtp --conns 8 --msgs 20000 --size 2048",
		RunE: func(c *cobra.Command, _ []string) error {
			conns, _ := c.Flags().GetInt("conns")
			msgs, _ := c.Flags().GetInt("msgs")
			size, _ := c.Flags().GetInt("size")
			mode, _ := c.Flags().GetString("mode")
			if err := atLeast(c, 1, "conns", "msgs", "size"); err != nil {
				return err
			}
			if mode != "starttls" && mode != "tls" {
				return usagef("--mode %q: want starttls or tls", mode)
			}
			return withTargets(c, func(ts []*bench.Target) error {
				cpu := serverCPU(ts[0])
				res, err := spread(ts, conns, msgs, func(t *bench.Target, conns, msgs int) (smtpload.Result, error) {
					addr := t.StartTLSAddr
					if mode == "tls" {
						addr = t.TLSAddr
					}
					return smtpload.Run(c.Context(), smtpload.Options{Addr: addr, Mode: mode, User: t.InboxID,
						Pass: t.SMTPPassword, CAFile: t.CAFile, ServerName: "localhost", Conns: conns, Msgs: msgs, Size: size})
				}, func(a, b smtpload.Result) smtpload.Result {
					return smtpload.Result{Msgs: a.Msgs + b.Msgs, Errors: a.Errors + b.Errors, Elapsed: max(a.Elapsed, b.Elapsed),
						P50: max(a.P50, b.P50), P99: max(a.P99, b.P99)}
				})
				fprintf(c.OutOrStdout(), "smtp (%s, %d conns, %d B%s): %s\n", mode, conns, size, replicasNote(ts), res)
				if len(ts) == 1 {
					cpu.report(c, res.Msgs, "message")
				}
				return err
			})
		},
	}
	smtp.Flags().Int("msgs", 20000, "messages to send in all")
	smtp.Flags().Int("size", 2048, "body bytes per message")
	smtp.Flags().String("mode", "starttls", "starttls or tls")

	webhook := &cobra.Command{
		Use: "webhook", Short: "Webhook ingest: keep-alive POSTs of a JSON body", Args: noArgs,
		Example: "  capture bench webhook --conns 64 --duration 10s",
		RunE: func(c *cobra.Command, _ []string) error {
			conns, _ := c.Flags().GetInt("conns")
			d, _ := c.Flags().GetDuration("duration")
			size, _ := c.Flags().GetInt("size")
			if err := errors.Join(atLeast(c, 1, "conns"), atLeast(c, 2, "size")); err != nil {
				return err
			}
			if d <= 0 {
				return usagef("--duration %s: want more than 0", d)
			}
			body := append([]byte(`"`), bytes.Repeat([]byte("x"), size-2)...)
			body = append(body, '"')
			return withTargets(c, func(ts []*bench.Target) error {
				cpu := serverCPU(ts[0])
				res, err := spread(ts, conns, 0, func(t *bench.Target, conns, _ int) (webload.Result, error) {
					return webload.Run(c.Context(), webload.Options{URL: t.CaptureURL + "/bench", Conns: conns, Duration: d, Body: body})
				}, func(a, b webload.Result) webload.Result {
					return webload.Result{Requests: a.Requests + b.Requests, Errors: a.Errors + b.Errors,
						Elapsed: max(a.Elapsed, b.Elapsed), P50: max(a.P50, b.P50), P99: max(a.P99, b.P99)}
				})
				fprintf(c.OutOrStdout(), "webhook (%d conns, %d B%s): %s\n", conns, size, replicasNote(ts), res)
				if len(ts) == 1 {
					cpu.report(c, res.Requests, "request")
				}
				return err
			})
		},
	}
	webhook.Flags().Duration("duration", 10*time.Second, "how long to send")
	webhook.Flags().Int("size", 1024, "JSON body bytes")

	wait := &cobra.Command{
		Use: "wait", Short: "Wake-up latency: capture acknowledged → waiting list call returns", Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			n, _ := c.Flags().GetInt("n")
			if err := atLeast(c, 1, "n"); err != nil {
				return err
			}
			return withTarget(c, func(t *bench.Target) error {
				l, err := t.WaitLatency(c.Context(), n)
				fprintf(c.OutOrStdout(), "wait wake-up (%d): p50 %.2f ms p99 %.2f ms max %.2f ms\n", l.N, ms(l.P50), ms(l.P99), ms(l.Max))
				return err
			})
		},
	}
	wait.Flags().Int("n", 200, "captures to wait for")

	list := &cobra.Command{
		Use: "list", Short: "List latency: newest page of an endpoint", Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			n, _ := c.Flags().GetInt("n")
			conns, _ := c.Flags().GetInt("conns")
			captures, _ := c.Flags().GetInt("captures")
			if err := errors.Join(atLeast(c, 1, "n", "conns"), atLeast(c, 0, "captures")); err != nil {
				return err
			}
			return withTarget(c, func(t *bench.Target) error {
				l, err := t.ListLatency(c.Context(), n, conns, captures)
				fprintf(c.OutOrStdout(), "list (%d calls, %d conns, %d captures): %.0f calls/s, p50 %.2f ms p99 %.2f ms\n",
					l.N, conns, captures, l.PerSecond(), ms(l.P50), ms(l.P99))
				return err
			})
		},
	}
	list.Flags().Int("n", 5000, "list calls")
	list.Flags().Int("captures", 1000, "captures stored before listing")

	forward := &cobra.Command{
		Use: "forward", Short: "Forwarding latency: capture acknowledged → delivered to a local handler", Args: noArgs,
		Example: "  capture bench forward --client both --n 100",
		RunE: func(c *cobra.Command, _ []string) error {
			n, _ := c.Flags().GetInt("n")
			client, _ := c.Flags().GetString("client")
			clients := []string{client}
			if client == "both" {
				clients = []string{bench.ClientGo, bench.ClientPython}
			}
			if err := atLeast(c, 1, "n"); err != nil {
				return err
			}
			if client != bench.ClientGo && client != bench.ClientPython && client != "both" {
				return usagef("--client %q: want go, python or both", client)
			}
			return withTarget(c, func(t *bench.Target) error {
				for _, client := range clients {
					l, err := t.ForwardLatency(c.Context(), client, n)
					fprintf(c.OutOrStdout(), "forward (%s client, default interval, %d captures): capture → handler p50 %.2f ms p99 %.2f ms max %.2f ms\n",
						client, l.N, ms(l.P50), ms(l.P99), ms(l.Max))
					if err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	forward.Flags().Int("n", 100, "captures to forward")
	forward.Flags().String("client", "both", "go (capture forward), python (capture-forward.py) or both")

	slowread := &cobra.Command{
		Use:     "slowread",
		Short:   "Memory under API clients that request a large message and never read the answer",
		Args:    noArgs,
		Example: "  capture bench slowread --clients 60 --size 7500000 --links 200000",
		RunE: func(c *cobra.Command, _ []string) error {
			clients, _ := c.Flags().GetInt("clients")
			size, _ := c.Flags().GetInt("size")
			links, _ := c.Flags().GetInt("links")
			if err := errors.Join(atLeast(c, 1, "clients", "size"), atLeast(c, 0, "links")); err != nil {
				return err
			}
			if size > 10<<20 {
				return usagef("--size %d: want at most 10485760 (the free plan's message size)", size)
			}
			return withTarget(c, func(t *bench.Target) error {
				res, err := t.SlowRead(c.Context(), clients, size, links)
				if err == nil {
					fprintf(c.OutOrStdout(), "slowread: %s\n", res)
				}
				return err
			})
		},
	}
	slowread.Flags().Int("clients", 60, "connections that request the message and never read")
	slowread.Flags().Int("size", 7_500_000, "message bytes")
	slowread.Flags().Int("links", 200_000, "links in the message")

	disk := &cobra.Command{
		Use:     "disk",
		Short:   "Disk taken by many small messages (data dir after a clean stop), and how fast and exactly they read back",
		Args:    noArgs,
		Example: "  capture bench disk --msgs 200000 --size 2048 --probes 60",
		RunE: func(c *cobra.Command, _ []string) error {
			conns, _ := c.Flags().GetInt("conns")
			msgs, _ := c.Flags().GetInt("msgs")
			size, _ := c.Flags().GetInt("size")
			probes, _ := c.Flags().GetInt("probes")
			if err := errors.Join(atLeast(c, 1, "conns", "size", "probes"), atLeast(c, 0, "msgs")); err != nil {
				return err
			}
			return withTarget(c, func(t *bench.Target) error {
				res, err := smtpload.Run(c.Context(), smtpload.Options{Addr: t.StartTLSAddr, Mode: "starttls", User: t.InboxID,
					Pass: t.SMTPPassword, CAFile: t.CAFile, ServerName: "localhost", Conns: conns, Msgs: msgs, Size: size})
				fprintf(c.OutOrStdout(), "smtp (starttls, %d conns, %d B): %s\n", conns, size, res)
				if err != nil {
					return err
				}
				if rss, err := t.PeakRSS(); err == nil {
					fprintf(c.OutOrStdout(), "server peak RSS over the messages: %.1f MiB\n", float64(rss)/(1<<20))
				}
				rb, err := t.ReadBack(c.Context(), probes)
				if err != nil {
					return err
				}
				fprintf(c.OutOrStdout(), "%s\n", rb)
				if rss, err := t.PeakRSS(); err == nil {
					fprintf(c.OutOrStdout(), "server peak RSS with the probes: %.1f MiB\n", float64(rss)/(1<<20))
				}
				n, err := t.StopAndSize()
				if err != nil {
					return err
				}
				fprintf(c.OutOrStdout(), "data dir after a clean stop: %.1f MiB (%d messages and %d probes)\n",
					float64(n)/(1<<20), msgs, probes)
				return nil
			})
		},
	}
	disk.Flags().Int("msgs", 200_000, "messages to store before the probes")
	disk.Flags().Int("size", 2048, "body bytes per message")
	disk.Flags().Int("probes", 60, "messages with an attachment to read back")

	c.AddCommand(smtp, webhook, wait, list, forward, slowread, disk)
	return c
}

// withTarget runs fn against a fresh server started from this binary and
// reports its peak memory afterwards.
func withTarget(c *cobra.Command, fn func(*bench.Target) error) error {
	if n, _ := c.Flags().GetInt("replicas"); n != 1 {
		return usagef("--replicas: only smtp and webhook spread their load over replicas")
	}
	return withTargets(c, func(ts []*bench.Target) error { return fn(ts[0]) })
}

// withTargets runs fn against --replicas fresh servers sharing the
// --database, or one on a throwaway data dir.
func withTargets(c *cobra.Command, fn func([]*bench.Target) error) error {
	replicas, _ := c.Flags().GetInt("replicas")
	url, err := database(c)
	if err != nil {
		return err
	}
	if replicas < 1 || (replicas > 1 && url == "") {
		return usagef("--replicas: want 1, or more with --database postgres://… (an empty database)")
	}
	server, _ := c.Flags().GetString("server")
	if server == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		server = self
	}
	var args []string
	if url != "" {
		args = []string{"--database", url}
	}
	t, err := bench.Start(c.Context(), server, args...)
	if err != nil {
		return err
	}
	ts := []*bench.Target{t}
	defer func() {
		for _, t := range ts[1:] {
			t.Stop()
		}
	}()
	for len(ts) < replicas {
		r, err := t.Replica(c.Context())
		if err != nil {
			return joinErr(err, t.Stop())
		}
		ts = append(ts, r)
	}
	runErr := fn(ts)
	for i, t := range ts {
		which := "server"
		if len(ts) > 1 {
			which = fmt.Sprintf("server %d", i+1)
		}
		if rss, err := t.PeakRSS(); err == nil {
			fprintf(c.OutOrStdout(), "%s peak RSS: %.1f MiB\n", which, float64(rss)/(1<<20))
		}
	}
	return joinErr(runErr, t.Stop())
}

// spread runs one load per target at once, conns and n (when not 0)
// shared out, and adds up what they measured.
func spread[R any](ts []*bench.Target, conns, n int, run func(t *bench.Target, conns, n int) (R, error), add func(a, b R) R) (R, error) {
	results := make([]R, len(ts))
	errs := make([]error, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		share := func(total int) int { return total/len(ts) + btoi(i < total%len(ts)) }
		wg.Go(func() { results[i], errs[i] = run(t, max(share(conns), 1), share(n)) })
	}
	wg.Wait()
	total := results[0]
	for _, r := range results[1:] {
		total = add(total, r)
	}
	return total, errors.Join(errs...)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func replicasNote(ts []*bench.Target) string {
	if len(ts) == 1 {
		return ""
	}
	return fmt.Sprintf(", %d replicas", len(ts))
}

// cpuMeter measures the server's CPU time over a load run: a figure the
// host's other load disturbs far less than the rate.
type cpuMeter struct {
	t     *bench.Target
	start time.Duration
	err   error
}

func serverCPU(t *bench.Target) *cpuMeter {
	start, err := t.CPUTime()
	return &cpuMeter{t: t, start: start, err: err}
}

func (m *cpuMeter) report(c *cobra.Command, n int, unit string) {
	end, err := m.t.CPUTime()
	if m.err != nil || err != nil || n == 0 {
		return
	}
	fprintf(c.OutOrStdout(), "server CPU: %.3f ms per %s\n", ms(end-m.start)/float64(n), unit)
}

func joinErr(a, b error) error {
	if a != nil {
		return a
	}
	if b != nil {
		return fmt.Errorf("stop server: %w", b)
	}
	return nil
}

// ms is a duration in the one unit every benchmark prints times in.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// atLeast refuses, as a usage error naming it, the first of the whole-number
// flags names that is below min.
func atLeast(c *cobra.Command, min int, names ...string) error {
	for _, name := range names {
		if v, _ := c.Flags().GetInt(name); v < min {
			return usagef("--%s %d: want %d or more", name, v, min)
		}
	}
	return nil
}
