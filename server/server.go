// Package server runs capture's listeners together: the read API, webhook
// capture, SMTP and the provider email APIs, over one store.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/capturedev/capture/server/admission"
	"github.com/capturedev/capture/server/api"
	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/server/capture"
	"github.com/capturedev/capture/server/emailapi"
	"github.com/capturedev/capture/server/smtp"
	"github.com/capturedev/capture/server/web"
	"github.com/capturedev/capture/store"
)

// Config is what `capture serve` was asked for.
type Config struct {
	HTTPAddr          string
	CaptureAddr       string
	SMTPStartTLSAddrs []string
	SMTPTLSAddrs      []string
	SMTPHost          string
	// SMTPHostGiven says the user chose SMTPHost. When they did not, and
	// every SMTP listener is bound to one address that is neither loopback
	// nor a wildcard, that address is the host announced instead: the
	// default name would not reach it.
	SMTPHostGiven bool
	// EmailAPIAddr is where the provider email APIs listen; "" means
	// nowhere.
	EmailAPIAddr string
	// PublicURL is the base printed in capture URLs; "" means the capture
	// listener's own address.
	PublicURL         string
	TLSConfig         *tls.Config
	AllowInsecureAuth bool
	// Downloads are files served at /downloads/NAME on the HTTP listener.
	Downloads     map[string][]byte
	PruneInterval time.Duration
	// ShutdownTimeout bounds how long in-flight work may take to finish.
	ShutdownTimeout time.Duration
	// StopNow, closed during a graceful stop, cuts it short: what is
	// still in flight is abandoned unacknowledged and Run returns
	// ErrStoppedNow. Nil means the stop always runs its course.
	StopNow <-chan struct{}
	Logger  *slog.Logger
	// MCP builds the handler of /mcp for the read API at apiBase; nil serves
	// no /mcp. It is given, not built here, because MCP is a client of the
	// read API and no server package is. stopping is closed when a graceful
	// stop begins: the tools that wait end then, answering that the server
	// is stopping, while every other call is finished like any request.
	MCP func(apiBase string, stopping <-chan struct{}) http.Handler
}

// ErrStoppedNow is what Run returns when StopNow cut its graceful stop
// short.
var ErrStoppedNow = errors.New("stopped before in-flight work finished; what was cut off was not acknowledged")

// Server holds the bound listeners until Run serves them.
type Server struct {
	cfg   Config
	store *store.Store
	log   *slog.Logger

	httpLn, captureLn net.Listener
	startTLSLns       []net.Listener
	tlsLns            []net.Listener
	emailLn           net.Listener // nil without EmailAPIAddr
	warnings          []string
	hostWarning       string
}

// Listen binds every listener first, so that a port in use is reported at
// once and by address, before anything is served.
func Listen(st *store.Store, cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.PruneInterval == 0 {
		cfg.PruneInterval = time.Minute
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	s := &Server{cfg: cfg, store: st, log: cfg.Logger}
	ok := false
	defer func() {
		if !ok {
			s.closeListeners()
		}
	}()
	var err error
	if s.httpLn, err = listen("--http", cfg.HTTPAddr); err != nil {
		return nil, err
	}
	if s.captureLn, err = listen("--capture", cfg.CaptureAddr); err != nil {
		return nil, err
	}
	if s.startTLSLns, err = s.listenSMTP("--smtp-starttls", cfg.SMTPStartTLSAddrs, 587, ""); err != nil {
		return nil, err
	}
	if s.tlsLns, err = s.listenSMTP("--smtp-tls", cfg.SMTPTLSAddrs, 465, "2465"); err != nil {
		return nil, err
	}
	if !cfg.SMTPHostGiven {
		s.cfg.SMTPHost, s.hostWarning = smtpHostFor(cfg.SMTPHost, append(s.StartTLSAddrs(), s.TLSAddrs()...))
	}
	if cfg.EmailAPIAddr != "" {
		if s.emailLn, err = listen("--email-api", cfg.EmailAPIAddr); err != nil {
			return nil, err
		}
	}
	ok = true
	return s, nil
}

func listen(flag, addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, addr, unwrapOpError(err))
	}
	return l, nil
}

