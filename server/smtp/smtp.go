// Package smtp is capture's SMTP listener: it authenticates a client as one
// inbox, accepts any recipients, and stores each message it is given, parsed,
// before answering 250.
package smtp

import (
	"bytes"
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gosmtp "github.com/emersion/go-smtp"

	"github.com/capturedev/capture/server/admission"
	"github.com/capturedev/capture/server/outage"
	"github.com/capturedev/capture/store"
)

// Store is what SMTP capture needs from the database.
type Store interface {
	Inbox(ctx context.Context, projectID, id string) (store.Inbox, error)
	Project(ctx context.Context, idOrName string) (store.Project, error)
	InsertMessage(ctx context.Context, m *store.NewMessage) (string, error)
}

var _ Store = (*store.Store)(nil)

// Config holds the settings shared by every SMTP listener.
type Config struct {
	// Hostname names the server in the greeting. Default "localhost".
	Hostname string
	// TLSConfig serves STARTTLS and implicit TLS. Without it STARTTLS is not
	// offered and Serve refuses implicit TLS.
	TLSConfig *tls.Config
	// AllowInsecureAuth lets clients authenticate before TLS.
	AllowInsecureAuth bool
	// MaxConnections bounds concurrent connections across all listeners.
	// Connections that have not authenticated may hold half of them; past
	// that, or past the whole, a new connection displaces the oldest
	// unauthenticated one, so that idle or hostile clients can never lock
	// senders out. Only when every slot is an authenticated session does a
	// new connection get a 421 and close. Default 256.
	MaxConnections int
	// PreAuthTimeout is how long a connection may stay without
	// authenticating, whatever it sends meanwhile. Default 30s.
	PreAuthTimeout time.Duration
	// Budget bounds the bytes of messages read, parsed and stored at once,
	// together with what else shares it (webhook ingest). Nil means no
	// bound.
	Budget *admission.Budget
	// AdmissionWait bounds how long a message waits for room in Budget
	// before it gets a 451. Default 1m: senders wait minutes for the reply
	// to DATA (RFC 5321 §4.5.3.2.6 suggests 10).
	AdmissionWait time.Duration
	// ReadTimeout and WriteTimeout bound each command and reply (a whole
	// DATA transfer counts as one command). Default 60s each.
	ReadTimeout, WriteTimeout time.Duration
	// Refused, if set, hears why a message or a sign-in was refused:
	// unauthorized (535), quota_exceeded (552) or unavailable (451, 454).
	Refused func(code string)
	// MaxLineLength bounds a command line and any line of a message sent
	// with DATA. Default 1 MiB: RFC 5321 asks for 1000, but senders that
	// skip line folding in HTML or base64 are common and should still be
	// captured.
	MaxLineLength int
	// Logger receives a line at start and one per captured message (debug).
	// Default slog.Default().
	Logger *slog.Logger
}

const (
	defaultMaxConnections = 256
	defaultPreAuthTimeout = 30 * time.Second
	defaultAdmissionWait  = time.Minute
	defaultTimeout        = 60 * time.Second
	defaultMaxLineLength  = 1 << 20

	// maxRecipients is SPEC §6's limit per message.
	maxRecipients = 100

	// rejectTimeout bounds the time spent telling an excess client to go
	// away, so a stalled client cannot hold a goroutine for long.
	rejectTimeout = 5 * time.Second
	// hangUpTimeout bounds writing a last 421 to a client being closed.
	hangUpTimeout = time.Second
)

