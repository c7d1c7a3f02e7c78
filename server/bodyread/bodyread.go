// Package bodyread reads the request bodies that HTTP ingest (webhook
// captures, the provider email APIs) holds in memory while it handles them,
// within the ingest budget they share with SMTP: a body reserves only a
// first piece before its first byte and the rest as it arrives, and one
// that stops coming is cut off, so that senders who declare large bodies
// and stall hold little, and not for long.
package bodyread

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/capturedev/capture/server/admission"
)

// A body holds room in the ingest budget while it arrives, which every
// capture and SMTP message shares: it must keep coming. After a grace
// period, a body that averages less than MinRate is cut off, so that
// senders who declare large bodies and stall cannot hold the budget
// (together, all ingest) for the whole read timeout.
const (
	// FirstPiece is what a declared body reserves before its first byte.
	FirstPiece = 16 << 10
	Grace      = 2 * time.Second
	MinRate    = 64 << 10 // bytes a second
)

// ErrTooSlow is Read's error for a body cut off for falling behind MinRate.
var ErrTooSlow = fmt.Errorf("the body came at under %d KiB/s", MinRate>>10)

// Read reads r's whole body, of at most limit bytes, holding weight times
// its size in budget: what the caller will hold while it handles the body.
// It waits for room until ctx ends, and then returns its cause (see
// admission.Within).
//
// Before the first byte it reserves weight times a first piece of a
// declared body (nothing for one of unknown length); it grows the
// reservation before each larger buffer it needs: a declared length in
// full once its first piece has come, a body of unknown length as it
// arrives. Never after the body is read: a reservation that grows gives
// back what it holds while it waits, and bodies read and waiting so would
// be held without limit.
//
// On success it returns the body, the reservation (which the caller
// releases, and may grow further) and the pooled buffer the body lives in
// (nil when none was taken), which the caller may hand back with Put once
// nothing refers to the body. On error nothing is held but the buffer
// returned, if any; the error is a *http.MaxBytesError for a body over
// limit (at once, before any wait for room, when its declared length is),
// ErrTooSlow for one that stopped coming, the cause of ctx for no room, and
// the read's own error for a body that ended early.
func Read(ctx context.Context, w http.ResponseWriter, r *http.Request, budget *admission.Budget, limit, weight int64) (
	[]byte, *admission.Reservation, *[]byte, error) {
	if r.ContentLength > limit {
		// Refused at once, before waiting for room or reading a byte,
		// and before net/http sends "100 Continue" to a client that
		// asked for it.
		return nil, nil, nil, &http.MaxBytesError{Limit: limit}
	}
	res, err := budget.Reserve(ctx, weight*min(max(r.ContentLength, 0), FirstPiece))
	if err != nil {
		return nil, nil, nil, err
	}
	body, buf, err := read(ctx, w, r, limit, weight, res)
	if err != nil {
		res.Release()
		return nil, nil, buf, err
	}
	return body, res, buf, nil
}

func read(ctx context.Context, w http.ResponseWriter, r *http.Request, limit, weight int64, res *admission.Reservation) ([]byte, *[]byte, error) {
	n := r.ContentLength
	if n == 0 {
		return []byte{}, nil, nil
	}
	body := newPacedBody(w, r.Body)
	defer body.done()
	if n > 0 {
		first := min(n, FirstPiece)
		buf := getBuffer(int(first))
		b := (*buf)[:first]
		if _, err := io.ReadFull(body, b); err != nil {
			return nil, buf, err
		}
		if n == first {
			return b, buf, nil
		}
		// Only a first piece is held while this waits for room.
		if err := res.Grow(ctx, weight*n); err != nil {
			return nil, buf, err
		}
		body.resume()
		whole := getBuffer(int(n))
		all := append((*whole)[:0], b...)[:n]
		Put(buf)
		if _, err := io.ReadFull(body, all[first:]); err != nil {
			return nil, whole, err
		}
		return all, whole, nil
	}
	// Unknown length (chunked): read up to the limit. MaxBytesReader also
	// tells net/http to close the connection instead of draining the rest.
	rd := http.MaxBytesReader(w, body, limit)
	buf := getBuffer(minBuffer)
	b := (*buf)[:0]
	for {
		if len(b) == cap(b) {
			// The old buffer and the new are both held while copying.
			grown := int(min(int64(2*cap(b)), limit+1))
			if err := res.Grow(ctx, weight*int64(cap(b)+grown)); err != nil {
				*buf = b[:0]
				return nil, buf, err
			}
			body.resume()
			b = slices.Grow(b, grown-len(b))
		}
		m, err := rd.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			*buf = b[:0]
			return b, buf, nil
		}
		if err != nil {
			*buf = b[:0]
			return nil, buf, err
		}
	}
}

