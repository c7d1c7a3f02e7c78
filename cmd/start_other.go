//go:build !linux

package cmd

import "time"

// processStart is when the kernel created this process, where this system
// says; elsewhere commandStart's own reading stands.
func processStart() (time.Time, bool) { return time.Time{}, false }
