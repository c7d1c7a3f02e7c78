package bodyread

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// deadlineRecorder is a ResponseWriter whose connection's read deadline
// the test can see.
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	readDeadline time.Time
	set          int
	zeroed       bool // set to zero at some point
}

func (d *deadlineRecorder) SetReadDeadline(t time.Time) error {
	d.readDeadline, d.set = t, d.set+1
	d.zeroed = d.zeroed || t.IsZero()
	return nil
}

// The timer of an earlier read firing late, into a read whose own
// deadline is still ahead, does not cut that read off.
func TestLateTimerLeavesTheNextReadAlone(t *testing.T) {
	w := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	p := newPacedBody(w, nopCloser{strings.NewReader("")})
	p.arm(time.Hour)
	defer p.done()
	p.cutOff() // as the previous read's timer would, late
	if p.cut || w.set != 0 {
		t.Fatalf("a read with an hour left was cut off (deadline set %d times)", w.set)
	}
}

// A cut-off that comes as a read brings its bytes counts that read as too
// slow: it is refused with none of its bytes, and the connection's read
// deadline is never set to zero, which would lift net/http's own read
// timeout for the rest of the body.
func TestCutOffRacingABodysLastBytes(t *testing.T) {
	w := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	p := newPacedBody(w, nopCloser{strings.NewReader("the last bytes")})
	p.r = &racingReader{p: p, r: p.r}
	defer p.done()
	b := make([]byte, 64)
	n, err := p.Read(b)
	if n != 0 || !errors.Is(err, ErrTooSlow) {
		t.Fatalf("read = %d bytes %q, %v; want 0 bytes, %v", n, b[:n], err, ErrTooSlow)
	}
	if w.zeroed || w.set == 0 || w.readDeadline.IsZero() {
		t.Errorf("read deadline set %d times, zeroed %v, last %v; want the cut-off's and no zero",
			w.set, w.zeroed, w.readDeadline)
	}
}

// racingReader has the pacing timer fire, its deadline passed, while its
// first read is bringing its bytes.
type racingReader struct {
	p     *pacedBody
	r     interface{ Read([]byte) (int, error) }
	raced bool
}

func (r *racingReader) Read(b []byte) (int, error) {
	if r.raced {
		return r.r.Read(b)
	}
	r.raced = true
	r.p.mu.Lock()
	r.p.deadline = time.Now().Add(-time.Millisecond)
	r.p.mu.Unlock()
	r.p.cutOff()
	return r.r.Read(b)
}

func (*racingReader) Close() error { return nil }

type nopCloser struct{ r *strings.Reader }

func (n nopCloser) Read(b []byte) (int, error) { return n.r.Read(b) }
func (nopCloser) Close() error                 { return nil }
