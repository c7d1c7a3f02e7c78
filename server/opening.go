package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/server/certs"
	"github.com/capturedev/capture/server/emailapi"
	"github.com/capturedev/capture/store"
)

// While serve opens its database, which after an upgrade of capture
// migrates it and on a large database takes a while, the listeners are
// bound already (a port in use must stop serve before it writes anything).
// Left unserved, they would take connections and answer nothing: senders
// with short timeouts would give up unanswered, and a liveness probe would
// kill serve mid-upgrade, again at every start. So they are answered in
// the meantime, from memory, writing nothing anywhere: /healthz says the
// process is alive, /readyz and every other request get 503 with
// Retry-After, SMTP a 421 at its greeting, which senders retry later. Once
// the store is open the same listeners pass to the real servers: a port is
// never closed, and the answers in flight finish.

// openingRetryAfter is the wait the answers given while opening ask for.
const openingRetryAfter = 5 * time.Second

// openingDrain bounds how long the connections accepted before the
// hand-over may take to be answered.
const openingDrain = 10 * time.Second

// opening answers on a Server's listeners until handOver.
type opening struct {
	lent      []*lentListener
	servers   []*http.Server
	accepting sync.WaitGroup // the accept loops, Serve of servers included
	smtpConns sync.WaitGroup // SMTP connections being told 421
	httpConns sync.WaitGroup // HTTP connections being answered
	done      chan struct{}  // closed once what was in flight is finished
	once      sync.Once

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // SMTP connections being told 421
	closed bool                  // conns are closed as they come
}

// openingCaps bound what the answers hold, as serving does (connlimit.go):
// an upgrade can take minutes, and a flood of connections meanwhile must
// not use up the file descriptors the database and the real servers need.
type openingCaps struct {
	// http caps each HTTP listener's connections; smtp those being told
	// 421 across the SMTP listeners (past it, a plain connection gets the
	// 421 at once and an implicit-TLS one is closed unanswered).
	http, smtp int
}

func servingCaps() openingCaps { return openingCaps{http: httpConnCap(), smtp: smtpConnCap()} }

// openingStatus is what the answers say: why captures are not taken yet.
type openingStatus struct {
	// message is the HTTP refusal's; smtpReply the 421 greeting's text
	// after the host.
	message, smtpReply string
}

func openingStatusFor(upgrading bool) openingStatus {
	if upgrading {
		return openingStatus{
			message:   "capture is upgrading its database schema; captures are taken once the upgrade ends: try again in a few seconds",
			smtpReply: "upgrading the database, try again later",
		}
	}
	return openingStatus{
		message:   "capture is starting; captures are taken once its database is open: try again in a few seconds",
		smtpReply: "starting, try again later",
	}
}

// answerWhileOpening starts answering on every listener of s. Implicit-TLS
// SMTP is answered only with smtpTLS; without it its connections wait, as
// before, until the real server takes them.
func (s *Server) answerWhileOpening(status openingStatus, smtpTLS *tls.Config, caps openingCaps) *opening {
	o := &opening{done: make(chan struct{})}
	errorLog := slog.NewLogLogger(slog.DiscardHandler, slog.LevelDebug)
	serve := func(l net.Listener, h http.Handler) {
		ll, ok := lend(l)
		if !ok {
			return
		}
		srv := &http.Server{
			Handler:           h,
			ReadHeaderTimeout: apiReadHeaderTimeout,
			ReadTimeout:       apiReadTimeout,
			WriteTimeout:      apiWriteTimeout,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          errorLog,
		}
		// One answer a connection: the next request on it finds the real
		// server, or a new connection does.
		srv.SetKeepAlivesEnabled(false)
		limit := newConnLimit(ll, caps.http)
		srv.ConnState = func(c net.Conn, state http.ConnState) {
			limit.track(c, state)
			switch state {
			case http.StateNew:
				o.httpConns.Add(1)
			case http.StateClosed, http.StateHijacked:
				o.httpConns.Done()
			}
		}
		o.lent = append(o.lent, ll)
		o.servers = append(o.servers, srv)
		o.accepting.Go(func() { srv.Serve(limit) })
	}
	unavailable := func(w http.ResponseWriter, _ *http.Request) {
		contract.WriteError(w, &contract.Error{Code: contract.CodeUnavailable, Message: status.message, RetryAfter: openingRetryAfter})
	}
	ops := http.NewServeMux()
	ops.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		// As ever: the process answers, so it is alive.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok")
	})
	ops.HandleFunc("/", unavailable)
	serve(s.httpLn, ops)
	serve(s.captureLn, http.HandlerFunc(unavailable))
	if s.emailLn != nil {
		// The providers' routes answer as they do when the database
		// cannot take writes: each in its provider's shape, which its SDK
		// reads as a retryable failure.
		serve(s.emailLn, emailapi.New(notOpenYet{}, emailapi.Config{Logger: slog.New(slog.DiscardHandler)}))
	}

	reply := []byte("421 4.3.0 " + s.cfg.SMTPHost + " " + status.smtpReply + "\r\n")
	greet := func(l net.Listener, config *tls.Config) {
		ll, ok := lend(l)
		if !ok {
			return
		}
		o.lent = append(o.lent, ll)
		o.accepting.Go(func() {
			for {
				c, err := ll.Accept()
				if errors.Is(err, net.ErrClosed) {
					return
				}
				if err != nil {
					// Out of file descriptors, say: the connections wait.
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if !o.track(c, caps.smtp) {
					// Over the cap: a plain greeting costs one write
					// into an empty socket buffer, so it is still
					// given; a TLS handshake is not begun.
					if config == nil {
						c.SetDeadline(time.Now().Add(100 * time.Millisecond))
						c.Write(reply)
					}
					c.Close()
					continue
				}
				o.smtpConns.Go(func() {
					defer o.untrack(c)
					turnAway(c, config, reply)
				})
			}
		})
	}
	for _, l := range s.startTLSLns {
		greet(l, nil)
	}
	if smtpTLS != nil {
		for _, l := range s.tlsLns {
			greet(l, smtpTLS)
		}
	}
	return o
}

