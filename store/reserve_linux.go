package store

import (
	"os"
	"syscall"
)

// allocateBlocks allocates size bytes of f's blocks without writing them.
func allocateBlocks(f *os.File, size int64) error {
	for {
		err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
		if err != syscall.EINTR {
			if err == syscall.EOPNOTSUPP {
				return writeBlocks(f, size)
			}
			if err != nil {
				return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
