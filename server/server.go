// Package server runs capture's listeners together: the read API, webhook
// capture and SMTP, over one store.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/capturedev/capture/server/api"
	"github.com/capturedev/capture/server/capture"
	"github.com/capturedev/capture/server/smtp"
	"github.com/capturedev/capture/store"
)

// Config is what `capture serve` was asked for.
type Config struct {
	HTTPAddr          string
	CaptureAddr       string
	SMTPStartTLSAddrs []string
	SMTPTLSAddrs      []string
	SMTPHost          string
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
	Logger          *slog.Logger
	// MCP builds the handler of /mcp for the read API at apiBase; nil serves
	// no /mcp. It is given, not built here, because MCP is a client of the
	// read API and no server package is.
	MCP func(apiBase string) http.Handler
}

// Server holds the bound listeners until Run serves them.
type Server struct {
	cfg   Config
	store *store.Store
	log   *slog.Logger

	httpLn, captureLn net.Listener
	startTLSLns       []net.Listener
	tlsLns            []net.Listener
	warnings          []string
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
	if s.startTLSLns, err = s.listenSMTP("--smtp-starttls", cfg.SMTPStartTLSAddrs, ""); err != nil {
		return nil, err
	}
	if s.tlsLns, err = s.listenSMTP("--smtp-tls", cfg.SMTPTLSAddrs, "2465"); err != nil {
		return nil, err
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

// listenSMTP binds SMTP addresses. A privileged port that needs root is
// skipped with a warning and, when fallbackPort is set, replaced by that port
// on the same host.
func (s *Server) listenSMTP(flag string, addrs []string, fallbackPort string) ([]net.Listener, error) {
	var out []net.Listener
	for _, addr := range addrs {
		l, err := listen(flag, addr)
		if err == nil {
			out = append(out, l)
			continue
		}
		host, port, splitErr := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		if splitErr != nil || p == 0 || p >= 1024 || !errors.Is(err, syscall.EACCES) {
			closeAll(out)
			return nil, err
		}
		msg := fmt.Sprintf("%s %s needs root; skipped", flag, addr)
		if fallbackPort != "" {
			alt := net.JoinHostPort(host, fallbackPort)
			l, err := listen(flag, alt)
			if err != nil {
				closeAll(out)
				return nil, err
			}
			out = append(out, l)
			msg = fmt.Sprintf("%s %s needs root; using %s instead", flag, addr, alt)
		}
		s.warnings = append(s.warnings, msg)
	}
	return out, nil
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		l.Close()
	}
}

func (s *Server) closeListeners() {
	for _, l := range []net.Listener{s.httpLn, s.captureLn} {
		if l != nil {
			l.Close()
		}
	}
	closeAll(s.startTLSLns)
	closeAll(s.tlsLns)
}

// Warnings are the privileged ports that were skipped.
func (s *Server) Warnings() []string { return s.warnings }

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

// APIBase is the read API's base URL.
func (s *Server) APIBase() string { return "http://" + hostPort(s.httpLn.Addr()) + api.Prefix }

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

// Run serves until ctx ends, then shuts down gracefully: stops accepting,
// lets in-flight SMTP transactions and HTTP requests finish (bounded by
// ShutdownTimeout), and returns. The caller closes the store afterwards.
func (s *Server) Run(ctx context.Context) error {
	cfg := s.cfg
	// Long-polls end as soon as shutdown starts instead of holding it up.
	baseCtx, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()

	apiHandler := api.New(s.store, api.Config{
		SMTPHost:      cfg.SMTPHost,
		StartTLSPorts: ports(s.StartTLSAddrs()),
		TLSPorts:      ports(s.TLSAddrs()),
		CaptureBase:   s.CaptureBase(),
		Logger:        s.log,
	})
	mux := http.NewServeMux()
	mux.Handle(api.Prefix+"/", apiHandler)
	if cfg.MCP != nil {
		mux.Handle("/mcp", cfg.MCP(s.APIBase()))
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
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "capture is running.\n\nRead API: %s (Authorization: Bearer <key>)\nOpenAPI:  %s/schema/\n",
			s.APIBase(), s.APIBase())
	})
	httpSrv := &http.Server{
		Handler:           envelopeRoutes(mux),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}

	captureSrv := capture.NewServer(capture.New(s.store, capture.Config{Logger: s.log}))
	captureSrv.BaseContext = func(net.Listener) context.Context { return baseCtx }

	smtpSrv := smtp.New(s.store, smtp.Config{
		Hostname:          cfg.SMTPHost,
		TLSConfig:         cfg.TLSConfig,
		AllowInsecureAuth: cfg.AllowInsecureAuth,
		Logger:            s.log,
	})

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return serveHTTP(httpSrv, s.httpLn) })
	g.Go(func() error { return serveHTTP(captureSrv, s.captureLn) })
	for _, l := range s.startTLSLns {
		g.Go(func() error { return smtpSrv.Serve(l, false) })
	}
	for _, l := range s.tlsLns {
		g.Go(func() error { return smtpSrv.Serve(l, true) })
	}
	g.Go(func() error {
		s.prune(gctx)
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		cancelBase()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		return errors.Join(
			httpSrv.Shutdown(shutdownCtx),
			captureSrv.Shutdown(shutdownCtx),
			smtpSrv.Shutdown(shutdownCtx),
		)
	})
	err := g.Wait()
	if errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("shutdown timed out; in-flight work was cut off", "timeout", cfg.ShutdownTimeout)
		err = nil
	}
	return err
}

func serveHTTP(srv *http.Server, l net.Listener) error {
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", l.Addr(), err)
	}
	return nil
}

// prune enforces retention and the per-collection caps in the background;
// each delete is a small transaction of its own so ingest never waits long.
func (s *Server) prune(ctx context.Context) {
	t := time.NewTicker(s.cfg.PruneInterval)
	defer t.Stop()
	for {
		n, err := s.store.Prune(ctx, time.Now())
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Error("prune failed", "err", err)
		case n > 0:
			s.log.Info("pruned captures", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
