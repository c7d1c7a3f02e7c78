package cmd

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/capturedev/capture/forward"
	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/server"
	"github.com/capturedev/capture/server/api"
	"github.com/capturedev/capture/server/certs"
	"github.com/capturedev/capture/store"
)

const (
	defaultHTTPAddr    = "127.0.0.1:7780"
	defaultCaptureAddr = "127.0.0.1:7781"
)

func newServeCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run SMTP capture, webhook capture and the read API in one process",
		Long: `serve runs every listener over one SQLite database in the data dir:

  --http           read API at /api/v1 (schema at /api/v1/schema/), forward client download
  --capture        webhook capture URLs: http://HOST:PORT/whe_<id>[/any/path][?query]
  --smtp-starttls  SMTP with STARTTLS (AUTH only after TLS)
  --smtp-tls       SMTP over implicit TLS

The first start on an empty data dir creates a project, an inbox, an endpoint
and an API key, and prints them once. Privileged ports (587, 465) that need
root are skipped with a warning; 465 is then replaced by 2465.`,
		Example: `  capture serve
  capture serve --data-dir ./.capture --http 127.0.0.1:8025`,
		Args: cobra.NoArgs,
		RunE: runServe,
	}
	f := c.Flags()
	f.String("http", defaultHTTPAddr, "read API listen address")
	f.String("capture", defaultCaptureAddr, "webhook capture listen address")
	f.StringSlice("smtp-starttls", []string{"127.0.0.1:587", "127.0.0.1:2587"}, "SMTP STARTTLS listen addresses")
	f.StringSlice("smtp-tls", []string{"127.0.0.1:465"}, "SMTP implicit-TLS listen addresses")
	f.String("smtp-host", "localhost", "host name in the SMTP greeting and certificate")
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
	if publicURL != "" {
		if err := store.ValidateTarget(publicURL); err != nil {
			return usagef("--public-url %q: want an absolute http:// or https:// URL", publicURL)
		}
	}
	for _, a := range append([]string{httpAddr, captureAddr}, append(startTLS, implicitTLS...)...) {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return usagef("listen address %q: want HOST:PORT", a)
		}
	}
	// Memory stays small (tens of MiB) while ingest allocates quickly, so a
	// lazier collector buys throughput; an explicit GOGC still wins. The
	// soft memory limit makes the collector work harder instead when large
	// captures fill the heap, to stay under SPEC §13's 256 MiB.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(server.MemoryLimit)
	}
	log := slog.New(slog.NewTextHandler(c.ErrOrStderr(), &slog.HandlerOptions{Level: level}))

	dir, err := dataDir(c)
	if err != nil {
		return err
	}
	st, err := store.OpenDir(c.Context(), dir, store.WithLogger(log))
	if err != nil {
		return err
	}
	defer st.Close()

	tlsDir := filepath.Join(dir, "tls")
	var caPath string
	var tlsCfg = certs.ServerConfig
	var cfg server.Config
	if certFile != "" {
		cert, err := certs.Load(certFile, keyFile)
		if err != nil {
			return err
		}
		cfg.TLSConfig = tlsCfg(cert)
	} else {
		res, err := certs.Ensure(tlsDir, []string{smtpHost})
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		if res.CreatedCA {
			log.Info("created local CA", "path", res.CAPath)
		} else if res.CreatedLeaf {
			log.Info("renewed SMTP certificate", "path", res.CertPath)
		}
		caPath = res.CAPath
		cfg.TLSConfig = tlsCfg(res.Certificate)
	}

	boot, err := st.EnsureBootstrap(c.Context())
	if err != nil {
		return err
	}

	cfg.HTTPAddr, cfg.CaptureAddr = httpAddr, captureAddr
	cfg.SMTPStartTLSAddrs, cfg.SMTPTLSAddrs = startTLS, implicitTLS
	cfg.SMTPHost, cfg.PublicURL, cfg.AllowInsecureAuth = smtpHost, publicURL, insecure
	cfg.Downloads = map[string][]byte{forward.PythonClientName: forward.PythonClient}
	cfg.Logger = log
	cfg.Version = versionString()
	srv, err := server.Listen(st, cfg)
	if err != nil {
		return err
	}
	for _, w := range srv.Warnings() {
		log.Warn(w)
	}

	creds := apiclient.Credentials{API: srv.APIBase()}
	if boot.Created {
		creds.Key = boot.Secret
	} else if old, err := apiclient.ReadCredentials(dir); err == nil {
		creds.Key = old.Key
	}
	if creds.Key != "" {
		if err := apiclient.WriteCredentials(dir, creds); err != nil {
			return err
		}
	}
	printBanner(c.OutOrStdout(), srv, boot, smtpHost, dir, caPath)
	log.Info("serving", "http", srv.HTTPAddr().String(), "capture", srv.CaptureAddr().String(),
		"smtp_starttls", joinAddrs(srv.StartTLSAddrs()), "smtp_tls", joinAddrs(srv.TLSAddrs()), "data_dir", dir)

	err = srv.Run(c.Context())
	log.Info("stopped")
	return err
}

func joinAddrs(as []net.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

func portList(as []net.Addr) string {
	s := []string{}
	for _, a := range as {
		if t, ok := a.(*net.TCPAddr); ok {
			s = append(s, strconv.Itoa(t.Port))
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func printBanner(w io.Writer, srv *server.Server, b store.Bootstrap, smtpHost, dir, caPath string) {
	if b.Created {
		fmt.Fprintf(w, "capture: first start, created project %q (plan %s) in %s\n\n", b.Project.Name, b.Project.Plan.Name, dir)
	} else {
		fmt.Fprintf(w, "capture: serving %s\n\n", dir)
	}
	row := func(k, v string) { fmt.Fprintf(w, "  %-15s %s\n", k, v) }
	row("Read API", srv.APIBase())
	if b.Created {
		row("API key", b.Secret+"   (shown once; saved in "+filepath.Join(dir, apiclient.CredentialsFile)+")")
	}
	row("SMTP", fmt.Sprintf("%s  STARTTLS: %s  TLS: %s", smtpHost, portList(srv.StartTLSAddrs()), portList(srv.TLSAddrs())))
	if b.Inbox.ID != "" {
		row("Inbox", b.Inbox.ID+"   (the SMTP username)")
		if b.Created {
			row("SMTP password", b.Inbox.SMTPPassword)
		}
	}
	if b.Endpoint.ID != "" {
		row("Capture URL", api.CaptureURL(srv.CaptureBase(), b.Endpoint.ID))
	}
	if caPath != "" {
		row("CA certificate", caPath)
	}
	fmt.Fprintln(w)
}
