// Package resendtest records what arrives at a target byte for byte, for
// tests of everything that resends a capture (replay, forward).
package resendtest

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
)

// Recorder is a TCP listener that keeps the raw bytes of each HTTP/1.1
// request it gets (its head and Content-Length body) and answers each with
// the same raw response. No HTTP library sits between the wire and what it
// records.
type Recorder struct {
	ln       net.Listener
	requests chan string
	response string
}

// NewRecorder listens on a free loopback port until the test ends.
func NewRecorder(t testing.TB, response string) *Recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Recorder{ln: ln, requests: make(chan string, 64), response: response}
	t.Cleanup(func() { ln.Close() })
	go r.serve()
	return r
}

// URL is the recorder's base URL, http://127.0.0.1:PORT.
func (r *Recorder) URL() string { return "http://" + r.ln.Addr().String() }

// Host is the recorder's host:port.
func (r *Recorder) Host() string { return r.ln.Addr().String() }

// Requests delivers each request as it arrived.
func (r *Recorder) Requests() <-chan string { return r.requests }

func (r *Recorder) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		go r.conn(c)
	}
}

func (r *Recorder) conn(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		var head bytes.Buffer
		length := 0
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			head.WriteString(line)
			if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Content-Length") {
				length, _ = strconv.Atoi(strings.TrimSpace(v))
			}
			if line == "\r\n" {
				break
			}
		}
		body := make([]byte, length)
		if _, err := io.ReadFull(br, body); err != nil {
			return
		}
		r.requests <- head.String() + string(body)
		if _, err := io.WriteString(c, r.response); err != nil {
			return
		}
	}
}
