package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/smtp"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// SlowReaders is what SlowRead measured.
type SlowReaders struct {
	Clients      int
	MessageBytes int
	Links        int
	// Before is the resident memory of the server, started afresh over the
	// stored message; Peak the most it held since, while the clients
	// stalled.
	Before, Peak int64
	// Stalled is how long the clients were left stalled.
	Stalled time.Duration
}

func (s SlowReaders) String() string {
	return fmt.Sprintf("%d clients that never read GET /messages/{id} of a %.1f MB message with %d links: "+
		"RSS %.1f MiB before, peak %.1f MiB while they stalled %.0f s",
		s.Clients, float64(s.MessageBytes)/1e6, s.Links, mib(s.Before), mib(s.Peak), s.Stalled.Seconds())
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// SlowRead stores one HTML message of about size bytes holding links
// links, restarts the server, then has clients connections request the
// message and never read the answer, and measures the server's resident
// memory while they stall: what a response holds for a client that does
// not read is what 60 such clients multiply (SPEC §13).
func (t *Target) SlowRead(ctx context.Context, clients, size, links int) (SlowReaders, error) {
	res := SlowReaders{Clients: clients, Links: links}
	msg := LinkHeavyMessage(size, links)
	res.MessageBytes = len(msg)
	if err := t.SendMail(loadFrom, loadTo, msg); err != nil {
		return res, err
	}
	var l struct{ Items []struct{ ID string } }
	if err := t.get(ctx, http.DefaultClient, "/inboxes/"+t.InboxID+"/messages?limit=1", &l); err != nil {
		return res, err
	}
	if len(l.Items) != 1 {
		return res, errors.New("the message sent is not in the inbox")
	}
	// What storing the message took is not this load's: measure a fresh
	// server holding it.
	if err := t.Restart(ctx); err != nil {
		return res, err
	}
	var err error
	if res.Before, err = t.status("VmRSS"); err != nil {
		return res, err
	}

	conns, err := t.StallReaders(ctx, l.Items[0].ID, clients)
	if err != nil {
		return res, err
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()

	// The server settles once every response is stuck on a full socket:
	// wait until its memory has stopped growing for 3 s (at most 60 s).
	start := time.Now()
	last, lastGrowth := res.Before, time.Now()
	for time.Since(lastGrowth) < 3*time.Second && time.Since(start) < 60*time.Second {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		rss, err := t.status("VmRSS")
		if err != nil {
			return res, err
		}
		if rss > last+1<<20 {
			lastGrowth = time.Now()
		}
		last = max(last, rss)
	}
	res.Stalled = time.Since(start)
	res.Peak, err = t.PeakRSS()
	return res, err
}

// StallReaders opens n connections to the read API that each request
// message id and then read nothing, and returns them for the caller to
// close. A small receive buffer, set before connecting so that the window
// offered stays small, keeps the answer in the server's memory rather than
// in this side's kernel.
func (t *Target) StallReaders(ctx context.Context, id string, n int) ([]net.Conn, error) {
	u, err := url.Parse(t.API)
	if err != nil {
		return nil, err
	}
	collection := "/messages/"
	if strings.HasPrefix(id, "req_") {
		collection = "/requests/"
	}
	request := "GET " + u.Path + collection + id + " HTTP/1.1\r\nHost: " + u.Host +
		"\r\nAuthorization: Bearer " + t.Key + "\r\n\r\n"
	dialer := net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := dialer.DialContext(ctx, "tcp", u.Host)
		if err == nil {
			conns = append(conns, c)
			_, err = io.WriteString(c, request)
		}
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return nil, err
		}
	}
	return conns, nil
}

// status reads one "Name: N kB" line of the server's /proc status.
func (t *Target) status(name string) (int64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(t.PID()), "status"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name+":"); ok {
			kb, err := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc status", name)
}

// The envelope of the messages the loads send, as their headers name it.
const (
	loadFrom = "load@example.com"
	loadTo   = "inbox@example.com"
)

// LinkHeavyMessage is an HTML message of size bytes at most (unless its
// links alone take more) holding links distinct links, each with a word of
// its own, as a newsletter with a tracking URL per word would. Its lines
// stay short, as SMTP wants them.
func LinkHeavyMessage(size, links int) []byte {
	const (
		head = "From: Load <" + loadFrom + ">\r\nTo: " + loadTo + "\r\nSubject: many links\r\n" +
			"MIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<html><body>\r\n"
		pad  = "<p>padding padding padding padding padding padding padding padding</p>\r\n"
		tail = "</body></html>\r\n"
	)
	var b bytes.Buffer
	b.Grow(max(size, len(head)+len(tail)))
	b.WriteString(head)
	for i := range links {
		fmt.Fprintf(&b, "<a href=\"https://t.example.com/c/%d\">w%d</a>\r\n", i, i)
	}
	for b.Len()+len(pad)+len(tail) <= size {
		b.WriteString(pad)
	}
	b.WriteString(tail)
	return b.Bytes()
}

// SendMail sends msg from the envelope sender from to the recipient to over
// STARTTLS with the inbox's credentials, and returns once the server
// acknowledged it (after its commit) or refused it.
func (t *Target) SendMail(from, to string, msg []byte) error {
	pem, err := os.ReadFile(t.CAFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	nc, err := net.DialTimeout("tcp", t.StartTLSAddr, 10*time.Second)
	if err != nil {
		return err
	}
	nc.SetDeadline(time.Now().Add(2 * time.Minute))
	c, err := smtp.NewClient(nc, "localhost")
	if err != nil {
		nc.Close()
		return err
	}
	defer c.Close()
	if err := c.StartTLS(&tls.Config{RootCAs: pool, ServerName: "localhost"}); err != nil {
		return err
	}
	if err := c.Auth(smtp.PlainAuth("", t.InboxID, t.SMTPPassword, "localhost")); err != nil {
		return err
	}
	if err := c.Mail(from); err != nil {
		return err
	}
	if err := c.Rcpt(to); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("send the message: %w", err)
	}
	return c.Quit()
}
