package emailapi

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/capturedev/capture/store"
)

// TestBudgetGrowsWhileWriting decodes a SendGrid request that expands to a
// message per personalization: the reservation is asked to grow as each
// message is written, and when it finds no room decoding stops there,
// the request starved, not once every message is in memory.
func TestBudgetGrowsWhileWriting(t *testing.T) {
	var ps []string
	for i := range 5 {
		ps = append(ps, fmt.Sprintf(`{"to":[{"email":"r%d@example.com"}]}`, i))
	}
	body := []byte(`{"personalizations":[` + strings.Join(ps, ",") + `],"from":{"email":"a@example.com"},"subject":"s",` +
		`"content":[{"type":"text/plain","value":"x"}]}`)
	b := newBudget(store.Plan{Name: "free", MessageBytes: 10 << 20})
	var asked []int64
	b.grow = func(written int64) error {
		asked = append(asked, written)
		if len(asked) == 2 {
			return errors.New("no room")
		}
		return nil
	}
	out, apiErr := decodeSendGrid(nil, body, b)
	if out != nil || apiErr == nil || apiErr.kind != unavailable || !b.starved {
		t.Fatalf("decode with no room: %v %+v, starved %v", out, apiErr, b.starved)
	}
	if len(asked) != 2 || asked[0] <= 0 || asked[1] <= asked[0] {
		t.Errorf("grow asked for %v, want the first two messages' running total", asked)
	}
	if apiErr.msg != errUnavailable.msg {
		t.Errorf("refused with %q", apiErr.msg)
	}
}