// unwrapOpError drops net.OpError's own restatement of the address, which
// the caller already names.
func unwrapOpError(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

// listenSMTP binds SMTP addresses. The flag's privileged port (587 for
// STARTTLS, 465 for implicit TLS), when it needs root, is skipped with a
// warning and, when fallbackPort is set, replaced by that port on the same
// host (SPEC §3). Any other failure, a refusal of another port below 1024
// included, stops serve: the user asked for that port and gets it or an
// error.
func (s *Server) listenSMTP(flag string, addrs []string, privileged int, fallbackPort string) ([]net.Listener, error) {
	var out []net.Listener
	fail := func(err error) ([]net.Listener, error) {
		closeAll(out)
		return nil, err
	}
	for _, addr := range addrs {
		l, err := listen(flag, addr)
		if err == nil {
			out = append(out, l)
			continue
		}
		host, port, _ := net.SplitHostPort(addr)
		if p, _ := net.LookupPort("tcp", port); p != privileged || !errors.Is(err, syscall.EACCES) {
			return fail(err)
		}
		if fallbackPort == "" {
			s.warnings = append(s.warnings, fmt.Sprintf("%s %s needs root; skipped", flag, addr))
			continue
		}
		alt := net.JoinHostPort(host, fallbackPort)
		// The user may list the fallback port already: it is served,
		// and binding it twice would fail.
		if given := slices.IndexFunc(addrs, func(a string) bool { return Overlap(a, alt) }); given >= 0 {
			s.warnings = append(s.warnings, fmt.Sprintf("%s %s needs root; skipped (%s is served already)", flag, addr, addrs[given]))
			continue
		}
		if l, err = net.Listen("tcp", alt); err != nil {
			// Named as what it replaces: the user never gave alt.
			return fail(fmt.Errorf("%s %s, used in place of %s (which needs root): %w", flag, alt, addr, unwrapOpError(err)))
		}
		out = append(out, l)
		s.warnings = append(s.warnings, fmt.Sprintf("%s %s needs root; using %s instead", flag, addr, alt))
	}
	return out, nil
}

// Overlap reports whether two listen addresses cannot both be bound: the
// same port on the same host, or on any host when either is a wildcard
// (none, 0.0.0.0 or ::). Go binds a wildcard as one dual-stack socket, so
// even 0.0.0.0 takes the port on ::1 too. A port the system picks (0 or
// none) overlaps nothing.
func Overlap(a, b string) bool {
	hostA, portA, errA := net.SplitHostPort(a)
	hostB, portB, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return false
	}
	pa, errA := net.LookupPort("tcp", portA)
	pb, errB := net.LookupPort("tcp", portB)
	if errA != nil || errB != nil || pa == 0 || pa != pb {
		return false
	}
	if IsWildcard(hostA) || IsWildcard(hostB) {
		return true
	}
	return canonicalHost(hostA) == canonicalHost(hostB)
}

// IsWildcard reports whether a listen address's host is every address.
func IsWildcard(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || ip != nil && ip.IsUnspecified()
}

func canonicalHost(host string) string {
	if ip := net.ParseIP(host); ip != nil {
		return ip.String()
	}
	return strings.ToLower(host)
}

// smtpHostFor is the SMTP host to announce when the user gave none: the
// one address every SMTP listener is bound to, when that is neither
// loopback nor a wildcard, since the default name would not reach it.
// SMTP bound to several such addresses keeps the default, with a warning
// that says how to name one that reaches them.
func smtpHostFor(def string, bound []net.Addr) (host, warning string) {
	unreached := specificIPs(bound)
	if len(unreached) == 0 {
		return def, ""
	}
	if len(unreached) == len(bound) && !slices.ContainsFunc(unreached, func(ip *net.TCPAddr) bool { return !ip.IP.Equal(unreached[0].IP) }) {
		return unreached[0].IP.String(), ""
	}
	names := make([]string, len(unreached))
	for i, t := range unreached {
		names[i] = t.String()
	}
	return def, fmt.Sprintf("SMTP listens on %s, which %s does not reach, and clients are told %s: "+
		"pass --smtp-host with a name that reaches every SMTP listener", strings.Join(names, ", "), def, def)
}

