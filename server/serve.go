package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/capturedev/capture/server/api"
	"github.com/capturedev/capture/server/certs"
	"github.com/capturedev/capture/server/web"
	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/datadir"
)

// ServeConfig is what `capture serve` was asked for: the listeners, and the
// data dir they serve from.
type ServeConfig struct {
	// Config sets the listeners; TLSConfig is left to Serve.
	Config
	DataDir string
	// TLSCertFile and TLSKeyFile name the user's own SMTP certificate and
	// key; empty means a certificate from the data dir's local CA.
	TLSCertFile, TLSKeyFile string
	// Banner gets the lines a person reads at start: the addresses, and on
	// a first start the key and SMTP password, once.
	Banner io.Writer
}

// Serve runs capture from a data dir until ctx ends: it opens the database,
// makes sure the local CA and the SMTP certificate exist, binds every
// listener, creates the first project, inbox, endpoint and key on a first
// start, leaves credentials.json for the clients, prints the banner and
// serves.
func Serve(ctx context.Context, cfg ServeConfig) error {
	log := cfg.Logger
	st, err := store.OpenDir(ctx, cfg.DataDir, store.WithLogger(log))
	if err != nil {
		return err
	}
	defer st.Close()

	caPath := ""
	if cfg.TLSCertFile != "" {
		cert, err := certs.Load(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return err
		}
		cfg.TLSConfig = certs.ServerConfig(cert)
	} else {
		res, err := certs.Ensure(filepath.Join(cfg.DataDir, "tls"), []string{cfg.SMTPHost})
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		if res.CreatedCA {
			log.Info("created local CA", "path", res.CAPath)
		} else if res.CreatedLeaf {
			log.Info("renewed SMTP certificate", "path", res.CertPath)
		}
		caPath = res.CAPath
		cfg.TLSConfig = certs.ServerConfig(res.Certificate)
	}

	boot, err := st.EnsureBootstrap(ctx)
	if err != nil {
		return err
	}
	srv, err := Listen(st, cfg.Config)
	if err != nil {
		return err
	}
	for _, w := range srv.Warnings() {
		log.Warn(w)
	}

	creds := datadir.Credentials{API: srv.APIBase()}
	if boot.Created {
		creds.Key = boot.Secret
	} else if old, err := datadir.ReadCredentials(cfg.DataDir); err == nil {
		creds.Key = old.Key
	}
	if creds.Key != "" {
		if err := datadir.WriteCredentials(cfg.DataDir, creds); err != nil {
			return err
		}
	}
	// Commands run beside serve (user login-link) print links to this address.
	if err := st.RecordServeAddress(ctx, store.ServeHTTPBase, srv.HTTPBase()); err != nil {
		return err
	}
	signIn, err := st.CreateLoginToken(ctx)
	if err != nil {
		return err
	}
	if cfg.Banner != nil {
		printBanner(cfg.Banner, srv, boot, cfg.SMTPHost, cfg.DataDir, caPath, web.LoginURL(srv.HTTPBase(), signIn))
	}
	log.Info("serving", "http", srv.HTTPAddr().String(), "capture", srv.CaptureAddr().String(),
		"smtp_starttls", joinAddrs(srv.StartTLSAddrs()), "smtp_tls", joinAddrs(srv.TLSAddrs()),
		"email_api", srv.EmailAPIBase(), "data_dir", cfg.DataDir)

	err = srv.Run(ctx)
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

func printBanner(w io.Writer, srv *Server, b store.Bootstrap, smtpHost, dir, caPath, signIn string) {
	if b.Created {
		fmt.Fprintf(w, "capture: first start, created project %q (plan %s) in %s\n\n", b.Project.Name, b.Project.Plan.Name, dir)
	} else {
		fmt.Fprintf(w, "capture: serving %s\n\n", dir)
	}
	row := func(k, v string) { fmt.Fprintf(w, "  %-15s %s\n", k, v) }
	row("Read API", srv.APIBase())
	if b.Created {
		row("API key", b.Secret+"   (shown once; saved in "+filepath.Join(dir, datadir.CredentialsFile)+")")
	}
	row("SMTP", fmt.Sprintf("%s  STARTTLS: %s  TLS: %s", smtpHost, portList(srv.StartTLSAddrs()), portList(srv.TLSAddrs())))
	if b.Inbox.ID != "" {
		row("Inbox", b.Inbox.ID+"   (the SMTP username)")
		if b.Created {
			row("SMTP password", b.Inbox.SMTPPassword)
		}
	}
	if base := srv.EmailAPIBase(); base != "" {
		row("Email API", base+"   (base URL for provider SDKs)")
	}
	if b.Endpoint.ID != "" {
		row("Capture URL", api.CaptureURL(srv.CaptureBase(), b.Endpoint.ID))
	}
	row("Web UI", signIn+"   (one-time sign-in link, 15 min)")
	if caPath != "" {
		row("CA certificate", caPath)
	}
	fmt.Fprintln(w)
}
