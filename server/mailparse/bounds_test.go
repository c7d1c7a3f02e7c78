package mailparse

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// linkHeavyMessage builds an HTML message of about size bytes made of n
// distinct links, the shape of the memory loads of SPEC §13: a single
// 7bit part, or with qp a multipart/alternative whose HTML part is
// quoted-printable.
func linkHeavyMessage(size, n int, qp bool) []byte {
	var b bytes.Buffer
	b.Grow(size + 1024)
	b.WriteString("From: load@example.com\r\nTo: sink@example.com\r\nSubject: links\r\nMIME-Version: 1.0\r\n")
	if qp {
		b.WriteString("Content-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\n" +
			"Content-Type: text/plain; charset=utf-8\r\n\r\nSee the HTML part.\r\n--b\r\n" +
			"Content-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n")
	} else {
		b.WriteString("Content-Type: text/html; charset=utf-8\r\n\r\n")
	}
	b.WriteString("<html><body>\r\n")
	eq := "="
	if qp {
		eq = "=3D"
	}
	pad := max(size/n-len("<a href=https://l.ex/0000000>x</a>\r\n"), 0)
	text := "x" + strings.Repeat("y", pad)
	for i := range n {
		fmt.Fprintf(&b, "<a href%shttps://l.ex/%07d>%s</a>\r\n", eq, i, text)
	}
	b.WriteString("</body></html>\r\n")
	if qp {
		b.WriteString("--b--\r\n")
	}
	return b.Bytes()
}

// peakRSS resets the kernel's high-water mark of the process's resident
// memory, runs f and returns the new high-water mark in bytes (0 where
// /proc cannot tell).
func peakRSS(f func()) int64 {
	debug.FreeOSMemory()
	if os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) != nil {
		f()
		return 0
	}
	f()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func benchmarkLinkHeavy(b *testing.B, size, n int, qp bool) {
	raw := linkHeavyMessage(size, n, qp)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	var peak int64
	for b.Loop() {
		var m *Message
		peak = max(peak, peakRSS(func() { m = Parse(raw) }))
		if len(m.Links) != maxLinks || !m.LinksTruncated {
			b.Fatalf("%d links, truncated %v", len(m.Links), m.LinksTruncated)
		}
	}
	runtime.KeepAlive(raw)
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(len(raw))/(1<<20), "msg-MiB")
}

// BenchmarkParseLinks parses link-heavy mail; B/op is what one parse
// allocates, peak-RSS-MiB the process's resident high-water mark during it
// (the message itself included).
func BenchmarkParseLinks(b *testing.B) {
	for _, bb := range []struct {
		name    string
		size, n int
		qp      bool
	}{
		{"10MiB-200k", 10 << 20, 200_000, false},
		{"50MiB-1.4M", 50 << 20, 1_400_000, false},
		{"10MiB-200k-qp", 10 << 20, 200_000, true},
		{"50MiB-1.4M-qp", 50 << 20, 1_400_000, true},
	} {
		b.Run(bb.name, func(b *testing.B) { benchmarkLinkHeavy(b, bb.size, bb.n, bb.qp) })
	}
}
