package server_test

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"testing"

	"github.com/capturedev/capture/server/servertest"
	"github.com/capturedev/capture/server/servertest/logbuffer"
	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/pgtest"
	"github.com/capturedev/capture/store/storetest"
)

// While the database cannot commit, every readiness probe is answered 503,
// but the log says so once, not once a probe (an orchestrator probes every
// few seconds); once it commits again the log says so, with the count.
func TestNotReadyIsLoggedOnce(t *testing.T) {
	t.Parallel()
	where := storetest.Database(t)
	st, err := store.Open(t.Context(), where)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	boot, err := st.EnsureBootstrap(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var logs logbuffer.Buffer
	cfg := servertest.Config(t)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil)) // INFO: what serve logs by default
	r := runServerWith(t, st, boot, cfg)

	// Another process takes the write lock and keeps it: SQLite's, or on
	// PostgreSQL the row every write transaction reads.
	driver, source, take := "sqlite", "file:"+where, "BEGIN EXCLUSIVE"
	if pgtest.Requested() {
		driver, source, take = "pgx", where, "BEGIN; LOCK TABLE settings_version IN ACCESS EXCLUSIVE MODE"
	}
	db, err := sql.Open(driver, source)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lock, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(t.Context(), take); err != nil {
		t.Fatal(err)
	}
	const probes = 3
	for range probes {
		if resp, body := r.get(t, "/readyz", ""); resp.StatusCode != 503 {
			t.Fatalf("/readyz with the database locked = %d %s", resp.StatusCode, body)
		}
	}
	lock.ExecContext(context.Background(), "ROLLBACK")
	lock.Close()
	// The probe out when the lock went may still time out: a bounded
	// number of probes more.
	ready := false
	for range 10 {
		if resp, _ := r.get(t, "/readyz", ""); resp.StatusCode == 200 {
			ready = true
			break
		}
	}
	if !ready {
		t.Fatalf("not ready once the database was unlocked; log:\n%s", logs.String())
	}
	var notReady, readyAgain int
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `msg="not ready"`) {
			notReady++
		}
		if strings.Contains(l, `msg="ready again"`) && strings.Contains(l, "failed_probes=") {
			readyAgain++
		}
	}
	if notReady != 1 || readyAgain != 1 {
		t.Errorf("%d probes while the database was locked, then ready, logged:\n%s\nwant one not ready and one ready again with the count",
			probes, logs.String())
	}
}
