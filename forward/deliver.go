package forward

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/capturedev/capture/server/api/contract"
)

// Error classes of a delivery that got no answer.
const (
	classRefused = "refused"
	classTimeout = "timeout"
	classDNS     = "dns"
	classOther   = "other"
)

// maxResponseDrain bounds how much of the handler's answer is read; it is
// read only so the connection can be reused.
const maxResponseDrain = 1 << 20

// hopByHop headers describe one connection, not the request, so they are
// never forwarded; Host and Content-Length follow the new target and body.
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Host": true, "Content-Length": true,
}

// result is one delivery as reported and recorded.
type result struct {
	At      time.Time
	ID      string
	Method  string
	Target  string // captured path and query
	URL     string
	Status  int
	Reason  string // "200 OK"
	Err     error
	Class   string
	ErrText string
	// Duration runs from sending until the answer was read.
	Duration time.Duration
	// Bytes is the size of the body delivered.
	Bytes int
}

// send delivers req to the handler exactly once.
func (f *forwarder) send(ctx context.Context, req contract.Request) result {
	r := result{At: time.Now(), ID: req.ID, Method: req.Method, Target: req.Target()}
	u := f.targetURL(req.Path, req.Query)
	// Not u.String(): an opaque URL prints without its host.
	r.URL = f.to + req.Target()
	body, err := req.BodyBytes()
	if err != nil {
		return r.failed(err)
	}
	r.Bytes = len(body)

	ctx, cancel := context.WithTimeout(ctx, DeliveryTimeout)
	defer cancel()
	out, err := http.NewRequestWithContext(ctx, req.Method, f.to, nil)
	if err != nil {
		return r.failed(err)
	}
	out.URL = u
	out.Header = forwardHeaders(req.Headers)
	if len(body) > 0 {
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.ContentLength = int64(len(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	} else {
		out.Body, out.ContentLength = http.NoBody, 0
	}

	start := time.Now()
	resp, err := f.http.Do(out)
	if err != nil {
		r.Duration = time.Since(start)
		return r.failed(err)
	}
	io.CopyN(io.Discard, resp.Body, maxResponseDrain)
	resp.Body.Close()
	r.Duration = time.Since(start)
	r.Status = resp.StatusCode
	r.Reason = resp.Status
	if r.Reason == "" || !strings.HasPrefix(r.Reason, strconv.Itoa(r.Status)) {
		r.Reason = strconv.Itoa(r.Status) + " " + http.StatusText(r.Status)
	}
	r.Reason = strings.TrimSpace(r.Reason)
	return r
}

func (r result) failed(err error) result {
	r.Err = err
	r.Class = classify(err)
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	r.ErrText = err.Error()
	if r.Class == classTimeout {
		r.ErrText = "no answer within " + DeliveryTimeout.String()
	}
	return r
}

// targetURL appends the captured path and query to --to as they were
// received: the request target is set verbatim rather than re-encoded, so
// the handler sees the same bytes the sender sent.
func (f *forwarder) targetURL(path, query string) *url.URL {
	u := *f.base
	u.RawQuery = query
	opaque := u.EscapedPath() + path
	if strings.HasPrefix(opaque, "//") {
		// An opaque "//…" would be read as a network path; parse instead.
		if p, err := url.Parse(f.to + path); err == nil {
			p.RawQuery = query
			return p
		}
	}
	u.Path, u.RawPath, u.Opaque = "", "", opaque
	return &u
}

// forwardHeaders copies the captured headers minus hop-by-hop ones,
// including those the captured Connection header named.
func forwardHeaders(hs contract.Headers) http.Header {
	named := map[string]bool{}
	for _, h := range hs {
		if http.CanonicalHeaderKey(h.Name) != "Connection" {
			continue
		}
		for _, v := range h.Values {
			for _, name := range strings.Split(v, ",") {
				if name = strings.TrimSpace(name); name != "" {
					named[http.CanonicalHeaderKey(name)] = true
				}
			}
		}
	}
	out := http.Header{}
	for _, h := range hs {
		name := http.CanonicalHeaderKey(h.Name)
		if hopByHop[name] || named[name] {
			continue
		}
		out[name] = append(out[name], h.Values...)
	}
	if _, ok := out["User-Agent"]; !ok {
		// Present but empty keeps net/http from adding its own User-Agent
		// to a request that was captured without one.
		out["User-Agent"] = []string{""}
	}
	return out
}

func classify(err error) string {
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.As(err, &dnsErr):
		return classDNS
	case errors.Is(err, syscall.ECONNREFUSED):
		return classRefused
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return classTimeout
	}
	return classOther
}
