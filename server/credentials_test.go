package server

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/server/servertest/logbuffer"
	"github.com/capturedev/capture/store/datadir"
)

// served is one Serve of a data dir, stopped when the test ends or by stop.
type served struct {
	srv    *Server
	banner *logbuffer.Buffer
	log    *logbuffer.Buffer
	stop   func() error
}

// serveDir runs Serve on dir (SQLite: credentials.json is the data dir's)
// with its HTTP listener on httpAddr, until it serves.
func serveDir(t *testing.T, dir, httpAddr string) *served {
	t.Helper()
	s := &served{banner: &logbuffer.Buffer{}, log: &logbuffer.Buffer{}}
	bound := make(chan *Server, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cfg := ServeConfig{
		Config: Config{
			HTTPAddr: httpAddr, CaptureAddr: "127.0.0.1:0",
			SMTPStartTLSAddrs: []string{"127.0.0.1:0"}, SMTPTLSAddrs: []string{"127.0.0.1:0"},
			SMTPHost: "localhost", ShutdownTimeout: 2 * time.Second,
			Logger: slog.New(slog.NewTextHandler(s.log, nil)),
		},
		DataDir: dir,
		Banner:  s.banner,
		bound:   func(srv *Server) { bound <- srv },
	}
	go func() { done <- Serve(ctx, cfg) }()
	stopped := false
	s.stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
			return nil
		}
	}
	t.Cleanup(func() { s.stop() })
	select {
	case s.srv = <-bound:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(s.log.String(), "msg=serving"); {
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("serve: %v; log:\n%s", err, s.log)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start; log:\n%s", s.log)
		}
	}
	return s
}

// A later start whose credentials.json already says what it would write
// leaves the file alone: rewriting it would stop serve on a full disk or a
// data dir it cannot write, although the database serves fine.
func TestServeLeavesUnchangedCredentialsAlone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first := serveDir(t, dir, "127.0.0.1:0")
	httpAddr := first.srv.HTTPAddr().String()
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, datadir.CredentialsFile)
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	// The same HTTP address: the same API base, so nothing to change.
	second := serveDir(t, dir, httpAddr)
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Errorf("credentials.json was replaced although what it holds did not change")
	}
	if err := second.stop(); err != nil {
		t.Fatal(err)
	}

	// Another address: the file is brought up to date, key kept.
	old, err := datadir.ReadCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	third := serveDir(t, dir, "127.0.0.1:0")
	now, err := datadir.ReadCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	if now.Key != old.Key || now.API != third.srv.APIBase() {
		t.Errorf("credentials.json after a start on another address: %+v, want key %s and API %s", now, old.Key, third.srv.APIBase())
	}
}

// A first start that cannot write credentials.json still serves: the
// database holds the new key already, so refusing would lose it. The
// banner shows it, saying it was not saved, and the log says why.
func TestServeFirstStartUnsavedKeyIsShown(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	// A directory in the file's place cannot be replaced by it, whoever
	// runs the test (root writes anywhere else).
	if err := os.MkdirAll(filepath.Join(dir, datadir.CredentialsFile, "taken"), 0o700); err != nil {
		t.Fatal(err)
	}
	s := serveDir(t, dir, "127.0.0.1:0")
	banner := s.banner.String()
	if !strings.Contains(banner, "API key") || !strings.Contains(banner, "not saved") {
		t.Errorf("the banner does not show the unsaved key as such:\n%s", banner)
	}
	if !strings.Contains(s.log.String(), "could not be saved") {
		t.Errorf("the log does not say the key could not be saved:\n%s", s.log)
	}
}
