//go:build unix

package server

import "syscall"

// openFileLimit is how many files the process may hold open, 0 when
// unknown. The Go runtime raised the soft limit to the hard one when the
// process started (go.dev/issue/46279), so this is all serve can have.
func openFileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return l.Cur
}