// specificIPs are the addresses of bound that are neither loopback nor a
// wildcard: ones a default name such as localhost does not reach.
func specificIPs(bound []net.Addr) []*net.TCPAddr {
	var out []*net.TCPAddr
	for _, a := range bound {
		if t, ok := a.(*net.TCPAddr); ok && !t.IP.IsLoopback() && !t.IP.IsUnspecified() {
			out = append(out, t)
		}
	}
	return out
}

// specificSMTPIPs are the specific addresses SMTP is bound to: the SMTP
// certificate must cover them, as the addresses clients dial.
func (s *Server) specificSMTPIPs() []string {
	var out []string
	for _, t := range specificIPs(append(s.StartTLSAddrs(), s.TLSAddrs()...)) {
		out = append(out, t.IP.String())
	}
	return out
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		l.Close()
	}
}

func (s *Server) closeListeners() {
	for _, l := range []net.Listener{s.httpLn, s.captureLn, s.emailLn} {
		if l != nil {
			l.Close()
		}
	}
	closeAll(s.startTLSLns)
	closeAll(s.tlsLns)
}

// Warnings are the privileged ports that were skipped.
func (s *Server) Warnings() []string { return s.warnings }

// HostWarning says, when it is not "", that SMTP listens where the SMTP
// host announced does not reach.
func (s *Server) HostWarning() string { return s.hostWarning }

// SMTPHost is the host announced for SMTP: the one given, or the one
// address every SMTP listener is bound to (Config.SMTPHostGiven).
func (s *Server) SMTPHost() string { return s.cfg.SMTPHost }

// HTTPAddr is the bound read API address.
func (s *Server) HTTPAddr() net.Addr { return s.httpLn.Addr() }

// CaptureAddr is the bound webhook capture address.
func (s *Server) CaptureAddr() net.Addr { return s.captureLn.Addr() }

// StartTLSAddrs and TLSAddrs are the bound SMTP addresses.
func (s *Server) StartTLSAddrs() []net.Addr { return addrsOf(s.startTLSLns) }
func (s *Server) TLSAddrs() []net.Addr      { return addrsOf(s.tlsLns) }

func addrsOf(ls []net.Listener) []net.Addr {
	out := make([]net.Addr, len(ls))
	for i, l := range ls {
		out[i] = l.Addr()
	}
	return out
}

func ports(addrs []net.Addr) []int {
	out := []int{}
	for _, a := range addrs {
		if t, ok := a.(*net.TCPAddr); ok {
			out = append(out, t.Port)
		}
	}
	return out
}

// EmailAPIBase is the base URL to give a provider SDK, or "" when the
// email APIs listen nowhere.
func (s *Server) EmailAPIBase() string {
	if s.emailLn == nil {
		return ""
	}
	return "http://" + hostPort(s.emailLn.Addr())
}

// HTTPBase is the HTTP listener's base URL: the web interface's.
func (s *Server) HTTPBase() string { return "http://" + hostPort(s.httpLn.Addr()) }

// APIBase is the read API's base URL.
func (s *Server) APIBase() string { return s.HTTPBase() + api.Prefix }

// CaptureBase is the base of capture URLs, without a trailing slash.
func (s *Server) CaptureBase() string {
	if s.cfg.PublicURL != "" {
		return trimSlash(s.cfg.PublicURL)
	}
	return "http://" + hostPort(s.captureLn.Addr())
}

func trimSlash(s string) string {
	for len(s) > 0 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}

// hostPort prints a listener address as clients should dial it: a wildcard
// host becomes loopback.
func hostPort(a net.Addr) string {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	host := t.IP.String()
	if t.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(t.Port))
}