// Server serves SMTP on any number of listeners with one go-smtp server:
// limits, timeouts and the set of open connections are shared.
type Server struct {
	st       Store
	cfg      Config
	log      *slog.Logger
	smtp     *gosmtp.Server
	maxBytes int64 // advertised SIZE: the largest plan's limit

	// ctx ends when the server is closed, abandoning store operations
	// still waiting for a place in the write queue.
	ctx    context.Context
	cancel context.CancelFunc
	// admitCtx ends when shutdown begins: a message still waiting for
	// room in the budget is refused then rather than started.
	admitCtx    context.Context
	stopAdmit   context.CancelFunc
	budget      *admission.Budget
	closedReply string

	// buffers hold messages while they are parsed and stored. Nothing
	// refers to a message's bytes once InsertMessage has returned.
	buffers sync.Pool

	mu        sync.Mutex
	conns     map[*conn]struct{}
	preAuth   list.List // of *conn not authenticated yet, oldest first
	listeners map[net.Listener]struct{}
	closing   bool

	// outage logs the refusals of a database that cannot take messages
	// (or check a sign-in) once for as long as that lasts.
	outage *outage.Log

	// rejecting counts connections being turned away, so a flood of them
	// cannot pile up goroutines.
	rejecting atomic.Int64
}

// New returns a server that captures into st. It listens nowhere until Serve.
func New(st Store, cfg Config) *Server {
	if cfg.Hostname == "" {
		cfg.Hostname = "localhost"
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = defaultMaxConnections
	}
	if cfg.PreAuthTimeout <= 0 {
		cfg.PreAuthTimeout = defaultPreAuthTimeout
	}
	if cfg.AdmissionWait <= 0 {
		cfg.AdmissionWait = defaultAdmissionWait
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = defaultTimeout
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = defaultTimeout
	}
	if cfg.MaxLineLength <= 0 {
		cfg.MaxLineLength = defaultMaxLineLength
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{
		st:          st,
		cfg:         cfg,
		log:         cfg.Logger,
		maxBytes:    largestMessageLimit(),
		budget:      cfg.Budget,
		conns:       make(map[*conn]struct{}),
		listeners:   make(map[net.Listener]struct{}),
		closedReply: "421 4.3.2 " + cfg.Hostname + " shutting down, try again later",
		outage:      messageOutage(cfg.Logger),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.admitCtx, s.stopAdmit = context.WithCancel(s.ctx)
	s.buffers.New = func() any { return &buffer{b: make([]byte, 0, 8<<10)} }

	gs := gosmtp.NewServer(backend{s})
	gs.Domain = cfg.Hostname
	gs.TLSConfig = cfg.TLSConfig
	// go-smtp would answer AUTH before TLS with a non-standard 523; the
	// session enforces the rule itself so the client gets SPEC §6's 538.
	gs.AllowInsecureAuth = true
	// SIZE and the hard cap of DATA are the largest plan's; the session
	// enforces the authenticated project's own plan below that.
	gs.MaxMessageBytes = s.maxBytes
	// Recipients are counted by the session, whose reply names the limit
	// as SPEC §6 words it.
	gs.MaxRecipients = 0
	gs.MaxLineLength = cfg.MaxLineLength
	gs.ReadTimeout = cfg.ReadTimeout
	gs.WriteTimeout = cfg.WriteTimeout
	gs.EnableSMTPUTF8 = true
	gs.ErrorLog = &errorLog{log: s.log}
	s.smtp = gs
	return s
}

// largestMessageLimit is what EHLO advertises as SIZE: the limit of the
// authenticated inbox is not known until AUTH, which comes after EHLO.
func largestMessageLimit() int64 {
	var largest int64 = 50 << 20
	for _, name := range store.PlanNames() {
		if p, err := store.LookupPlan(name); err == nil && p.MessageBytes > largest {
			largest = p.MessageBytes
		}
	}
	return largest
}

// Serve accepts connections on l until Shutdown or Close, after which it
// returns nil. With implicitTLS every connection starts with a TLS
// handshake (SMTPS); otherwise clients upgrade with STARTTLS.
func (s *Server) Serve(l net.Listener, implicitTLS bool) error {
	if implicitTLS && s.cfg.TLSConfig == nil {
		l.Close()
		return fmt.Errorf("smtp: serve %s: implicit TLS needs a TLS configuration", l.Addr())
	}
	// Registered under the lock Shutdown takes, so that a listener is
	// either refused here or closed there, never left accepting.
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()

	mode := "starttls"
	if implicitTLS {
		mode = "implicit-tls"
	}
	ln := newListener(l, s, implicitTLS)
	defer ln.stop()
	s.log.Info("smtp listening", "addr", l.Addr().String(), "tls", mode,
		"insecure_auth", s.cfg.AllowInsecureAuth, "max_connections", s.cfg.MaxConnections)

	err := s.smtp.Serve(ln)
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if err == nil || closing {
		return nil
	}
	return fmt.Errorf("smtp: serve %s: %w", l.Addr(), err)
}

// Shutdown stops accepting connections, closes idle ones (each told
// "421 4.3.2" first), and lets those in the middle of a transaction finish
// it (each is told and closed once its message is answered). When ctx ends
// first, whatever is left is closed and ctx's error returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopAdmit()
	s.mu.Lock()
	s.closing = true
	for l := range s.listeners {
		l.Close()
	}
	var idle []*conn
	for c := range s.conns {
		if !c.inTx {
			idle = append(idle, c)
		}
	}
	s.mu.Unlock()
	hangUpAll(ctx, idle, s.closedReply)

	err := s.smtp.Shutdown(ctx)
	if err != nil && err == ctx.Err() {
		// go-smtp's Close does nothing once Shutdown has begun, so the
		// connections still open are closed here.
		s.cancel()
		s.closeConns()
		return err
	}
	if errors.Is(err, gosmtp.ErrServerClosed) || isClosedErr(err) {
		return nil
	}
	return err
}

// Close closes every listener and connection at once; a transaction in
// progress is lost unanswered, so its client will send it again.
func (s *Server) Close() error {
	s.stopAdmit()
	s.mu.Lock()
	s.closing = true
	for l := range s.listeners {
		l.Close()
	}
	s.mu.Unlock()
	err := s.smtp.Close()
	s.cancel()
	s.closeConns()
	if errors.Is(err, gosmtp.ErrServerClosed) || isClosedErr(err) {
		return nil
	}
	return err
}

// InTransaction is how many connections are in the middle of a
// transaction: those Shutdown lets finish.
func (s *Server) InTransaction() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		if c.inTx {
			n++
		}
	}
	return n
}

