package cmd

import (
	"regexp"
	"strconv"
	"testing"
)

// Sixty API clients that request a large message and never read the
// answer leave serve well under 256 MiB (SPEC §13): each response holds a
// slice of the message, not the message. Encoded whole, as before, the
// same load took over 2 GiB.
func TestSlowReadersStayBounded(t *testing.T) {
	r := capture(t, "bench", "slowread", "--clients", "60", "--size", "2000000", "--links", "50000")
	m := regexp.MustCompile(`peak ([\d.]+) MiB while they stalled`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("bench slowread: %+v", r)
	}
	peak, _ := strconv.ParseFloat(m[1], 64)
	t.Logf("%s", r.stdout)
	if peak >= 256 {
		t.Errorf("peak RSS %.1f MiB with 60 clients that never read, want < 256", peak)
	}
}
