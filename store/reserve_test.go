package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/capturedev/capture/store/pgtest"
)

// A store keeps room on its disk for deletions (capture.db-reserve). When
// the disk is found full the room is given back and captures are refused
// while it stays full, though the database itself could take them, so
// that deletes, purges and the pruner go through on that room; once the
// room can be kept again, captures are taken. The full disk is SQLite's
// page limit for the write that finds it, and an allocation that fails
// for the reserve (a real one: TestFullFilesystemFreedThroughCapture).
func TestDiskFullKeepsRoomForDeletions(t *testing.T) {
	if pgtest.Requested() {
		t.Skip("SQLite's data dir")
	}
	setVar(t, &roomRetry, 0)
	// Set before the store's loops start, which allocate too.
	var diskFull atomic.Bool
	setVar(t, &allocate, func(f *os.File, size int64) error {
		if diskFull.Load() {
			return &os.PathError{Op: "fallocate", Path: f.Name(), Err: syscall.ENOSPC}
		}
		return allocateBlocks(f, size)
	})
	s := newStore(t)
	ctx := t.Context()
	b := s.b.(*sqliteDB)
	reserve := func() int64 {
		fi, err := os.Stat(b.path + reserveSuffix)
		if err != nil {
			return -1
		}
		return fi.Size()
	}
	if got := reserve(); got != reserveSize {
		t.Fatalf("reserve at open: %d bytes, want %d", got, reserveSize)
	}
	boot, err := s.EnsureBootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 600<<10) // random: the pack cannot shrink it
	rand.Read(body)
	insert := func(path string, at time.Time) (string, error) {
		return s.InsertRequest(ctx, &NewRequest{EndpointID: boot.Endpoint.ID, ReceivedAt: at, Method: "POST",
			Path: path, RemoteAddr: "127.0.0.1:1", Body: body})
	}
	var ids []string
	for i := range 4 {
		id, err := insert(fmt.Sprint("/old", i), time.Now().Add(-365*24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}

	// The disk fills: the file system has no block left, and the write
	// that finds it so fails.
	diskFull.Store(true)
	makeRoom := fillDisk(t, s)
	if _, err := insert("/full", time.Now()); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("insert on a full disk = %v, want the disk is full", err)
	}
	if got := reserve(); got != -1 {
		t.Fatalf("the reserve is still kept (%d bytes) on a full disk", got)
	}
	// What the room is kept for goes through on it; captures do not take
	// it, though SQLite alone would let them.
	makeRoom()
	if _, err := insert("/still-full", time.Now()); !errors.Is(err, ErrDiskFull) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("insert while the disk stays full = %v, want unavailable: the disk is full", err)
	}
	// /readyz's write goes through too: it stays 200, so that the one
	// SQLite server is not taken out of service while deletes make room.
	if err := s.Ping(ctx); err != nil {
		t.Errorf("readiness write on a full disk: %v, want it through, as deletions are", err)
	}
	if err := s.DeleteRequest(ctx, boot.Project.ID, ids[0]); err != nil {
		t.Fatalf("delete on a full disk: %v", err)
	}
	if n, err := s.Prune(ctx, time.Now()); err != nil || n != 3 {
		t.Fatalf("prune on a full disk: %d, %v; want 3 pruned", n, err)
	}
	if err := s.PurgeEndpoint(ctx, boot.Project.ID, boot.Endpoint.ID); err != nil {
		t.Fatalf("purge on a full disk: %v", err)
	}
	// Staged rows wait: their moves would take the room.
	if err := s.indexStaged(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Room again, found once a checkpoint has truncated the WAL.
	diskFull.Store(false)
	if _, _, err := b.checkpoint("TRUNCATE"); err != nil {
		t.Fatal(err)
	}
	if _, err := insert("/room", time.Now()); err != nil {
		t.Fatalf("insert once there is room: %v", err)
	}
	if got := reserve(); got != reserveSize {
		t.Fatalf("reserve once there is room: %d bytes, want %d", got, reserveSize)
	}
	list, err := s.Requests(ctx, boot.Endpoint.ID, RequestFilter{}, Page{Limit: 10})
	if err != nil || len(list.Items) != 1 || list.Items[0].Path != "/room" {
		t.Fatalf("stored: %+v, %v; want /room alone", list, err)
	}
}

// Where no reserve can be kept at all (a data dir this user may not
// write), a full disk once found does not hold captures back for good:
// they are refused while SQLite finds the disk full, and taken once it
// has room.
func TestDiskFullWithoutAReserve(t *testing.T) {
	if pgtest.Requested() {
		t.Skip("SQLite's data dir")
	}
	setVar(t, &roomRetry, 0)
	setVar(t, &allocate, func(f *os.File, size int64) error {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: syscall.EACCES}
	})
	s := newStore(t)
	ctx := t.Context()
	b := s.b.(*sqliteDB)
	boot, err := s.EnsureBootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 600<<10)
	rand.Read(body)
	insert := func(path string) error {
		_, err := s.InsertRequest(ctx, &NewRequest{EndpointID: boot.Endpoint.ID, ReceivedAt: time.Now(), Method: "POST",
			Path: path, RemoteAddr: "127.0.0.1:1", Body: body})
		return err
	}
	makeRoom := fillDisk(t, s)
	if err := insert("/full"); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("insert on a full disk = %v, want the disk is full", err)
	}
	makeRoom()
	if _, _, err := b.checkpoint("TRUNCATE"); err != nil {
		t.Fatal(err)
	}
	if err := insert("/room"); err != nil {
		t.Fatalf("insert once the disk has room, with no reserve kept: %v", err)
	}
}
