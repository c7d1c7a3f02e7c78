package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/smtp"
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
	msg := htmlMessage(size, links)
	res.MessageBytes = len(msg)
	if err := t.sendMail(msg); err != nil {
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

	u := strings.TrimPrefix(t.API, "http://")
	host := u[:strings.IndexByte(u, '/')]
	request := "GET " + t.API[len("http://")+len(host):] + "/messages/" + l.Items[0].ID + " HTTP/1.1\r\nHost: " + host +
		"\r\nAuthorization: Bearer " + t.Key + "\r\n\r\n"
	// A small receive buffer keeps the answer in the server's memory
	// rather than in the client's kernel.
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range clients {
		c, err := dialer.DialContext(ctx, "tcp", host)
		if err != nil {
			return res, err
		}
		conns = append(conns, c)
		if _, err := c.Write([]byte(request)); err != nil {
			return res, err
		}
	}

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

// htmlMessage is an HTML message of about size bytes holding n distinct
// links.
func htmlMessage(size, n int) []byte {
	var b strings.Builder
	b.WriteString("From: Bench <bench@app.test>\r\nTo: user@app.test\r\nSubject: many links\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<html><body>\r\n")
	for i := range n {
		sep := " "
		if i%20 == 19 {
			sep = "\r\n" // SMTP lines stay short
		}
		fmt.Fprintf(&b, "<a href=\"https://a.test/%d\">x</a>%s", i, sep)
	}
	for b.Len() < size {
		b.WriteString("<p>padding padding padding padding padding padding padding padding</p>\r\n")
	}
	b.WriteString("</body></html>\r\n")
	return []byte(b.String())
}

// sendMail sends msg over STARTTLS with the inbox's credentials.
func (t *Target) sendMail(msg []byte) error {
	pem, err := os.ReadFile(t.CAFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	c, err := smtp.Dial(t.StartTLSAddr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.StartTLS(&tls.Config{RootCAs: pool, ServerName: "localhost"}); err != nil {
		return err
	}
	if err := c.Auth(smtp.PlainAuth("", t.InboxID, t.SMTPPassword, "127.0.0.1")); err != nil {
		return err
	}
	if err := c.Mail("bench@app.test"); err != nil {
		return err
	}
	if err := c.Rcpt("user@app.test"); err != nil {
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
