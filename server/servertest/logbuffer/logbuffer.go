// Package logbuffer gives tests a log's output that a server's goroutines
// write while the test reads it. It imports nothing of capture, so the
// tests of any package, the servers' own included, can use it.
package logbuffer

import (
	"strings"
	"sync"
)

// Buffer is a log's output, safe for concurrent writes and reads.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