// Limits on what clients may hold (SPEC §13). Every figure bounds memory
// or file descriptors that a slow, stalled or hostile client could
// otherwise take from everyone else.
const (
	// ingestBudget is the bytes of webhook bodies and SMTP messages (with
	// what parsing them takes) held at once; beyond it ingest waits for
	// room, then is refused (503, SMTP 451). With the rest of the process
	// it keeps peak RSS under 256 MiB.
	ingestBudget = 64 << 20

	// maxConnsPerHTTPListener caps each HTTP listener's connections; a
	// low file limit lowers it (httpConnCap).
	maxConnsPerHTTPListener = 4096
	// maxSMTPConns caps SMTP's connections across its listeners; a low
	// file limit lowers it (smtpConnCap).
	maxSMTPConns = 256

	// The read API's timeouts. Requests that legitimately take longer (a
	// list call that waits, a replay, an event stream) get their own
	// deadlines from longRequests.
	apiReadHeaderTimeout = 10 * time.Second
	apiReadTimeout       = 30 * time.Second
	apiWriteTimeout      = 30 * time.Second
	apiIdleTimeout       = 60 * time.Second
	// replayAllowance covers a replay's wait for its target (10 s) and
	// recording the delivery.
	replayAllowance = 20 * time.Second
)

// MemoryLimit is the soft limit (debug.SetMemoryLimit) for the Go heap of
// a serving process: SQLite's own memory and the binary come on top.
const MemoryLimit = 96 << 20

// httpConnCap is the connection cap per HTTP listener (the read API and
// web, capture, the email API): a quarter of the process's file
// descriptors each, at least 64. They are rarely all full at once; under
// a very low limit together they can ask for more than there is.
func httpConnCap() int {
	limit := openFileLimit()
	if limit == 0 {
		return maxConnsPerHTTPListener
	}
	return int(min(max(limit/4, 64), maxConnsPerHTTPListener))
}

// smtpConnCap is SMTP's connection cap across its listeners. Its slots,
// with as many again being told 421 at any moment, take at most a quarter
// of the process's file descriptors: idle sessions that have not signed
// in (half the slots) can then never take the descriptors a webhook or a
// sender needs.
func smtpConnCap() int {
	return smtpConnCapFor(openFileLimit())
}

func smtpConnCapFor(limit uint64) int {
	if limit == 0 {
		return maxSMTPConns
	}
	return int(min(max(limit/8, 8), maxSMTPConns))
}

// fileLimitWarning says, when the open-file limit lowers SMTP's cap (a
// limit under 2048), what it caps and how to raise it; "" otherwise. The
// HTTP caps are lowered from a limit of 16384 down without a word: they
// are still thousands of connections where SMTP's is not lowered.
func fileLimitWarning() string {
	limit := openFileLimit()
	smtpCap := smtpConnCapFor(limit)
	if limit == 0 || smtpCap >= maxSMTPConns {
		return ""
	}
	return fmt.Sprintf("the open-file limit is %d: SMTP takes at most %d connections (%d before signing in) and each HTTP listener %d; "+
		"raise it to %d or more (ulimit -n, LimitNOFILE= under systemd, --ulimit nofile= in Docker)",
		limit, smtpCap, max(smtpCap/2, 1), httpConnCap(), 8*maxSMTPConns)
}