func (s *Server) closeConns() {
	s.mu.Lock()
	all := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		all = append(all, c)
	}
	s.mu.Unlock()
	hangUpAll(context.Background(), all, s.closedReply)
}

// hangUpAll tells each connection why it is closed, all at once: one
// client that does not read must not hold up the others. It waits until
// every one is closed or ctx ends; each hang-up is bounded on its own.
func hangUpAll(ctx context.Context, conns []*conn, reply string) {
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() { c.hangUp(reply) })
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func (s *Server) putBuffer(b *buffer) {
	if cap(b.b) > maxPooledBuffer {
		return
	}
	s.buffers.Put(b)
}

func isClosedErr(err error) bool { return errors.Is(err, net.ErrClosed) }

// admit registers a new connection, or says why it is turned away. At the
// limits it displaces the oldest connection that has not authenticated,
// and returns it for the caller to hang up on.
// A connection to an implicit-TLS listener starts in its handshake.
func (s *Server) admit(nc net.Conn, implicitTLS bool) (c, displaced *conn, reply string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, nil, s.closedReply
	}
	if len(s.conns) >= s.cfg.MaxConnections || s.preAuth.Len() >= max(s.cfg.MaxConnections/2, 1) {
		oldest := s.preAuth.Front()
		if oldest == nil {
			return nil, nil, fmt.Sprintf("421 4.7.0 %s too many connections (limit %d), try again later",
				s.cfg.Hostname, s.cfg.MaxConnections)
		}
		displaced = oldest.Value.(*conn)
		s.forget(displaced)
	}
	c = &conn{Conn: nc, srv: s, handshaking: implicitTLS}
	c.authBy.Store(time.Now().Add(s.cfg.PreAuthTimeout).UnixNano())
	c.authTimer = time.AfterFunc(s.cfg.PreAuthTimeout, c.authExpired)
	s.conns[c] = struct{}{}
	c.preAuth = s.preAuth.PushBack(c)
	return c, displaced, ""
}

