//go:build unix

package datadir

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// shmDMS is the byte of a WAL database's -shm file on which SQLite's unix
// VFS keeps its "dead man switch" (os_unix.c: UNIX_SHM_DMS, after the
// SQLITE_SHM_NLOCK lock bytes from UNIX_SHM_BASE = (22+8)*4): every
// connection holds a shared POSIX record lock on it for as long as it has
// the wal-index open, in whichever process, of whichever build.
const shmDMS = (22+8)*4 + 8

// HeldOpen reports whether another process has the SQLite database at
// path open in WAL mode, and pid, that process's id (0 when the system
// does not say). A `capture serve` of a build older than Lock takes no
// lock on its data dir; its connections still hold SQLite's lock on the
// -shm file, which F_GETLK finds without taking it.
//
// The caller must not have the database open itself: closing a
// descriptor of a file drops every POSIX lock the process holds on it,
// SQLite's among them. Locks of this process are not reported.
func HeldOpen(path string) (pid int, held bool, err error) {
	f, err := os.Open(path + "-shm")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil // no process has it open in WAL mode
	}
	if err != nil {
		return 0, false, fmt.Errorf("check whether another process has %s open: %w", path, err)
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart, Start: shmDMS, Len: 1}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		return 0, false, fmt.Errorf("check whether another process has %s open: %w", path, err)
	}
	if lk.Type == syscall.F_UNLCK {
		return 0, false, nil
	}
	return max(int(lk.Pid), 0), true, nil
}
