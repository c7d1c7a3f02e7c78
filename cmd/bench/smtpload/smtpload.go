// Package smtpload drives an SMTP server with many small messages over a
// few long-lived connections and measures throughput and per-message
// latency. It backs `capture bench smtp` and the SMTP benchmark.
package smtpload

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Options describe one run.
type Options struct {
	Addr string // host:port
	// Mode is "starttls" (upgrade after EHLO), "tls" (implicit TLS) or
	// "plain" (no TLS; the server must allow AUTH without it).
	Mode string
	// User and Pass authenticate with AUTH PLAIN once per connection; an
	// empty User skips AUTH.
	User, Pass string
	// CAFile is the PEM file the server certificate is validated against;
	// empty means the system roots.
	CAFile string
	// ServerName is the name the certificate must hold; default the host
	// of Addr.
	ServerName string
	Conns      int // concurrent connections (default 8)
	Msgs       int // messages in all (default 1000)
	Size       int // body bytes per message, headers not counted (default 2048)
	// From and To are the envelope and header addresses; defaults
	// bench@example.com and inbox@example.com.
	From, To string
}

// Result sums up a run. Latency is per message, from sending MAIL to
// reading the reply to the end of DATA.
type Result struct {
	Msgs, Errors int
	Elapsed      time.Duration
	P50, P99     time.Duration
}

// Rate is messages per second.
func (r Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Msgs) / r.Elapsed.Seconds()
}

func (r Result) String() string {
	return fmt.Sprintf("%d msgs in %.2f s = %.0f msg/s, p50 %.2f ms p99 %.2f ms, errors %d",
		r.Msgs, r.Elapsed.Seconds(), r.Rate(), ms(r.P50), ms(r.P99), r.Errors)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// maxRedials bounds how often one connection is reopened after errors, so a
// server that refuses everything ends the run instead of spinning.
const maxRedials = 3

// Run sends o.Msgs messages over o.Conns connections and reports what was
// acknowledged. It fails on bad options, when ctx ends before the run does,
// or when any message was not acknowledged; Result is filled in either way.
func Run(ctx context.Context, o Options) (Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return Result{}, err
	}
	tc, err := o.tlsConfig()
	if err != nil {
		return Result{}, err
	}
	body := makeBody(o.Size)

	var (
		next     atomic.Int64
		errCount atomic.Int64
		errOnce  sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	noteErr := func(err error) {
		errCount.Add(1)
		errOnce.Do(func() { firstErr = err })
	}
	lats := make([][]time.Duration, o.Conns)
	start := time.Now()
	for i := range o.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &worker{o: o, tc: tc, id: i}
			lats[i] = w.run(ctx, &next, body, noteErr)
		}()
	}
	wg.Wait()
	res := Result{Elapsed: time.Since(start), Errors: int(errCount.Load())}

	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	res.Msgs = len(all)
	res.P50, res.P99 = percentile(all, 0.50), percentile(all, 0.99)

	switch {
	case ctx.Err() != nil && res.Msgs < o.Msgs:
		return res, fmt.Errorf("smtpload: stopped after %d of %d messages: %w", res.Msgs, o.Msgs, ctx.Err())
	case res.Errors > 0:
		return res, fmt.Errorf("smtpload: %d errors, first: %w", res.Errors, firstErr)
	case res.Msgs < o.Msgs:
		return res, fmt.Errorf("smtpload: only %d of %d messages acknowledged", res.Msgs, o.Msgs)
	}
	return res, nil
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(float64(len(sorted)-1)*q+0.5)]
}

func (o Options) withDefaults() (Options, error) {
	switch o.Mode {
	case "":
		o.Mode = "starttls"
	case "starttls", "tls", "plain":
	default:
		return o, fmt.Errorf("smtpload: mode %q: want starttls, tls or plain", o.Mode)
	}
	host, _, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return o, fmt.Errorf("smtpload: address %q: %w", o.Addr, err)
	}
	if o.ServerName == "" {
		o.ServerName = host
	}
	if o.Conns <= 0 {
		o.Conns = 8
	}
	if o.Msgs <= 0 {
		o.Msgs = 1000
	}
	if o.Size < 0 {
		return o, errors.New("smtpload: size must not be negative")
	}
	if o.Size == 0 {
		o.Size = 2048
	}
	if o.From == "" {
		o.From = "bench@example.com"
	}
	if o.To == "" {
		o.To = "inbox@example.com"
	}
	return o, nil
}

func (o Options) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{ServerName: o.ServerName, MinVersion: tls.VersionTLS12}
	if o.CAFile == "" {
		return tc, nil
	}
	pemBytes, err := os.ReadFile(o.CAFile)
	if err != nil {
		return nil, fmt.Errorf("smtpload: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("smtpload: no certificate in %s", o.CAFile)
	}
	tc.RootCAs = pool
	return tc, nil
}

// makeBody is size bytes of short CRLF lines with a link in the first, as
// a typical confirmation email has.
func makeBody(size int) []byte {
	const first = "Confirm your address: https://app.example.com/confirm?token=0123456789abcdef\r\n"
	const line = "The quick brown fox jumps over the lazy dog. 0123456789 abcdefghijklmnopqr\r\n"
	b := make([]byte, 0, size)
	b = append(b, first[:min(len(first), size)]...)
	for len(b) < size {
		b = append(b, line[:min(len(line), size-len(b))]...)
	}
	return b
}

type worker struct {
	o   Options
	tc  *tls.Config
	id  int
	cl  *smtp.Client
	hdr []byte

	mu   sync.Mutex // guards conn, which ctx's end closes from another goroutine
	conn net.Conn
}