// forget stops counting c against the limits. Called with s.mu held.
func (s *Server) forget(c *conn) {
	delete(s.conns, c)
	if c.preAuth != nil {
		s.preAuth.Remove(c.preAuth)
		c.preAuth = nil
	}
}

// authenticated moves c out of the unauthenticated half of the slots and
// lifts its authentication deadline.
func (s *Server) authenticated(c *conn) bool {
	if c == nil {
		return true
	}
	// Settled against authExpired: one of the two wins, never both.
	if !c.authSettled.CompareAndSwap(authPending, authDone) {
		return false
	}
	c.authBy.Store(0)
	c.authTimer.Stop()
	s.mu.Lock()
	if c.preAuth != nil {
		s.preAuth.Remove(c.preAuth)
		c.preAuth = nil
	}
	s.mu.Unlock()
	return true
}

// What came first of a connection's authentication and its deadline.
const (
	authPending int32 = iota
	authDone
	authTimedOut
)

// authExpired hangs up on a connection that did not authenticate in time,
// saying so: go-smtp's own answer when the read deadline passes would call
// it idle, and a client sending NOOPs was not.
func (c *conn) authExpired() {
	if !c.authSettled.CompareAndSwap(authPending, authTimedOut) {
		return // authenticated in time
	}
	c.hangUp(fmt.Sprintf("421 4.7.0 %s authentication required within %s of connecting, closing",
		c.srv.cfg.Hostname, c.srv.cfg.PreAuthTimeout))
}

// reject tells a client it is not served, in TLS when it expects TLS, then
// hangs up.
func (s *Server) reject(nc net.Conn, implicitTLS bool, reply string) {
	defer s.rejecting.Add(-1)
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(rejectTimeout))
	if implicitTLS {
		tc := tls.Server(nc, s.cfg.TLSConfig)
		if err := tc.Handshake(); err != nil {
			return
		}
		defer tc.Close()
		nc = tc
	}
	nc.Write([]byte(reply + "\r\n"))
	s.log.Debug("smtp connection refused", "remote", nc.RemoteAddr().String(), "reply", reply)
}

// beginTx marks a connection as being in a transaction, which Shutdown lets
// finish. It fails once Shutdown has begun.
func (s *Server) beginTx(c *conn) bool {
	if c == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	c.inTx = true
	return true
}

// endTx marks the end of a transaction; during Shutdown the connection is
// told and closed there, after its reply has been written.
func (s *Server) endTx(c *conn) {
	if c == nil {
		return
	}
	s.mu.Lock()
	wasInTx := c.inTx
	c.inTx = false
	closing := s.closing
	s.mu.Unlock()
	if closing && wasInTx {
		c.hangUp(s.closedReply)
	}
}

// listener admits connections up to the configured limit. With implicit
// TLS it also runs each connection's handshake, on its own, before go-smtp
// sees the connection: go-smtp would run it while counting the connection
// as busy, so one client that connects and never says hello (a port scan,
// a TCP health check) would hold Shutdown up until its deadline.
type listener struct {
	net.Listener
	srv         *Server
	implicitTLS bool

	// With implicit TLS: acceptTLS runs from the first Accept; ready
	// hands over connections whose handshake is done, errs what ended an
	// accept, and stopped ends both once go-smtp no longer accepts.
	start   sync.Once
	ready   chan net.Conn
	errs    chan error
	stopped chan struct{}
}

