package cmd

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/capturedev/capture/forward"
	"github.com/capturedev/capture/forward/mcp"
	"github.com/capturedev/capture/server"
	"github.com/capturedev/capture/store"
)

const (
	defaultHTTPAddr    = "127.0.0.1:7780"
	defaultCaptureAddr = "127.0.0.1:7781"
	defaultEmailAPI    = "127.0.0.1:7782"
)

func newServeCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run SMTP capture, webhook capture, the provider email APIs and the read API in one process",
		Long: `serve runs every listener over one SQLite database in the data dir, or over a
PostgreSQL database (--database postgres://…) that any number of replicas share:

  --http           web interface at /, read API at /api/v1 (schema at /api/v1/schema/),
                   forward client download
  --capture        webhook capture URLs: http://HOST:PORT/whe_<id>[/any/path][?query]
  --smtp-starttls  SMTP with STARTTLS (AUTH only after TLS)
  --smtp-tls       SMTP over implicit TLS
  --email-api      SendGrid, Postmark, Mailgun, Amazon SES (v2 and v1) and Resend send routes

The first start on an empty data dir creates a project, an inbox, an endpoint
and an API key, and prints them once. Every start prints a one-time sign-in
link for the web interface. Privileged ports (587, 465) that need
root are skipped with a warning; 465 is then replaced by 2465.`,
		Example: `  capture serve
  capture serve --data-dir ./.capture --http 127.0.0.1:8025
  capture serve --database postgres://capture@db.internal/capture --http 0.0.0.0:7780`,
		Args: noArgs,
		RunE: runServe,
	}
	f := c.Flags()
	f.String("http", defaultHTTPAddr, "web interface and read API listen address")
	f.String("capture", defaultCaptureAddr, "webhook capture listen address")
	f.StringSlice("smtp-starttls", []string{"127.0.0.1:587", "127.0.0.1:2587"}, "SMTP STARTTLS listen addresses")
	f.StringSlice("smtp-tls", []string{"127.0.0.1:465"}, "SMTP implicit-TLS listen addresses")
	f.String("smtp-host", "localhost", "host name in the SMTP greeting and certificate")
	f.String("email-api", defaultEmailAPI, "provider email API listen address (SendGrid, Postmark, Mailgun, SES v2 and v1, Resend)")
	f.String("public-url", "", "base URL printed in capture URLs (behind a proxy or in Docker); default from --capture")
	f.String("tls-cert", "", "SMTP certificate (PEM) to use instead of the local CA's")
	f.String("tls-key", "", "private key (PEM) for --tls-cert")
	f.Bool("smtp-allow-insecure-auth", false, "allow SMTP AUTH without TLS")
	f.String("log-level", "info", "log level: debug, info, warn, error")
	return c
}

