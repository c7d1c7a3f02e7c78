//go:build !unix

package server

func openFileLimit() uint64 { return 0 }