func newListener(l net.Listener, srv *Server, implicitTLS bool) *listener {
	return &listener{Listener: l, srv: srv, implicitTLS: implicitTLS,
		ready: make(chan net.Conn), errs: make(chan error), stopped: make(chan struct{})}
}

func (l *listener) Accept() (net.Conn, error) {
	if !l.implicitTLS {
		c, err := l.accept()
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	l.start.Do(func() { go l.acceptTLS() })
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.errs:
		return nil, err
	}
}

// stop ends acceptTLS and the handshakes still to be handed over, once
// go-smtp has stopped accepting.
func (l *listener) stop() { close(l.stopped) }

// acceptTLS admits connections and starts each one's handshake. Errors go
// to Accept one at a time, so go-smtp's back-off after a temporary one
// paces this loop too.
func (l *listener) acceptTLS() {
	for {
		c, err := l.accept()
		if err != nil {
			select {
			case l.errs <- err:
				continue
			case <-l.stopped:
				return
			}
		}
		go l.handshake(c)
	}
}

// handshake runs c's TLS handshake, within the read timeout (cut to the
// authentication deadline), and hands the connection to go-smtp. One that
// fails, or that Shutdown closes meanwhile, is closed: it never got a
// greeting, so nothing is owed to it.
func (l *listener) handshake(c *conn) {
	tc := tls.Server(c, l.srv.cfg.TLSConfig)
	c.SetDeadline(time.Now().Add(l.srv.cfg.ReadTimeout))
	if err := tc.Handshake(); err != nil {
		l.srv.log.Debug("smtp TLS handshake failed", "remote", c.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	c.setTLS(tc)
	select {
	case l.ready <- tc:
	case <-l.stopped:
		c.hangUp(l.srv.closedReply)
	}
}

// accept returns the next connection admitted; it turns away the others.
func (l *listener) accept() (*conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c, displaced, reply := l.srv.admit(nc, l.implicitTLS)
		if displaced != nil {
			go displaced.hangUp("421 4.7.0 " + l.srv.cfg.Hostname +
				" too many unauthenticated connections, authenticate sooner or try again later")
		}
		if c != nil {
			return c, nil
		}
		if l.srv.rejecting.Add(1) > int64(l.srv.cfg.MaxConnections) {
			l.srv.rejecting.Add(-1)
			nc.Close()
			continue
		}
		go l.srv.reject(nc, l.implicitTLS, reply)
	}
}

// conn is an admitted connection as accepted, under any TLS layer.
type conn struct {
	net.Conn
	srv *Server
	// authBy is the deadline (Unix nanoseconds) to authenticate by; 0
	// once authenticated. Every read and write deadline go-smtp sets is
	// cut to it, so commands (NOOPs included) never extend it.
	authBy atomic.Int64
	// authTimer hangs up at authBy (authExpired), unless authSettled says
	// the connection authenticated first.
	authTimer   *time.Timer
	authSettled atomic.Int32
	inTx        bool          // guarded by srv.mu
	preAuth     *list.Element // in srv.preAuth; guarded by srv.mu
	closeOnce   sync.Once
	// closeAfterReply hangs up once the next reply is written: a 421
	// says the server is closing the channel (RFC 5321 3.8), and
	// go-smtp would read the next command after it.
	closeAfterReply atomic.Bool

	// What a last reply must be written through: the plain connection
	// until STARTTLS, the TLS connection once its handshake is done, and
	// nothing in between (after STARTTLS, or on an implicit-TLS
	// connection before its handshake is done), when plain text would
	// corrupt the handshake.
	mu          sync.Mutex
	tls         *tls.Conn
	handshaking bool
}

// startTLSReply is how go-smtp answers STARTTLS, just before the handshake.
var startTLSReply = []byte("220 2.0.0 Ready to start TLS")

func (c *conn) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, startTLSReply) {
		c.mu.Lock()
		if c.tls == nil {
			c.handshaking = true
		}
		c.mu.Unlock()
	}
	n, err := c.Conn.Write(p)
	if c.closeAfterReply.Load() {
		// go-smtp writes a reply in one piece (a TLS record, once
		// encrypted).
		c.Close()
	}
	return n, err
}

