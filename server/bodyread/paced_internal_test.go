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
}

func (d *deadlineRecorder) SetReadDeadline(t time.Time) error {
	d.readDeadline, d.set = t, d.set+1
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

// A cut-off that comes as a read brings its bytes lets them count: the
// read succeeds, the next is not refused as too slow, and the connection
// keeps no read deadline in the past.
func TestCutOffRacingABodysLastBytes(t *testing.T) {
	w := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	p := newPacedBody(w, nopCloser{strings.NewReader("the last bytes")})
	p.r = &racingReader{p: p, r: p.r}
	defer p.done()
	b := make([]byte, 64)
	n, err := p.Read(b)
	if err != nil || string(b[:n]) != "the last bytes" {
		t.Fatalf("read = %q, %v", b[:n], err)
	}
	if p.cut || !w.readDeadline.IsZero() {
		t.Errorf("after a read that brought its bytes: cut %v, read deadline %v, want none", p.cut, w.readDeadline)
	}
	if _, err := p.Read(b); errors.Is(err, ErrTooSlow) {
		t.Errorf("the next read: %v", err)
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
