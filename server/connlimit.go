package server

import (
	"bytes"
	"container/list"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capturedev/capture/server/api/contract"
)

// connLimit caps the connections one HTTP listener holds, so that a flood
// of idle connections can neither use up the process's file descriptors
// (the database and the other listeners need some) nor its memory. At the
// cap a new connection displaces the oldest one that is doing nothing (no
// request yet, or idle between keep-alive requests): a real client always
// gets in. Only when every connection is busy with a request is the new
// one refused, with a 503, and closed at once.
type connLimit struct {
	net.Listener
	max int

	mu      sync.Mutex
	conns   map[*limitedConn]struct{}
	waiting list.List // of *limitedConn with no request in progress, oldest first
	closing bool

	refusing atomic.Int64
}

func newConnLimit(l net.Listener, max int) *connLimit {
	return &connLimit{Listener: l, max: max, conns: make(map[*limitedConn]struct{})}
}

// limitedConn is a connection counted by its listener.
type limitedConn struct {
	net.Conn
	l         *connLimit
	waiting   *list.Element // in l.waiting; guarded by l.mu
	closeOnce sync.Once
}

// Write passes the connection's answers through, but for the plain-text
// ones net/http writes itself, before any handler runs, to a request it
// cannot read (a malformed request line, no Host, header fields past the
// limit): those go out in the envelope every error uses (SPEC §8).
func (c *limitedConn) Write(p []byte) (int, error) {
	if reply, ok := envelopedProtocolError(p); ok {
		if _, err := io.WriteString(c.Conn, reply); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// protocolErrorHead ends the head of net/http's own error answers (each
// written whole, in one Write, straight to the connection). A handler's
// answer never has it: it carries a Date header before its end.
const protocolErrorHead = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// envelopedProtocolError returns the enveloped form of p when p is one of
// net/http's own error answers.
func envelopedProtocolError(p []byte) (string, bool) {
	// Those answers are a status line, two headers and a short text.
	if len(p) > 512 {
		return "", false
	}
	if expectationFailed(p) {
		return closingReply(http.StatusExpectationFailed, "", &contract.Error{Code: contract.CodeInvalidParameter,
			Message: `unsupported Expect header: only "100-continue" is understood`,
			Fields:  map[string]string{"Expect": `only "100-continue" is understood`}}), true
	}
	statusLine, ok := bytes.CutPrefix(p, []byte("HTTP/1.1 "))
	if !ok {
		return "", false
	}
	statusLine, text, ok := bytes.Cut(statusLine, []byte(protocolErrorHead))
	if !ok || len(statusLine) < 3 || bytes.ContainsAny(statusLine, "\r\n") {
		return "", false
	}
	status, err := strconv.Atoi(string(statusLine[:3]))
	if err != nil || status < 400 {
		return "", false
	}
	// text is "400 Bad Request", "400 Bad Request: missing required Host
	// header", "Unsupported transfer encoding", …
	detail := string(text)
	if _, after, found := strings.Cut(detail, ": "); found {
		detail = after
	} else if strings.HasPrefix(detail, strconv.Itoa(status)+" ") {
		detail = ""
	}
	message := "malformed HTTP request"
	switch {
	case status == http.StatusRequestHeaderFieldsTooLarge:
		message = "the request's header fields are too large"
	case detail != "":
		message += ": " + strings.ToLower(detail[:1]) + detail[1:]
	}
	return closingReply(status, "", contract.Errorf(contract.CodeInvalidParameter, "%s", message)), true
}

// expectationFailed reports whether p is net/http's own answer to an
// Expect header other than 100-continue: a 417 with no body that closes
// the connection. Of serve's handlers, only an endpoint's custom response
// set to exactly that (status 417, Connection: close as its one header, no
// body) looks the same, and it would then go out in the envelope.
func expectationFailed(p []byte) bool {
	rest, ok := bytes.CutPrefix(p, []byte("HTTP/1.1 417 Expectation Failed\r\n"))
	if !ok {
		rest, ok = bytes.CutPrefix(p, []byte("HTTP/1.0 417 Expectation Failed\r\n"))
	}
	// Exactly its three headers: a custom 417 with other headers of its
	// own is the endpoint's answer and passes.
	rest, ok = bytes.CutPrefix(rest, []byte("Connection: close\r\nDate: "))
	if !ok {
		return false
	}
	date, ok := bytes.CutSuffix(rest, []byte("\r\nContent-Length: 0\r\n\r\n"))
	return ok && !bytes.Contains(date, []byte("\r\n"))
}

// closingReply is a whole answer written straight to a connection that
// is then closed: e's envelope with status, after headers (each ending in
// CRLF) if any.
func closingReply(status int, headers string, e *contract.Error) string {
	body := contract.EnvelopeOf(e)
	return "HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\nContent-Type: application/json\r\n" +
		headers + "Connection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + string(body)
}

func (c *limitedConn) Close() error {
	c.closeOnce.Do(func() {
		c.l.mu.Lock()
		c.l.forget(c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// forget stops counting c. Called with l.mu held.
func (l *connLimit) forget(c *limitedConn) {
	delete(l.conns, c)
	if c.waiting != nil {
		l.waiting.Remove(c.waiting)
		c.waiting = nil
	}
}

func (l *connLimit) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c, displaced, ok := l.admit(nc)
		if displaced != nil {
			displaced.Close()
		}
		if ok {
			return c, nil
		}
		if l.refusing.Add(1) > int64(l.max) {
			l.refusing.Add(-1)
			nc.Close()
			continue
		}
		go l.refuse(nc)
	}
}

func (l *connLimit) admit(nc net.Conn) (c, displaced *limitedConn, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		nc.Close()
		return nil, nil, false
	}
	if len(l.conns) >= l.max {
		oldest := l.waiting.Front()
		if oldest == nil {
			return nil, nil, false
		}
		displaced = oldest.Value.(*limitedConn)
		l.forget(displaced)
	}
	c = &limitedConn{Conn: nc, l: l}
	l.conns[c] = struct{}{}
	c.waiting = l.waiting.PushBack(c)
	return c, displaced, true
}

// refusedReply is the whole answer to a connection over the cap, in the
// envelope every error uses.
var refusedReply = closingReply(http.StatusServiceUnavailable, "Retry-After: 1\r\n",
	contract.Errorf(contract.CodeUnavailable, "too many connections; try again shortly"))

// refuse answers 503 to a connection over the cap, then lets it go. It
// reads what the client sends meanwhile, so that closing does not reset
// the connection before the client has read the answer.
func (l *connLimit) refuse(nc net.Conn) {
	defer l.refusing.Add(-1)
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(nc, refusedReply); err != nil {
		return
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(nc, 64<<10))
}

// track follows net/http's view of each connection (http.Server.ConnState):
// a connection waiting for its first or next request may be displaced.
func (l *connLimit) track(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, counted := l.conns[c]; !counted {
		return
	}
	switch state {
	case http.StateActive:
		if c.waiting != nil {
			l.waiting.Remove(c.waiting)
			c.waiting = nil
		}
	case http.StateIdle:
		if c.waiting == nil {
			c.waiting = l.waiting.PushBack(c)
		}
	case http.StateHijacked, http.StateClosed:
		l.forget(c)
	}
}

// busy is how many connections have a request in progress.
func (l *connLimit) busy() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns) - l.waiting.Len()
}

// closeWaiting stops admitting and closes every connection with no request
// in progress. http.Server.Shutdown closes idle keep-alive connections
// itself but waits for ones that never sent a request (a browser's
// preconnect, a port scan) until they are 5 s old; nothing is lost by
// closing them now.
func (l *connLimit) closeWaiting() {
	l.mu.Lock()
	l.closing = true
	var waiting []*limitedConn
	for e := l.waiting.Front(); e != nil; e = e.Next() {
		waiting = append(waiting, e.Value.(*limitedConn))
	}
	l.mu.Unlock()
	for _, c := range waiting {
		c.Close()
	}
}