func runServe(c *cobra.Command, _ []string) error {
	f := c.Flags()
	httpAddr, _ := f.GetString("http")
	captureAddr, _ := f.GetString("capture")
	startTLS, _ := f.GetStringSlice("smtp-starttls")
	implicitTLS, _ := f.GetStringSlice("smtp-tls")
	smtpHost, _ := f.GetString("smtp-host")
	emailAPI, _ := f.GetString("email-api")
	publicURL, _ := f.GetString("public-url")
	certFile, _ := f.GetString("tls-cert")
	keyFile, _ := f.GetString("tls-key")
	insecure, _ := f.GetBool("smtp-allow-insecure-auth")
	levelName, _ := f.GetString("log-level")

	var level slog.Level
	if err := level.UnmarshalText([]byte(levelName)); err != nil {
		return usagef("--log-level %q: want debug, info, warn or error", levelName)
	}
	if (certFile == "") != (keyFile == "") {
		return usagef("--tls-cert and --tls-key go together")
	}
	// Everything a flag can get wrong is refused here, before serve binds
	// or writes anything: a failed start leaves a first start to come.
	if publicURL != "" {
		if err := checkPublicURL(publicURL); err != nil {
			return usageError{err}
		}
	}
	if err := checkSMTPHost(smtpHost); err != nil {
		return usagef("--smtp-host %q: %v", smtpHost, err)
	}
	listens := []struct {
		flag  string
		addrs []string
	}{
		{"--http", []string{httpAddr}}, {"--capture", []string{captureAddr}}, {"--email-api", []string{emailAPI}},
		{"--smtp-starttls", startTLS}, {"--smtp-tls", implicitTLS},
	}
	type given struct{ flag, addr string }
	var taken []given
	for _, l := range listens {
		for _, a := range l.addrs {
			if err := checkListenAddr(a); err != nil {
				return usagef("%s %q: %v", l.flag, a, err)
			}
			for _, first := range taken {
				if server.Overlap(first.addr, a) {
					return overlapError(first.flag, first.addr, l.flag, a)
				}
			}
			taken = append(taken, given{l.flag, a})
		}
	}
	// Memory stays small (tens of MiB) while ingest allocates quickly, so a
	// lazier collector buys throughput; an explicit GOGC still wins. 300
	// rather than 400: the live heap under ingest is about 8 MiB, and the
	// heap then peaks near 32 MiB instead of 40, which keeps the process
	// under 64 MiB of RSS under the benchmark loads for about 1 % more CPU.
	// The soft memory limit makes the collector work harder instead when
	// large captures fill the heap, to stay under SPEC §13's 256 MiB.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(300)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(server.MemoryLimit)
	}
	log := slog.New(slog.NewTextHandler(c.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
	dir, err := dataDir(c)
	if err != nil {
		return err
	}
	url, err := database(c)
	if err != nil {
		return err
	}
	if url == "" {
		if err := checkWritable(filepath.Join(dir, store.DBFile)); err != nil {
			return err
		}
	}
	version := versionString()
	stopNow := secondSignal()
	defer stopNow.stop()
	err = server.Serve(c.Context(), server.ServeConfig{
		Config: server.Config{
			HTTPAddr: httpAddr, CaptureAddr: captureAddr,
			SMTPStartTLSAddrs: startTLS, SMTPTLSAddrs: implicitTLS,
			SMTPHost: smtpHost, SMTPHostGiven: f.Changed("smtp-host"), PublicURL: publicURL, AllowInsecureAuth: insecure,
			EmailAPIAddr: emailAPI,
			Downloads:    map[string][]byte{forward.PythonClientName: forward.PythonClient},
			MCP: func(apiBase string, stopping <-chan struct{}) http.Handler {
				return mcp.HTTPHandler(apiBase, version, stopping)
			},
			Logger:  log,
			StopNow: stopNow.c,
		},
		DataDir:     dir,
		Database:    url,
		TLSCertFile: certFile, TLSKeyFile: keyFile,
		Banner: c.OutOrStdout(),
	})
	if errors.Is(err, server.ErrStoppedNow) {
		return exitError{code: exitInterrupted, err: err}
	}
	if stopped := (*store.UpgradeInterruptedError)(nil); errors.As(err, &stopped) {
		// Stopped by Ctrl-C or SIGTERM, as a stop cut short is.
		return exitError{code: exitInterrupted, err: stopped}
	}
	return explainPostgres(explainReadOnly(sqlitePath(c), err))
}

// signalWatch closes c at the second SIGINT or SIGTERM. The first ends
// the command's context (main), which starts serve's graceful stop; the
// second cuts that stop short.
type signalWatch struct {
	c    chan struct{}
	stop func()
}

func secondSignal() signalWatch {
	w := signalWatch{c: make(chan struct{})}
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for n := 1; ; n++ {
			select {
			case <-signals:
				if n == 2 {
					close(w.c)
					return
				}
			case <-done:
				return
			}
		}
	}()
	w.stop = func() {
		signal.Stop(signals)
		close(done)
	}
	return w
}

// checkListenAddr refuses, as a usage error, an address no listener can
// take: not HOST:PORT, or a port that is neither a number from 0 to 65535
// (0, or none, picks a free one) nor a service name.
func checkListenAddr(a string) error {
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return errors.New("want HOST:PORT")
	}
	if port == "" {
		return nil
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}

