package mailparse

import (
	"bytes"
	"strconv"
	"testing"
	"time"
)

func TestDepthTiming(t *testing.T) {
	for _, n := range []int{10, 20, 40, 80, 160} {
		var deep bytes.Buffer
		deep.WriteString("Content-Type: multipart/mixed; boundary=b0\r\n\r\n")
		for i := 1; i < n; i++ {
			deep.WriteString("--b" + strconv.Itoa(i-1) + "\r\nContent-Type: multipart/mixed; boundary=b" + strconv.Itoa(i) + "\r\n\r\n")
		}
		deep.WriteString("--b" + strconv.Itoa(n-1) + "\r\nContent-Type: text/plain\r\n\r\ndeep https://example.com/deep\r\n")
		deep.Write(bytes.Repeat([]byte("x"), 10000))
		st := time.Now()
		Parse(deep.Bytes())
		t.Logf("depth %d size %d: %v", n, deep.Len(), time.Since(st))
	}
}
