package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
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
	// Database is a postgres:// URL to serve from instead of the data
	// dir's SQLite database; replicas given the same one share it, and
	// keep nothing of their own.
	Database string
	// TLSCertFile and TLSKeyFile name the user's own SMTP certificate and
	// key; empty means a certificate from the data dir's local CA.
	TLSCertFile, TLSKeyFile string
	// Banner gets the lines a person reads at start: the addresses, and on
	// a first start the key and SMTP password, once.
	Banner io.Writer

	// For tests: bound hears the listeners once bound, openStore
	// stands in for opening the database, and openingCaps for the caps
	// on connections answered meanwhile.
	bound       func(*Server)
	openStore   func(context.Context) (*store.Store, error)
	openingCaps *openingCaps
}

// Serve runs capture from a data dir, or a shared PostgreSQL database,
// until ctx ends: it binds every listener, opens the database, makes sure
// the local CA and the SMTP certificate exist, creates the first project,
// inbox, endpoint and key on a first start, records the addresses it
// serves on, leaves credentials.json for the clients (in the data dir; a
// replica of a shared database writes no file), prints the banner and
// serves.
//
// Binding comes first: a port in use must stop serve before it writes
// anything to the data dir, so that a failed first start leaves a first
// start still to come, its banner and key included (SPEC §3).
func Serve(ctx context.Context, cfg ServeConfig) error {
	log := cfg.Logger
	srv, err := Listen(nil, cfg.Config)
	if err != nil {
		return err
	}
	serving := false
	defer func() {
		if !serving {
			srv.closeListeners()
		}
	}()
	if cfg.bound != nil {
		cfg.bound(srv)
	}

	// The user's own certificate is read before the database is opened,
	// for the same reason: one that cannot be used stops serve before it
	// writes anything.
	if cfg.TLSCertFile != "" {
		cert, err := certs.Load(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return err
		}
		srv.cfg.TLSConfig = certs.ServerConfig(cert)
	}

	if cfg.Database == "" {
		// The data dir is claimed before its database is opened: opening
		// may migrate it, which after an upgrade can take a while, and a
		// second serve started meanwhile must hear that the dir is in use,
		// not wait out SQLite's lock and report it locked. Let go once the
		// database is closed (defers run last in, first out).
		if warning, err := store.PrepareDir(cfg.DataDir); err != nil {
			return err
		} else if warning != "" {
			log.Warn(warning)
		}
		release, err := datadir.Lock(cfg.DataDir)
		if err != nil {
			return err
		}
		defer release()
	}

	// Opening may migrate, which takes a while on a large database: the
	// listeners are answered meanwhile (opening.go), until the servers
	// take them over.
	smtpTLS := srv.cfg.TLSConfig
	upgrading := false
	if cfg.Database == "" {
		path := filepath.Join(cfg.DataDir, store.DBFile)
		upgrading = store.NeedsUpgrade(ctx, path)
		// A `capture serve` of a build that predates the data dir's lock
		// takes none, yet its connections hold SQLite's own lock on the
		// database: upgrading under it would fail what it stores next.
		if upgrading {
			if err := store.CheckNotHeldOpen(cfg.DataDir); err != nil {
				return fmt.Errorf("%w, which would fail what it stores next once upgraded under it. Stop it, "+
					"then start this version's `capture serve` again", err)
			}
		}
		if smtpTLS == nil {
			smtpTLS = existingSMTPCert(cfg.DataDir, srv.SMTPHost())
		}
	}
	if upgrading {
		log.Info("upgrading the database schema: answering 503 (SMTP 421) until it ends",
			"database", filepath.Join(cfg.DataDir, store.DBFile))
	}
	caps := servingCaps()
	if cfg.openingCaps != nil {
		caps = *cfg.openingCaps
	}
	answering := srv.answerWhileOpening(openingStatusFor(upgrading), smtpTLS, caps)
	defer answering.close()
	open := cfg.openStore
	if open == nil {
		open = func(ctx context.Context) (*store.Store, error) {
			return store.OpenDatabase(ctx, cfg.Database, cfg.DataDir, store.WithLogger(log))
		}
	}
	st, err := open(ctx)
	if stopped := (*store.UpgradeInterruptedError)(nil); errors.As(err, &stopped) {
		// Said as it is: the database's path and "context canceled" would
		// read like damage.
		return stopped
	}
	if err != nil {
		return err
	}
	defer st.Close()
	srv.store = st
	where := cfg.DataDir
	if st.Shared() {
		where = st.Where()
	}

	caPath := ""
	if cfg.TLSCertFile == "" {
		hosts := []string{srv.SMTPHost()}
		if !st.Shared() {
			// Replicas of one database share one certificate, for the
			// --smtp-host they are all given; a server of its own also
			// covers the addresses it is dialled at.
			hosts = append(hosts, srv.specificSMTPIPs()...)
		}
		res, err := ensureCerts(ctx, st, cfg.DataDir, hosts)
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		if res.ReplacedCA != "" {
			log.Warn("replaced the local CA: clients that trusted the old one must trust the new one", "path", res.CAPath, "why", res.ReplacedCA)
		} else if res.CreatedCA {
			log.Info("created local CA", "path", res.CAPath)
		} else if res.CreatedLeaf {
			log.Info("renewed SMTP certificate", "path", res.CertPath)
		}
		caPath = res.CAPath
		srv.cfg.TLSConfig = certs.ServerConfig(res.Certificate)
	}

	boot, err := st.EnsureBootstrap(ctx)
	if err != nil {
		return err
	}
	if w := srv.Warnings(); len(w) > 0 {
		// One line for every privileged port skipped (SPEC §3).
		log.Warn(strings.Join(w, ", "))
	}
	if w := srv.HostWarning(); w != "" {
		log.Warn(w)
	}
	if w := fileLimitWarning(); w != "" {
		log.Warn(w)
	}
	if err := st.SetAddresses(ctx, srv.Addresses()); err != nil {
		return err
	}

	// The banner says whether the key it shows is saved: not on a shared
	// database (no file), nor on a first start whose file could not be
	// written; a later start's key was saved before.
	saved := !st.Shared() && saveCredentials(cfg.DataDir, srv.APIBase(), boot, log)
	savedKey := saved || !st.Shared() && !boot.Created
	signIn, err := st.CreateLoginToken(ctx)
	if err != nil {
		return err
	}
	// From here on the servers answer: the banner and the log say so.
	answering.handOver()
	if cfg.Banner != nil {
		printBanner(cfg.Banner, srv, boot, where, caPath, web.LoginURL(srv.HTTPBase(), signIn), savedKey)
	}
	log.Info("serving", "http", srv.HTTPAddr().String(), "capture", srv.CaptureAddr().String(),
		"smtp_starttls", joinAddrs(srv.StartTLSAddrs()), "smtp_tls", joinAddrs(srv.TLSAddrs()),
		"email_api", srv.EmailAPIBase(), "database", where)

	serving = true
	err = srv.Run(ctx)
	log.Info("stopped")
	return err
}