// overlapError is the usage error for two listen addresses that cannot
// both be bound, found before anything binds: the same address twice, or
// a wildcard (which takes its port on every address) and another address
// on that port.
func overlapError(firstFlag, first, flag, addr string) error {
	_, port, _ := net.SplitHostPort(addr)
	how := ""
	if !sameAddr(first, addr) {
		wildcard := first
		if h, _, _ := net.SplitHostPort(addr); server.IsWildcard(h) {
			wildcard = addr
		}
		how = fmt.Sprintf(" (%s takes port %s on every address)", wildcard, port)
	}
	if firstFlag == flag {
		if how == "" {
			return usagef("%s lists %s twice: one listener per address", flag, addr)
		}
		return usagef("%s lists %s and %s%s: one listener per address", flag, first, addr, how)
	}
	if how == "" {
		return usagef("%s %s is also given to %s: one listener per address", flag, addr, firstFlag)
	}
	return usagef("%s %s is also given to %s as %s%s: one listener per address", flag, addr, firstFlag, first, how)
}

// sameAddr reports whether two listen addresses are written differently
// only: an IP's spelling, a host's case.
func sameAddr(a, b string) bool {
	hostA, portA, _ := net.SplitHostPort(a)
	hostB, portB, _ := net.SplitHostPort(b)
	if ipA, ipB := net.ParseIP(hostA), net.ParseIP(hostB); ipA != nil && ipB != nil {
		return ipA.Equal(ipB) && portA == portB
	}
	return strings.EqualFold(hostA, hostB) && portA == portB
}

// checkSMTPHost refuses a --smtp-host that cannot be a certificate's name:
// an IP literal, or a DNS name of RFC 1123 labels (letters, digits and
// inner hyphens, 1–63 characters each, 253 in all). The local CA is
// constrained to it, so a name x509 refuses would fail serve only after it
// had created the database.
func checkSMTPHost(host string) error {
	if net.ParseIP(host) != nil {
		return nil
	}
	switch {
	case host == "":
		return errors.New("want a host name or an IP address")
	case len(host) > 253:
		return errors.New("a host name has at most 253 characters")
	}
	for _, label := range strings.Split(host, ".") {
		switch {
		case label == "":
			return errors.New("want a host name such as mail.test: an empty label")
		case len(label) > 63:
			return fmt.Errorf("label %q is longer than 63 characters", label)
		case label[0] == '-' || label[len(label)-1] == '-':
			return fmt.Errorf("label %q starts or ends with '-'", label)
		}
		for _, r := range label {
			if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-') {
				return fmt.Errorf("%q is not allowed in a host name (letters, digits, '-' and '.')", r)
			}
		}
	}
	return nil
}

// checkPublicURL refuses a --public-url that capture URLs cannot be built
// on: they are the URL followed by /whe_…, so a query, a fragment or
// user:password@ would end up in the middle of every one of them.
func checkPublicURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Opaque != "":
		return fmt.Errorf("--public-url %q: want an absolute http:// or https:// URL", raw)
	case u.User != nil:
		// Not the URL itself: it holds a password.
		return errors.New("--public-url: want no user:password@ in it; capture URLs carry no credentials")
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("--public-url %q: want an http:// or https:// URL", raw)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("--public-url %q: want a host, e.g. https://capture.example.test", raw)
	case u.RawQuery != "" || u.ForceQuery:
		return fmt.Errorf("--public-url %q: want no query (?…): capture URLs are this URL followed by /whe_…", raw)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return fmt.Errorf("--public-url %q: want no fragment (#…): capture URLs are this URL followed by /whe_…", raw)
	}
	// A URL holds these only percent-encoded: printed as they are, every
	// capture URL would be cut short or invalid where a client reads it.
	if i := strings.IndexFunc(raw, func(r rune) bool {
		return r <= ' ' || r == 0x7f || strings.ContainsRune("\"<>\\^`{|}", r)
	}); i >= 0 {
		return fmt.Errorf("--public-url %q: %q cannot stand in a URL as it is; percent-encode it (a space is %%20)", raw, raw[i])
	}
	return nil
}
