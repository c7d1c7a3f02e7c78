package forward

import (
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
	"github.com/capturedev/capture/server/api/resend"
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
	var u *url.URL
	u, r.URL = resend.Join(f.base, req.Path, req.Query)
	body, err := req.BodyBytes()
	if err != nil {
		return r.failed(err)
	}
	r.Bytes = len(body)

	ctx, cancel := context.WithTimeout(ctx, DeliveryTimeout)
	defer cancel()
	captured := req.Headers.HTTP()
	out, err := resend.NewRequest(ctx, req.Method, u, resend.Header(captured), body)
	if err != nil {
		return r.failed(err)
	}
	if len(body) == 0 {
		_, hadLength := captured["Content-Length"]
		resend.FrameEmpty(out, hadLength)
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
	// The next delivery opens a connection of its own. Development servers
	// that write an answer's head and body apart (Python's http.server,
	// under Flask and Django) have the body held by Nagle's algorithm until
	// the head is acknowledged, which Linux delays by up to 40 ms on a
	// connection past its first exchanges; a new local connection costs a
	// fraction of that. Closing it here, rather than asking the handler to
	// with "Connection: close", sends no header the capture lacked.
	f.http.CloseIdleConnections()
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