// Run serves until ctx ends, then shuts down gracefully: stops accepting,
// lets in-flight SMTP transactions and HTTP requests finish (bounded by
// ShutdownTimeout, or until StopNow), and returns. Waits and event streams
// end at once, answered 503. The caller closes the store afterwards.
func (s *Server) Run(ctx context.Context) error {
	cfg := s.cfg
	// Requests keep their context through a graceful stop, so that what
	// is in flight is finished and committed; it ends only when the stop
	// is cut short, abandoning what is left.
	baseCtx, abandon := context.WithCancel(context.WithoutCancel(ctx))
	defer abandon()
	// stopping ends when the stop begins: waits and event streams end
	// then (SPEC §13: a wait gets 503) instead of holding it up.
	stopping, stopWaits := context.WithCancel(context.Background())
	defer stopWaits()
	budget := admission.New(ingestBudget)
	connCap := httpConnCap()
	ops := newOps(s.store, s.log)
	// The limit sees the connections the servers see (ConnState), so it
	// wraps the counting listener, not the other way round.
	count := ops.metrics.Listener
	httpLn := newConnLimit(count("http", s.httpLn), connCap)
	captureLn := newConnLimit(count("capture", s.captureLn), connCap)
	var emailLn *connLimit
	if s.emailLn != nil {
		emailLn = newConnLimit(count("email_api", s.emailLn), connCap)
	}
	apiHandler := api.New(s.store, api.Config{
		SMTPHost:      cfg.SMTPHost,
		StartTLSPorts: ports(s.StartTLSAddrs()),
		TLSPorts:      ports(s.TLSAddrs()),
		CaptureBase:   s.CaptureBase(),
		Logger:        s.log,
		Refused:       ops.metrics.Refused,
	})
	ops.metrics.CollectWaits(apiHandler.WaitsByProject)
	s.store.SetObserver(ops.metrics)
	defer s.store.SetObserver(nil)
	mux := http.NewServeMux()
	mux.Handle(api.Prefix+"/", apiHandler)
	ops.register(mux)
	if cfg.MCP != nil {
		mux.Handle("/mcp", cfg.MCP(s.APIBase(), stopping.Done()))
	}
	for name, body := range cfg.Downloads {
		contentType := "application/octet-stream"
		if strings.HasSuffix(name, ".py") {
			contentType = "text/x-python; charset=utf-8"
		}
		mux.HandleFunc("GET /downloads/"+name, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", contentType)
			w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
			w.Write(body)
		})
	}
	webHandler := web.New(s.store, web.Config{
		SMTPHost:      cfg.SMTPHost,
		StartTLSPorts: ports(s.StartTLSAddrs()),
		TLSPorts:      ports(s.TLSAddrs()),
		CaptureBase:   s.CaptureBase(),
		Logger:        s.log,
	})
	httpSrv := &http.Server{
		Handler:           longRequests(envelopeRoutes(mux, webHandler), stopping),
		ReadHeaderTimeout: apiReadHeaderTimeout,
		ReadTimeout:       apiReadTimeout,
		WriteTimeout:      apiWriteTimeout,
		IdleTimeout:       apiIdleTimeout,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ConnState:         httpLn.track,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}

	captureSrv := capture.NewServer(capture.New(s.store, capture.Config{Logger: s.log, Budget: budget,
		Refused: ops.metrics.WebhookRefused, Stopping: stopping.Done()}))
	captureSrv.BaseContext = func(net.Listener) context.Context { return baseCtx }
	captureSrv.ConnState = captureLn.track

	smtpSrv := smtp.New(s.store, smtp.Config{
		Hostname:          cfg.SMTPHost,
		TLSConfig:         cfg.TLSConfig,
		AllowInsecureAuth: cfg.AllowInsecureAuth,
		Budget:            budget,
		Logger:            s.log,
		Refused:           ops.metrics.EmailRefused,
		MaxConnections:    smtpConnCap(),
	})

	var emailSrv *http.Server
	if s.emailLn != nil {
		emailSrv = emailapi.NewServer(emailapi.New(s.store, emailapi.Config{Logger: s.log, Budget: budget,
			Refused: ops.metrics.EmailRefused}))
		emailSrv.BaseContext = func(net.Listener) context.Context { return baseCtx }
		emailSrv.ConnState = emailLn.track
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return serveHTTP(httpSrv, httpLn) })
	g.Go(func() error { return serveHTTP(captureSrv, captureLn) })
	if emailSrv != nil {
		g.Go(func() error { return serveHTTP(emailSrv, emailLn) })
	}
	for _, l := range s.startTLSLns {
		g.Go(func() error { return smtpSrv.Serve(count("smtp_starttls", l), false) })
	}
	for _, l := range s.tlsLns {
		g.Go(func() error { return smtpSrv.Serve(count("smtp_tls", l), true) })
	}
	g.Go(func() error {
		s.prune(gctx)
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		inFlight := smtpSrv.InTransaction() + httpLn.busy() + captureLn.busy()
		if emailLn != nil {
			inFlight += emailLn.busy()
		}
		s.log.Info(stoppingMessage(inFlight, cfg.ShutdownTimeout, cfg.StopNow != nil))
		stopWaits()
		shutdownCtx, stopNow := shutdownContext(cfg.ShutdownTimeout, cfg.StopNow)
		defer stopNow(nil)
		type httpListener struct {
			http  *http.Server
			limit *connLimit
		}
		servers := []httpListener{{httpSrv, httpLn}, {captureSrv, captureLn}}
		if emailSrv != nil {
			servers = append(servers, httpListener{emailSrv, emailLn})
		}
		// All at once: each waits for its own in-flight work only.
		var wg sync.WaitGroup
		errs := make([]error, len(servers)+1)
		for i, srv := range servers {
			wg.Go(func() { errs[i] = shutdownHTTP(shutdownCtx, srv.http, srv.limit) })
		}
		// Closes what is left of SMTP itself when shutdownCtx ends.
		wg.Go(func() { errs[len(servers)] = smtpSrv.Shutdown(shutdownCtx) })
		wg.Wait()
		if shutdownCtx.Err() == nil {
			return errors.Join(errs...)
		}
		// Cut short: what is left is abandoned, and its connections
		// closed, so that nothing still running can acknowledge anything
		// after the caller closes the store.
		abandon()
		for _, srv := range servers {
			srv.http.Close()
		}
		return context.Cause(shutdownCtx)
	})
	err := g.Wait()
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		s.log.Warn("shutdown timed out; in-flight work was cut off", "timeout", cfg.ShutdownTimeout)
		err = nil
	case errors.Is(err, ErrStoppedNow):
		s.log.Warn("stopped at once; in-flight work was cut off")
	}
	return err
}