// pacedBody reads a request body that must keep coming: each read must
// end by the time a body arriving at MinRate, after Grace, would have
// brought the next byte, or the read is cut off (the connection's read
// deadline moved to now; net/http's own read timeout still holds). Time
// spent waiting for the budget, when nothing is read, does not count.
type pacedBody struct {
	r        io.ReadCloser
	rc       *http.ResponseController
	since    time.Time
	received int64 // since since

	mu       sync.Mutex
	timer    *time.Timer
	armed    bool      // a read is under way
	deadline time.Time // by when it must end
	cut      bool      // a read was cut off
}

func newPacedBody(w http.ResponseWriter, r io.ReadCloser) *pacedBody {
	return &pacedBody{r: r, rc: http.NewResponseController(w), since: time.Now()}
}

func (p *pacedBody) Read(b []byte) (int, error) {
	p.arm(time.Until(p.since.Add(Grace + time.Duration(p.received)*time.Second/MinRate)))
	n, err := p.r.Read(b)
	if p.disarm() {
		// A read during which the cut-off fired was too slow, even one
		// that brought bytes as it fired: the body is refused and the
		// connection closed. Its bytes are not returned, so that a
		// caller filling a buffer cannot take a full one for success,
		// and the connection's read deadline stays where the cut-off
		// put it (net/http's own read timeout still holds).
		return 0, ErrTooSlow
	}
	p.received += int64(n)
	return n, err
}

func (p *pacedBody) arm(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
	p.deadline = time.Now().Add(d)
	if p.timer == nil {
		p.timer = time.AfterFunc(d, p.cutOff)
	} else {
		p.timer.Reset(d)
	}
}

func (p *pacedBody) disarm() (cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = false
	p.timer.Stop()
	return p.cut
}

// cutOff ends the read under way once its deadline has passed. A timer
// armed for an earlier read can fire late, into the next one, whose
// deadline is later: that read is left alone.
func (p *pacedBody) cutOff() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed && !time.Now().Before(p.deadline) {
		p.cut = true
		p.rc.SetReadDeadline(time.Now())
	}
}

func (p *pacedBody) Close() error { return p.r.Close() }

// resume starts the clock again after a wait for the budget.
func (p *pacedBody) resume() { p.since, p.received = time.Now(), 0 }

// done ends the pacing: no read is cut off once the handler goes on.
func (p *pacedBody) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = false
	if p.timer != nil {
		p.timer.Stop()
	}
}

const (
	minBuffer = 4 << 10
	// Larger buffers go back to the garbage collector rather than sit in
	// the pool: a burst of large bodies must not pin memory afterwards.
	maxPooledBuffer = 64 << 10
)

var bufferPool = sync.Pool{New: func() any { b := make([]byte, 0, minBuffer); return &b }}

func getBuffer(n int) *[]byte {
	if n > maxPooledBuffer {
		b := make([]byte, 0, n)
		return &b
	}
	buf := bufferPool.Get().(*[]byte)
	if cap(*buf) < n {
		*buf = make([]byte, 0, max(n, minBuffer))
	}
	return buf
}

// Put hands a buffer Read returned back for another body. Only once
// nothing refers to the body in it; a caller that cannot tell leaves it to
// the garbage collector.
func Put(buf *[]byte) {
	if cap(*buf) <= maxPooledBuffer {
		bufferPool.Put(buf)
	}
}