// setTLS records the TLS connection over c once its handshake is done.
func (c *conn) setTLS(tc *tls.Conn) {
	c.mu.Lock()
	c.tls, c.handshaking = tc, false
	c.mu.Unlock()
}

// replyWriter is where a last reply can be written, or nil.
func (c *conn) replyWriter() io.Writer {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Not tls.Conn.ConnectionState: it waits for a handshake in
	// progress, which a client that sends nothing holds until its
	// deadline.
	switch {
	case c.handshaking:
		return nil
	case c.tls != nil:
		return c.tls
	}
	return c.Conn
}

// hangUp writes reply to the client, when it can be said in the layer the
// client is reading, and closes the connection. go-smtp may be writing a
// reply of its own at the same moment; both connections' writes are whole,
// so the client reads one, then the other.
func (c *conn) hangUp(reply string) {
	if w := c.replyWriter(); w != nil {
		c.Conn.SetWriteDeadline(time.Now().Add(hangUpTimeout))
		io.WriteString(w, reply+"\r\n")
	}
	c.Close()
}

func (c *conn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}

// SetReadDeadline and SetWriteDeadline leave a moment past the
// authentication deadline, for authExpired's 421 to the client that
// missed it.
func (c *conn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.beforeAuthDeadline(t, hangUpTimeout))
}

func (c *conn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.beforeAuthDeadline(t, hangUpTimeout))
}

// beforeAuthDeadline cuts a deadline to the authentication deadline (plus
// grace) while the connection has not authenticated.
func (c *conn) beforeAuthDeadline(t time.Time, grace time.Duration) time.Time {
	by := c.authBy.Load()
	if by == 0 {
		return t
	}
	if d := time.Unix(0, by).Add(grace); t.IsZero() || t.After(d) {
		return d
	}
	return t
}

// Close forgets the connection before closing it, so a client that sees
// the connection end can count on its slot being free.
func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		c.authTimer.Stop()
		c.srv.mu.Lock()
		c.srv.forget(c)
		c.srv.mu.Unlock()
	})
	return c.Conn.Close()
}

// errorLog routes go-smtp's internal log lines to slog. They are mostly
// clients failing the TLS handshake or dropping the connection: debug
// level, except for recovered panics, and for failures to accept a
// connection (out of file descriptors, most often), which lock every
// sender out: a warning, at most one per acceptLogEvery, as the HTTP
// listeners' are.
type errorLog struct {
	log          *slog.Logger
	lastAccept   atomic.Int64 // Unix nanoseconds of the last accept error logged
	acceptMissed atomic.Int64 // accept errors since, not logged
}

// acceptLogEvery spaces out the warnings of a listener failing to accept.
const acceptLogEvery = time.Second

func (e *errorLog) Printf(format string, v ...any) { e.print(fmt.Sprintf(format, v...)) }
func (e *errorLog) Println(v ...any)               { e.print(strings.TrimSuffix(fmt.Sprintln(v...), "\n")) }

func (e *errorLog) print(msg string) {
	level := slog.LevelDebug
	switch {
	case strings.Contains(msg, "panic"):
		level = slog.LevelError
	case strings.HasPrefix(msg, "accept error"):
		now, last := time.Now().UnixNano(), e.lastAccept.Load()
		if now-last < int64(acceptLogEvery) || !e.lastAccept.CompareAndSwap(last, now) {
			e.acceptMissed.Add(1)
			return
		}
		if missed := e.acceptMissed.Swap(0); missed > 0 {
			msg += fmt.Sprintf(" (and %d more since the last one logged)", missed)
		}
		level = slog.LevelWarn
	}
	e.log.Log(context.Background(), level, "smtp: "+msg)
}
