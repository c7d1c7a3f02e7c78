package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capturedev/capture/server/servertest"
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
	var logs logBuffer
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

// logBuffer is a log's output, written by the server's goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestReadyzSaysTheDiskIsFull: once captures are refused for a full disk,
// /readyz says so, though its own small write still fits (in room kept
// for deletions, or in the WAL's reused frames), and is ready again once
// a purge has made room. A small tmpfs, so root only.
func TestReadyzSaysTheDiskIsFull(t *testing.T) {
	if pgtest.Requested() {
		t.Skip("SQLite's data dir")
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=40m,mode=0700"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	st, err := store.Open(t.Context(), filepath.Join(dir, store.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	boot, err := st.EnsureBootstrap(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetPlan(t.Context(), boot.Project.ID, "team"); err != nil {
		t.Fatal(err)
	}
	r := runServerWith(t, st, boot, servertest.Config(t))
	if resp, body := r.get(t, "/readyz", ""); resp.StatusCode != 200 {
		t.Fatalf("/readyz before: %d %s", resp.StatusCode, body)
	}

	// Bodies that do not compress, until one is refused for the disk and
	// /readyz says so too. A checkpoint may give room back between the
	// two (the WAL truncated): captures are then taken again, and the
	// filling goes on.
	hook := "http://" + r.srv.CaptureAddr().String() + "/" + boot.Endpoint.ID + "/fill"
	body := make([]byte, 256<<10)
	refused, said := 0, false
	for range 400 {
		rand.Read(body)
		resp, err := http.Post(hook, "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		text, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			continue
		}
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(text), "disk is full") {
			t.Fatalf("webhook: %d %s", resp.StatusCode, text)
		}
		refused++
		resp, probe := r.get(t, "/readyz", "")
		if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" && strings.Contains(probe, "the disk is full") {
			said = true
			break
		}
	}
	if !said {
		t.Fatalf("%d captures refused for a full disk, and /readyz never said so", refused)
	}

	if err := st.PurgeEndpoint(t.Context(), boot.Project.ID, boot.Endpoint.ID); err != nil {
		t.Fatalf("purge on a full disk: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, text := r.get(t, "/readyz", "")
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after a purge made room: %d %s", resp.StatusCode, text)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