// saveCredentials leaves credentials.json in dir for the clients: the API
// base served on, and the key, the one created on a first start, else the
// one the file holds already (a file without one is left alone). It says
// whether the file holds them when it returns.
//
// A file that holds them already is not written again: a later start must
// serve on a full disk or from a data dir it cannot write, so that the user
// can read and delete captures. One that cannot be written is a warning,
// not a reason to stop: on a later start the clients find a stale API base
// at worst; on a first start the database holds the new key already, so
// stopping would lose it for good, and the banner shows it instead, saying
// it was not saved.
func saveCredentials(dir, apiBase string, boot store.Bootstrap, log *slog.Logger) bool {
	path := filepath.Join(dir, datadir.CredentialsFile)
	creds := datadir.Credentials{API: apiBase}
	old, err := datadir.ReadCredentials(dir)
	switch {
	case boot.Created:
		creds.Key = boot.Secret
	case err == nil && old.Key != "":
		creds.Key = old.Key
	default:
		return false
	}
	if err == nil && old == creds {
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm() == 0o600 {
			return true
		}
	}
	if err := datadir.WriteCredentials(dir, creds); err != nil {
		if boot.Created {
			log.Warn("the API key could not be saved in "+datadir.CredentialsFile+": keep it from the banner", "path", path, "err", err)
		} else {
			log.Warn("could not update "+datadir.CredentialsFile+": clients that read it may find a stale API address",
				"path", path, "api", apiBase, "err", err)
		}
		return false
	}
	return true
}

// Addresses are the addresses the server announces: the API, capture URLs
// and SMTP as bound.
func (s *Server) Addresses() store.Addresses {
	return store.Addresses{HTTPBase: s.HTTPBase(), APIBase: s.APIBase(), CaptureBase: s.CaptureBase(), SMTPHost: s.cfg.SMTPHost,
		StartTLSPorts: ports(s.StartTLSAddrs()), TLSPorts: ports(s.TLSAddrs())}
}

func joinAddrs(as []net.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

// SMTPSummary says where to send mail: the host and each listener's port.
func SMTPSummary(host string, startTLSPorts, tlsPorts []int) string {
	return fmt.Sprintf("%s  STARTTLS: %s  TLS: %s", host, web.PortList(startTLSPorts), web.PortList(tlsPorts))
}

// ensureCerts makes sure the local CA and the SMTP certificate exist: in
// the data dir, or in a shared database, where replicas starting together
// take turns so that all of them present the one certificate.
func ensureCerts(ctx context.Context, st *store.Store, dir string, hosts []string) (*certs.Result, error) {
	if !st.Shared() {
		return certs.Ensure(filepath.Join(dir, "tls"), hosts)
	}
	var res *certs.Result
	err := st.Exclusively(ctx, "tls", func() (err error) {
		res, err = certs.EnsureShared(certs.InDatabase(ctx, st, store.ErrNotFound), hosts)
		return err
	})
	if err == nil {
		res.CAPath = "in the database: print it with `capture ca --database …`"
	}
	return res, err
}

func printBanner(w io.Writer, srv *Server, b store.Bootstrap, dir, caPath, signIn string, savedKey bool) {
	if b.Created {
		fmt.Fprintf(w, "capture: first start, created project %q (plan %s) in %s\n\n", b.Project.Name, b.Project.Plan.Name, dir)
	} else {
		fmt.Fprintf(w, "capture: serving %s\n\n", dir)
	}
	row := func(k, v string) { fmt.Fprintf(w, "  %-15s %s\n", k, v) }
	row("Read API", srv.APIBase())
	if b.Created {
		saved := "saved in " + filepath.Join(dir, datadir.CredentialsFile)
		if !savedKey {
			saved = "not saved anywhere: keep it"
		}
		row("API key", b.Secret+"   (shown once; "+saved+")")
	}
	row("SMTP", SMTPSummary(srv.SMTPHost(), ports(srv.StartTLSAddrs()), ports(srv.TLSAddrs())))
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
