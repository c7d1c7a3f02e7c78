package store

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// A disk that capture itself filled must still let captures be deleted:
// a delete writes WAL frames, and a checkpoint, which gives the WAL's
// space back, first grows the database file by the pages the WAL added.
// With no byte left, neither can happen, and every delete, purge and prune
// failed as "the disk is full" for good. So capture keeps room for them:
// capture.db-reserve, reserveSize bytes of allocated blocks. When a write
// or a checkpoint finds the disk full, the reserve is given back to the
// file system and captures are refused (ErrDiskFull) while deletions,
// checkpoints and the store's own upkeep use that room; the index mover
// waits too, as its moves grow the WAL. Once the reserve can be allocated
// again with roomMargin to spare (deletions and checkpoints have freed
// space, or room was made elsewhere), captures are taken again.

// reserveSuffix names the reserve beside the database file.
const reserveSuffix = "-reserve"

// reserveSize is the room kept; roomMargin is the room past it that must
// be free before captures are taken again, so that the first of them does
// not fill the disk at once (or pages the database holds free: new
// captures take those first). 16 MiB holds tens of thousands of deletes'
// WAL frames, and the pages a checkpoint adds to the database after the
// checkpoint before it (every 200 ms, and between index moves). Variables
// so tests can make them small.
var (
	reserveSize int64 = 16 << 20
	roomMargin  int64 = 2 << 20
)

// roomRetry is how often, while the disk is full, allocating the reserve
// again is tried: each try that fails costs a failed allocation.
var roomRetry = time.Second

// allocate gives f size bytes of allocated blocks (a variable so tests can
// make the disk full).
var allocate = allocateBlocks

// errRoomKept is what a capture hears while the reserve is given back.
var errRoomKept = fmt.Errorf("%w: %w: captures are refused until there is room again (deletions go through)", ErrUnavailable, ErrDiskFull)

// diskReserve is the room kept for deletions, and whether it is in use
// (the disk is full).
type diskReserve struct {
	path string
	log  func() *slog.Logger
	// spare is how many bytes the database file holds free (nil: none
	// known).
	spare func() int64
	full  atomic.Bool
	// released counts the times the reserve was given back.
	released atomic.Int64

	mu    sync.Mutex
	tried time.Time // the last allocation that failed, while full
	// settled says that a checkpoint has truncated the WAL since the
	// disk was found full: until then the room given back is the
	// checkpoint's (the pages the WAL added to the database) and the
	// deletions', and taking it again would leave them none.
	settled bool
}

// open makes sure the reserve is in place: a database opened on a full
// disk takes no capture until there is room.
func (r *diskReserve) open() {
	if fi, err := os.Stat(r.path); err == nil && fi.Size() >= reserveSize {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch err := r.make(); {
	case err == nil:
	case errors.Is(err, syscall.ENOSPC):
		r.full.Store(true)
		r.tried = time.Now()
		r.log().Warn("the disk is full: captures are refused until there is room again (deletions go through)", "path", r.path)
	default:
		// A data dir this user may not write, a read-only file system:
		// the database says so itself, when it is written. No reserve.
		r.log().Debug("cannot keep room for deletions on a full disk", "path", r.path, "err", err)
	}
}

// make allocates the reserve with roomMargin to spare, then gives the
// margin back; on failure nothing stays allocated. The margin may also be
// pages the database holds free (captures deleted on the full disk): new
// captures take those rather than new blocks.
func (r *diskReserve) make() error {
	err := r.allocate(reserveSize + roomMargin)
	if errors.Is(err, syscall.ENOSPC) && r.spare != nil && r.spare() >= roomMargin {
		// The WAL still needs blocks of its own.
		err = r.allocate(reserveSize + roomMargin/4)
	}
	return err
}

// allocate makes the reserve from size bytes of allocated blocks.
func (r *diskReserve) allocate(size int64) error {
	f, err := os.OpenFile(r.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	err = allocate(f, size)
	if err == nil {
		err = f.Truncate(reserveSize)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(r.path)
	}
	return err
}

// exhausted is the disk found full: the reserve goes back to the file
// system, and captures are refused until room returns.
func (r *diskReserve) exhausted() {
	if r == nil || r.full.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.full.Swap(true) {
		return
	}
	r.tried = time.Time{} // a disk full for a moment has room at the next checkpoint
	r.settled = false
	r.released.Add(1)
	err := os.Remove(r.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		r.log().Error("cannot give back the room kept for deletions", "path", r.path, "err", err)
	}
	r.log().Warn("the disk is full: captures are refused until there is room again; deletions use the room kept for them",
		"released_bytes", reserveSize)
}

// checkpointed is a checkpoint's word that the WAL is truncated.
func (r *diskReserve) checkpointed() {
	if r == nil || !r.full.Load() {
		return
	}
	r.mu.Lock()
	r.settled = true
	r.mu.Unlock()
}

// releases is how many times the reserve was given back.
func (r *diskReserve) releases() int64 {
	if r == nil {
		return 0
	}
	return r.released.Load()
}

// room says whether captures may be written: the disk was not found full,
// or the reserve could be allocated again since (tried once the WAL has
// been truncated, then once a roomRetry while full).
func (r *diskReserve) room() bool {
	if r == nil || !r.full.Load() {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full.Load() {
		return true
	}
	if !r.settled || !r.tried.IsZero() && time.Since(r.tried) < roomRetry {
		return false
	}
	if err := r.make(); err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			r.tried = time.Now()
			return false
		}
		// No reserve can be kept here at all (a data dir this user may
		// not write, as at open): holding captures back for one would
		// refuse them until a restart, whatever room the disk has.
		// SQLite says when the disk is still full.
		r.tried = time.Time{}
		r.full.Store(false)
		r.log().Info("captures are taken again; no room can be kept for deletions here", "path", r.path, "err", err)
		return true
	}
	r.tried = time.Time{}
	r.full.Store(false)
	r.log().Info("the disk has room again: captures are taken", "path", r.path)
	return true
}

// writeBlocks allocates size bytes of f by writing them, where the file
// system cannot allocate without writing. The bytes are not zeros, which a
// compressing file system would store in no block at all.
func writeBlocks(f *os.File, size int64) error {
	buf := make([]byte, 1<<20)
	rng := rand.NewChaCha8([32]byte{})
	rng.Read(buf)
	for off := int64(0); off < size; off += int64(len(buf)) {
		n := min(int64(len(buf)), size-off)
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return err
		}
	}
	return nil
}