// turnAway greets an SMTP client with reply, in TLS when config is set,
// and hangs up.
func turnAway(c net.Conn, config *tls.Config, reply []byte) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if config != nil {
		tc := tls.Server(c, config)
		if tc.Handshake() != nil {
			return
		}
		defer tc.Close()
		c = tc
	}
	c.Write(reply)
}

// track counts c among the SMTP connections being answered; false when
// it is not to be (the answers are cut off, or max are under way).
func (o *opening) track(c net.Conn, max int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || len(o.conns) >= max {
		return false
	}
	if o.conns == nil {
		o.conns = map[net.Conn]struct{}{}
	}
	o.conns[c] = struct{}{}
	return true
}

func (o *opening) untrack(c net.Conn) {
	o.mu.Lock()
	delete(o.conns, c)
	o.mu.Unlock()
}

// stopAccepting returns once nothing accepts on the listeners any more;
// they are left open for their owner.
func (o *opening) stopAccepting() {
	for _, l := range o.lent {
		l.stop()
	}
	o.accepting.Wait()
	for _, l := range o.lent {
		l.resume()
	}
}

// handOver stops answering: once it returns, nothing accepts on the
// listeners, which are left open for the real servers to serve. Answers
// already begun finish in the background (close waits for them).
func (o *opening) handOver() {
	o.once.Do(func() {
		o.stopAccepting()
		// Each connection accepted is answered (keep-alives are off), not
		// dropped as Shutdown drops a request read after it began; one
		// whose client sends nothing is cut off after openingDrain.
		go func() {
			defer close(o.done)
			finished := make(chan struct{})
			go func() {
				o.httpConns.Wait()
				o.smtpConns.Wait() // each bounded by turnAway's deadline
				close(finished)
			}()
			select {
			case <-finished:
			case <-time.After(openingDrain):
				o.cutOff()
				<-finished
			}
		}()
	})
}

// cutOff closes every connection still being answered.
func (o *opening) cutOff() {
	for _, srv := range o.servers {
		srv.Close()
	}
	o.mu.Lock()
	o.closed = true
	for c := range o.conns {
		c.Close()
	}
	o.mu.Unlock()
}

// close stops answering, and cuts off what is still being answered (a
// client that sends nothing), so that serve, failing to start or stopping,
// can close the listeners and return at once.
func (o *opening) close() {
	o.handOver()
	o.cutOff()
	<-o.done
}

// lentListener is a listener the opening answers on, without owning it:
// Close leaves it open, and stop ends Accept without closing it.
type lentListener struct {
	*net.TCPListener
	stopping atomic.Bool
}

func lend(l net.Listener) (*lentListener, bool) {
	tl, ok := l.(*net.TCPListener)
	if !ok {
		return nil, false
	}
	return &lentListener{TCPListener: tl}, true
}

// Accept returns net.ErrClosed once stopped: to http.Server a permanent
// error, where a deadline's would be retried.
func (l *lentListener) Accept() (net.Conn, error) {
	c, err := l.TCPListener.Accept()
	if err != nil && l.stopping.Load() {
		return nil, net.ErrClosed
	}
	return c, err
}

// Close is the owner's to do: http.Server closes what it serves when it
// shuts down.
func (l *lentListener) Close() error { return nil }

// stop makes a pending Accept, and every later one, fail at once.
func (l *lentListener) stop() {
	l.stopping.Store(true)
	l.SetDeadline(time.Unix(1, 0))
}

// resume lifts stop's deadline, for the listener's owner.
func (l *lentListener) resume() { l.SetDeadline(time.Time{}) }

// notOpenYet is the store the email API answers over while the database
// opens: every read fails as unavailable, and nothing is written.
type notOpenYet struct{}

func (notOpenYet) Inbox(context.Context, string, string) (store.Inbox, error) {
	return store.Inbox{}, store.ErrUnavailable
}

func (notOpenYet) InboxBySMTPPassword(context.Context, string) (store.Inbox, error) {
	return store.Inbox{}, store.ErrUnavailable
}

func (notOpenYet) Project(context.Context, string) (store.Project, error) {
	return store.Project{}, store.ErrUnavailable
}

func (notOpenYet) InsertMessages(context.Context, []*store.NewMessage) ([]string, error) {
	return nil, store.ErrUnavailable
}

// existingSMTPCert is the TLS configuration of the SMTP certificate a
// data dir holds already, read without changing anything, for implicit-TLS
// SMTP while the database opens: nil when there is none yet (a first
// start), or it would not do for host (expired, other names).
func existingSMTPCert(dir, host string) *tls.Config {
	tlsDir := filepath.Join(dir, "tls")
	cert, err := certs.Load(filepath.Join(tlsDir, certs.CertFile), filepath.Join(tlsDir, certs.KeyFile))
	if err != nil || len(cert.Certificate) == 0 {
		return nil
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil || time.Now().After(leaf.NotAfter) || leaf.VerifyHostname(host) != nil {
		return nil
	}
	return certs.ServerConfig(cert)
}
