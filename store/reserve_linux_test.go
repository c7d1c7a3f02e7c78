package store

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/capturedev/capture/store/pgtest"
)

// TestFullFilesystemFreedThroughCapture fills a real file system (a 16 MiB
// tmpfs, so root only) with captures until the disk is full, then deletes,
// purges, and takes captures again: before the reserve, every delete and
// purge failed for good with "the disk is full".
func TestFullFilesystemFreedThroughCapture(t *testing.T) {
	if pgtest.Requested() {
		t.Skip("SQLite's data dir")
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=16m,mode=0700"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, 0) })
	setVar(t, &reserveSize, 4<<20)
	setVar(t, &roomMargin, 256<<10)
	setVar(t, &roomRetry, 0)
	ctx := t.Context()
	// The index mover waits: its moves grow the database by amounts that
	// vary from run to run, and the room left after the purge with them.
	s, err := openSQLite(ctx, filepath.Join(dir, DBFile), time.Hour, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	b := s.b.(*sqliteDB)
	boot, err := s.EnsureBootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	insert := func(i int) (string, error) {
		body := make([]byte, 100<<10)
		rand.Read(body)
		return s.InsertRequest(ctx, &NewRequest{EndpointID: boot.Endpoint.ID, ReceivedAt: time.Now(), Method: "POST",
			Path: fmt.Sprint("/", i), RemoteAddr: "127.0.0.1:1", Body: body})
	}
	var ids []string
	for i := 0; ; i++ {
		id, err := insert(i)
		if errors.Is(err, ErrDiskFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if i == 300 {
			t.Fatal("16 MiB took 300 captures of 100 KiB")
		}
		ids = append(ids, id)
		// As the checkpoint loop would every 200 ms: this loop outruns it,
		// and the pages the WAL adds to the database past the last
		// checkpoint must fit in the reserve when the disk fills (README).
		b.checkpoint("PASSIVE")
	}
	t.Logf("full after %d captures", len(ids))
	if _, err := insert(-1); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("insert on the full disk = %v, want the disk is full", err)
	}
	for _, id := range ids[:5] {
		if err := s.DeleteRequest(ctx, boot.Project.ID, id); err != nil {
			t.Fatalf("delete on the full disk: %v", err)
		}
	}
	if err := s.PurgeEndpoint(ctx, boot.Project.ID, boot.Endpoint.ID); err != nil {
		t.Fatalf("purge on the full disk: %v", err)
	}
	// The WAL's blocks back (the checkpoint loop does this too), and the
	// purged captures' pages are there for new ones.
	if _, _, err := b.checkpoint("TRUNCATE"); err != nil {
		t.Fatalf("checkpoint after the purge: %v", err)
	}
	if _, err := insert(1000); err != nil {
		var st syscall.Statfs_t
		syscall.Statfs(dir, &st)
		fi, _ := os.Stat(b.path)
		t.Fatalf("insert after the purge: %v (free %d KiB, db %d KiB, db free pages %d KiB)", err, st.Bavail*uint64(st.Bsize)>>10, fi.Size()>>10, b.freePages()>>10)
	}
	if fi, err := os.Stat(b.path + reserveSuffix); err != nil || fi.Size() != reserveSize {
		t.Fatalf("reserve after the purge: %v, %v", fi, err)
	}
}
