//go:build !unix

package datadir

import "errors"

// ErrInUse is returned by Lock when another process holds the data dir.
var ErrInUse = errors.New("in use by another `capture serve`")

// Lock claims nothing where flock(2) does not exist.
func Lock(string) (func(), error) { return func() {}, nil }

// HeldOpen finds no other process where POSIX record locks do not exist.
func HeldOpen(string) (pid int, held bool, err error) { return 0, false, nil }