func (w *worker) run(ctx context.Context, next *atomic.Int64, body []byte, noteErr func(error)) []time.Duration {
	lat := make([]time.Duration, 0, w.o.Msgs/w.o.Conns+1)
	// Unblock any read or write in progress when ctx ends.
	stop := context.AfterFunc(ctx, func() { w.setConn(nil) })
	defer stop()
	defer w.quit()

	fail := func(err error) {
		if ctx.Err() == nil {
			noteErr(err)
		}
	}
	redials := 0
	for ctx.Err() == nil {
		if w.cl == nil {
			if redials > maxRedials {
				return lat
			}
			redials++
			if err := w.connect(ctx); err != nil {
				fail(err)
				continue
			}
		}
		seq := next.Add(1)
		if seq > int64(w.o.Msgs) {
			break
		}
		t0 := time.Now()
		if err := w.send(seq, body); err != nil {
			fail(err)
			w.cl = nil
			w.setConn(nil)
			continue
		}
		lat = append(lat, time.Since(t0))
	}
	return lat
}

// setConn replaces the connection, closing the one it replaces.
func (w *worker) setConn(c net.Conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn != nil {
		w.conn.Close()
	}
	w.conn = c
}

func (w *worker) quit() {
	if w.cl == nil {
		return
	}
	w.mu.Lock()
	if w.conn != nil {
		w.conn.SetDeadline(time.Now().Add(2 * time.Second))
	}
	w.mu.Unlock()
	w.cl.Quit()
	w.cl = nil
	w.setConn(nil)
}

func (w *worker) connect(ctx context.Context) error {
	d := &net.Dialer{Timeout: 10 * time.Second}
	var conn net.Conn
	var err error
	if w.o.Mode == "tls" {
		conn, err = (&tls.Dialer{NetDialer: d, Config: w.tc}).DialContext(ctx, "tcp", w.o.Addr)
	} else {
		conn, err = d.DialContext(ctx, "tcp", w.o.Addr)
	}
	if err != nil {
		return fmt.Errorf("dial %s: %w", w.o.Addr, err)
	}
	w.setConn(conn)
	if ctx.Err() != nil {
		// ctx ended between the dial and setConn: AfterFunc has run.
		w.setConn(nil)
		return ctx.Err()
	}
	cl, err := w.handshake(conn)
	if err != nil {
		w.setConn(nil)
		return err
	}
	w.cl = cl
	return nil
}

func (w *worker) handshake(conn net.Conn) (*smtp.Client, error) {
	cl, err := smtp.NewClient(conn, w.o.ServerName)
	if err != nil {
		return nil, fmt.Errorf("greeting: %w", err)
	}
	if err := cl.Hello("smtpload.localhost"); err != nil {
		return nil, fmt.Errorf("EHLO: %w", err)
	}
	if w.o.Mode == "starttls" {
		if err := cl.StartTLS(w.tc); err != nil {
			return nil, fmt.Errorf("STARTTLS: %w", err)
		}
	}
	if w.o.User != "" {
		// net/smtp's PlainAuth refuses to send the password in clear text
		// except to localhost; plain mode against another host is the
		// caller's explicit choice.
		if err := cl.Auth(plainAuth{w.o.User, w.o.Pass}); err != nil {
			return nil, fmt.Errorf("AUTH: %w", err)
		}
	}
	return cl, nil
}

func (w *worker) send(seq int64, body []byte) error {
	if err := w.cl.Mail(w.o.From); err != nil {
		return fmt.Errorf("MAIL: %w", err)
	}
	if err := w.cl.Rcpt(w.o.To); err != nil {
		return fmt.Errorf("RCPT: %w", err)
	}
	wc, err := w.cl.Data()
	if err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	w.hdr = w.header(w.hdr[:0], seq)
	if _, err := wc.Write(w.hdr); err != nil {
		wc.Close()
		return fmt.Errorf("DATA: %w", err)
	}
	if _, err := wc.Write(body); err != nil {
		wc.Close()
		return fmt.Errorf("DATA: %w", err)
	}
	// Close sends the final dot and reads the reply.
	if err := wc.Close(); err != nil {
		return fmt.Errorf("end of DATA: %w", err)
	}
	return nil
}

func (w *worker) header(b []byte, seq int64) []byte {
	now := time.Now()
	id := strconv.Itoa(w.id) + "." + strconv.FormatInt(seq, 10)
	b = append(b, "From: Bench <"...)
	b = append(b, w.o.From...)
	b = append(b, ">\r\nTo: <"...)
	b = append(b, w.o.To...)
	b = append(b, ">\r\nSubject: smtpload message "...)
	b = append(b, id...)
	b = append(b, "\r\nMessage-ID: <"...)
	b = append(b, id...)
	b = append(b, '.')
	b = strconv.AppendInt(b, now.UnixNano(), 10)
	b = append(b, "@smtpload.localhost>\r\nDate: "...)
	b = now.AppendFormat(b, time.RFC1123Z)
	b = append(b, "\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"...)
	return b
}

// plainAuth is AUTH PLAIN without net/smtp's refusal to authenticate in
// clear text to hosts other than localhost: Mode says what the caller
// wants.
type plainAuth struct{ user, pass string }

func (a plainAuth) Start(*smtp.ServerInfo) (string, []byte, error) {
	return "PLAIN", []byte("\x00" + a.user + "\x00" + a.pass), nil
}

func (a plainAuth) Next(_ []byte, more bool) ([]byte, error) {
	if more {
		return nil, errors.New("unexpected server challenge")
	}
	return nil, nil
}