// shutdownContext bounds a graceful stop by timeout, and ends it with
// ErrStoppedNow as its cause once stopNow is closed.
func shutdownContext(timeout time.Duration, stopNow <-chan struct{}) (context.Context, context.CancelCauseFunc) {
	timed, cancelTimer := context.WithTimeout(context.Background(), timeout)
	ctx, cancel := context.WithCancelCause(timed)
	go func() {
		select {
		case <-stopNow: // never, when nil
			cancel(ErrStoppedNow)
		case <-ctx.Done():
		}
		cancelTimer()
	}()
	return ctx, cancel
}

// stoppingMessage is the line logged when a graceful stop begins, so that
// a person who pressed Ctrl-C sees why the process has not exited yet.
func stoppingMessage(inFlight int, timeout time.Duration, canStopNow bool) string {
	if inFlight == 0 {
		return "shutting down: nothing in flight"
	}
	noun := "connections"
	if inFlight == 1 {
		noun = "connection"
	}
	msg := fmt.Sprintf("shutting down: finishing %d in-flight %s (up to %s)", inFlight, noun, timeout)
	if canStopNow {
		msg += "; press Ctrl-C again to stop now"
	}
	return msg
}

// shutdownHTTP stops srv gracefully. Connections that never sent a request
// are closed at once: Shutdown alone would wait until they are 5 s old.
func shutdownHTTP(ctx context.Context, srv *http.Server, l *connLimit) error {
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(ctx) }()
	l.closeWaiting()
	return <-done
}

// longRequests gives the requests that rightly outlast the read API's
// timeouts deadlines of their own: a list call that waits for captures
// (wait=N), a replay (it waits for its target), MCP calls (a tool may
// wait too) and event streams, which last until the client leaves. The
// read deadline moves too: past it net/http would end the request.
//
// The ones that wait for something to happen end when stopping does, so
// that a graceful stop finishes the other requests in flight without
// waiting on them. An MCP call is not ended so: its request must live on
// to carry the tool's answer (the SDK writes nothing for a call whose
// request ended), and the MCP server ends the waiting tools itself.
func longRequests(next http.Handler, stopping context.Context) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d, ok := longRequestTime(r); ok {
			rc := http.NewResponseController(w)
			var deadline time.Time // none, for a stream
			if d > 0 {
				deadline = time.Now().Add(d + apiWriteTimeout)
			}
			rc.SetReadDeadline(deadline)
			rc.SetWriteDeadline(deadline)
		}
		if waitsForEvents(r) {
			ctx, cancel := context.WithCancelCause(r.Context())
			defer cancel(nil)
			defer context.AfterFunc(stopping, func() { cancel(api.ErrStopping) })()
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}

