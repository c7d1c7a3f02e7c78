// Package servertest gives tests the pieces of a real capture server: a
// bootstrapped store in a temporary directory and a configuration with
// every listener on a free loopback port.
package servertest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/capturedev/capture/server"
	"github.com/capturedev/capture/server/certs"
	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/storetest"
)

// Open opens a fresh store (see storetest.Store), creates the default project,
// inbox, endpoint and key, and puts the project on plan. The store closes
// when the test ends.
func Open(t testing.TB, plan string) (*store.Store, store.Bootstrap) {
	t.Helper()
	ctx := context.Background()
	st := storetest.Store(t)
	boot, err := st.EnsureBootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if plan != boot.Project.Plan.Name {
		if boot.Project, err = st.SetPlan(ctx, boot.Project.ID, plan); err != nil {
			t.Fatal(err)
		}
	}
	return st, boot
}

// Config is a server configuration with the HTTP, capture and email API
// listeners and one STARTTLS listener on free loopback ports, a certificate from a fresh
// local CA, a short shutdown and no logs.
func Config(t testing.TB) server.Config {
	t.Helper()
	res, err := certs.Ensure(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return server.Config{
		HTTPAddr:          "127.0.0.1:0",
		CaptureAddr:       "127.0.0.1:0",
		SMTPStartTLSAddrs: []string{"127.0.0.1:0"},
		EmailAPIAddr:      "127.0.0.1:0",
		SMTPHost:          "localhost",
		TLSConfig:         certs.ServerConfig(res.Certificate),
		ShutdownTimeout:   2 * time.Second,
		Logger:            slog.New(slog.DiscardHandler),
	}
}
