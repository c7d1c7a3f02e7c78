// Package webload drives an HTTP endpoint with concurrent keep-alive
// connections, each POSTing the same JSON body in a loop, and reports the
// throughput and latency seen. It backs `capture bench webhook`.
//
// It speaks HTTP/1.1 on raw connections with the request prebuilt once: on a
// small machine the load generator shares the CPU with the server it
// measures, and net/http's client would cost several times more per request.
package webload

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Options describe one run. It ends after Duration or once Requests
// requests are done, whichever comes first (a zero field sets no bound),
// or when the context ends.
type Options struct {
	URL      string
	Conns    int
	Duration time.Duration
	Body     []byte
	Requests int
}

// Result counts the requests completed: Errors are those answered with a
// status outside 2xx or failed on the connection. Requests cut short by the
// end of the run are not counted. P50 and P99 are the latencies of
// successful requests.
type Result struct {
	Requests, Errors int
	Elapsed          time.Duration
	P50, P99         time.Duration
}

// PerSecond is the rate of successful requests.
func (r Result) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests-r.Errors) / r.Elapsed.Seconds()
}

func (r Result) String() string {
	// Every figure of every benchmark in the same units: s, ms, per second.
	return fmt.Sprintf("%d requests in %.2f s = %.0f req/s, p50 %.2f ms p99 %.2f ms, errors %d",
		r.Requests, r.Elapsed.Seconds(), r.PerSecond(), ms(r.P50), ms(r.P99), r.Errors)
}

// Run sends load as o describes and returns what it measured. It fails
// before sending anything when the URL is unusable or a first connection
// cannot be made.
func Run(ctx context.Context, o Options) (Result, error) {
	t, err := newTarget(o)
	if err != nil {
		return Result{}, err
	}
	if o.Conns <= 0 {
		return Result{}, errors.New("webload: conns must be positive")
	}
	if o.Duration <= 0 && o.Requests <= 0 {
		return Result{}, errors.New("webload: set a duration or a number of requests")
	}

	conns := make([]net.Conn, o.Conns)
	for i := range conns {
		if conns[i], err = t.dial(ctx); err != nil {
			for _, c := range conns[:i] {
				c.Close()
			}
			return Result{}, err
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.Duration > 0 {
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	var tickets atomic.Int64
	tickets.Store(int64(o.Requests))

	workers := make([]*worker, o.Conns)
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range conns {
		w := &worker{t: t, tickets: &tickets, limited: o.Requests > 0}
		workers[i] = w
		wg.Go(func() { w.run(ctx, c) })
	}
	wg.Wait()
	elapsed := time.Since(start)

	res := Result{Elapsed: elapsed}
	var lat []time.Duration
	for _, w := range workers {
		res.Requests += w.requests
		res.Errors += w.errors
		lat = append(lat, w.latencies...)
	}
	slices.Sort(lat)
	res.P50 = percentile(lat, 50)
	res.P99 = percentile(lat, 99)
	return res, nil
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[(len(sorted)-1)*p/100]
}

// target is where requests go and the request bytes, built once.
type target struct {
	addr    string
	tls     *tls.Config
	request []byte
}

func newTarget(o Options) (*target, error) {
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, fmt.Errorf("webload: %w", err)
	}
	t := &target{addr: u.Host}
	switch u.Scheme {
	case "http":
		if u.Port() == "" {
			t.addr = net.JoinHostPort(u.Hostname(), "80")
		}
	case "https":
		if u.Port() == "" {
			t.addr = net.JoinHostPort(u.Hostname(), "443")
		}
		t.tls = &tls.Config{ServerName: u.Hostname()}
	default:
		return nil, fmt.Errorf("webload: URL %q: want http:// or https://", o.URL)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("webload: URL %q has no host", o.URL)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: capture-webload\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", u.RequestURI(), u.Host, len(o.Body))
	b.Write(o.Body)
	t.request = b.Bytes()
	return t, nil
}

func (t *target) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, fmt.Errorf("webload: %w", err)
	}
	if t.tls == nil {
		return c, nil
	}
	tc := tls.Client(c, t.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("webload: %w", err)
	}
	return tc, nil
}

type worker struct {
	t       *target
	tickets *atomic.Int64
	limited bool

	requests, errors int
	latencies        []time.Duration
}

func (w *worker) run(ctx context.Context, c net.Conn) {
	// Unblock reads and writes in flight when the run ends.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		stop()
		c.Close()
	}()
	br := bufio.NewReaderSize(c, 16<<10)
	w.latencies = make([]time.Duration, 0, 4096)
	for ctx.Err() == nil {
		if w.limited && w.tickets.Add(-1) < 0 {
			return
		}
		begin := time.Now()
		status, keep, err := w.roundTrip(c, br)
		if ctx.Err() != nil {
			return
		}
		w.requests++
		if err != nil || status < 200 || status > 299 {
			w.errors++
		} else {
			w.latencies = append(w.latencies, time.Since(begin))
		}
		if err != nil || !keep {
			stop()
			c.Close()
			next, err := w.t.dial(ctx)
			if err != nil {
				// Closing again in the deferred call is harmless.
				return
			}
			c = next
			stop = context.AfterFunc(ctx, func() { next.SetDeadline(time.Unix(1, 0)) })
			br.Reset(c)
		}
	}
}

// roundTrip sends the request and reads the whole response, reporting its
// status and whether the connection stays usable.
func (w *worker) roundTrip(c net.Conn, br *bufio.Reader) (status int, keep bool, err error) {
	if _, err := c.Write(w.t.request); err != nil {
		return 0, false, err
	}
	for {
		status, keep, err = readResponse(br)
		// Interim 1xx answers precede the real one.
		if err != nil || status >= 200 || status == 101 {
			return status, keep, err
		}
	}
}

var errMalformed = errors.New("webload: malformed response")

func readResponse(br *bufio.Reader) (status int, keep bool, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, false, err
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, false, errMalformed
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, false, errMalformed
	}
	keep = line[7] == '1'
	length, chunked := int64(-1), false
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return status, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return status, false, errMalformed
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.ParseInt(string(value), 10, 64); err != nil || length < 0 {
				return status, false, errMalformed
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(value, []byte("close")) {
				keep = false
			} else if bytes.EqualFold(value, []byte("keep-alive")) {
				keep = true
			}
		}
	}
	switch {
	case status < 200 || status == 204 || status == 304:
		return status, keep, nil
	case chunked:
		if _, err := io.Copy(io.Discard, httputil.NewChunkedReader(br)); err != nil {
			return status, false, err
		}
		// Trailers, then the blank line that ends the message.
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return status, false, err
			}
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				return status, keep, nil
			}
		}
	case length >= 0:
		_, err := br.Discard(int(length))
		return status, keep && err == nil, err
	default:
		// Delimited by the end of the connection.
		_, err := io.Copy(io.Discard, br)
		return status, false, err
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