// waitsForEvents reports whether r is held open until something happens:
// a wait, or an event stream (the web interface's live lists, asked for
// with or without their Accept header, and an MCP session's GET stream).
// A replay is not: it is finished like any other request. Nor is a purge,
// which commits a chunk at a time: cut off between two, it would have
// deleted part of the collection and could only answer that nothing was
// done. Nor is an MCP call: a tool that waits is ended by the MCP server
// when the stop begins, with an answer; any other finishes like any
// request (Config.MCP).
func waitsForEvents(r *http.Request) bool {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/events") {
		return true
	}
	if r.URL.Path == "/mcp" {
		return r.Method == http.MethodGet
	}
	_, long := longRequestTime(r)
	return long && !isReplay(r) && !isPurge(r)
}

func isReplay(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/replay")
}

// longRequestTime is how long r may legitimately take beyond the usual
// timeouts; 0 with ok means no deadline at all.
func longRequestTime(r *http.Request) (time.Duration, bool) {
	switch {
	case isReplay(r):
		return replayAllowance, true
	case isPurge(r):
		return purgeAllowance, true
	case r.URL.Path == "/mcp" && r.Method != http.MethodGet:
		// A call's answer may come as a short event stream.
		return contract.MaxWait, true
	case strings.Contains(r.Header.Get("Accept"), "text/event-stream"):
		return 0, true
	}
	if v := r.URL.Query().Get("wait"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return min(time.Duration(n)*time.Second, contract.MaxWait), true
		}
	}
	return 0, false
}

// purgeAllowance is how long a purge may take: a collection at the
// largest plan's cap (a million captures) took over 30 s in one
// transaction, and is now deleted in chunks that leave room for ingest.
const purgeAllowance = 10 * time.Minute

// isPurge reports whether r deletes every capture of an inbox or an
// endpoint, through the read API or the web interface.
func isPurge(r *http.Request) bool {
	p := r.URL.Path
	switch r.Method {
	case http.MethodDelete:
		return strings.HasPrefix(p, "/api/v1/") &&
			((strings.HasPrefix(p, "/api/v1/inboxes/") && strings.HasSuffix(p, "/messages")) ||
				(strings.HasPrefix(p, "/api/v1/endpoints/") && strings.HasSuffix(p, "/requests")))
	case http.MethodPost:
		return strings.HasPrefix(p, "/projects/") && strings.HasSuffix(p, "/purge")
	}
	return false
}

func serveHTTP(srv *http.Server, l net.Listener) error {
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", l.Addr(), err)
	}
	return nil
}

// pruneAfter is how many captures this process commits, at most, between
// two prunes: a collection at its cap under steady ingest goes past it by
// about that many (and a second's worth), not by PruneInterval's worth,
// which at a few thousand captures a second is several times a free
// plan's 10,000.
const pruneAfter = 1000

// prune enforces retention and the per-collection caps in the background,
// every PruneInterval and whenever pruneAfter captures have come since the
// last time; each delete is a small transaction of its own so ingest never
// waits long. After a failure it waits for the interval again, so that a
// database that keeps failing is not asked (and logged) once a second.
func (s *Server) prune(ctx context.Context) {
	t := time.NewTicker(min(time.Second, s.cfg.PruneInterval))
	defer t.Stop()
	var last, logged time.Time
	var lastCaptured uint64
	failed := false
	var pruned int64 // since the last line logged: one line a PruneInterval at most
	logPruned := func() {
		if pruned > 0 {
			s.log.Info("pruned captures", "count", pruned)
			pruned, logged = 0, time.Now()
		}
	}
	for {
		captured := s.store.Captured()
		if time.Since(last) >= s.cfg.PruneInterval || !failed && captured-lastCaptured >= pruneAfter {
			last, lastCaptured = time.Now(), captured
			n, err := s.store.Prune(ctx, last)
			pruned += n
			failed = err != nil
			if failed && ctx.Err() == nil {
				s.log.Error("prune failed", "err", err)
			}
		}
		if time.Since(logged) >= s.cfg.PruneInterval {
			logPruned()
		}
		select {
		case <-ctx.Done():
			logPruned()
			return
		case <-t.C:
		}
	}
}
