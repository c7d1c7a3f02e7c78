//go:build unix

package datadir

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// ErrInUse is returned by Lock when another process holds the data dir.
var ErrInUse = errors.New("in use by another `capture serve`")

// Lock claims dir for this process until release is called or the process
// ends, however it ends: the kernel drops the lock with the last open
// descriptor. It fails with ErrInUse while another process holds it. Two
// servers on one SQLite database would each announce their own addresses
// in it and in credentials.json, and every client would follow whichever
// wrote last, to a port that may have closed since.
func Lock(dir string) (release func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data dir %s: %w: stop it, or give this one another --data-dir", dir, ErrInUse)
		}
		return nil, fmt.Errorf("lock data dir %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}
