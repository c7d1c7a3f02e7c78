// Package started tells when the program was launched, for `capture wait`,
// which counts only captures received after that. The moment the program
// gets to read the clock is too late: loading a binary this size and
// setting up its larger packages takes tens of milliseconds, and a script
// that starts `capture wait … &` and sends its webhook at once has it
// stored by then. This package imports nothing slow to set up, so it is
// initialized within about a millisecond of the runtime, and asks the
// kernel how long the process had been running by then.
package started

import "time"

// at is when this package was initialized; sinceLaunch is how long the
// process had been on or waiting for a CPU by then (0 where unknown).
var at, sinceLaunch = time.Now(), onCPU()

// Launched is when the process was created: at, less the time it had run
// or waited to run since, and never before the kernel's own record of its
// start (kept in 10 ms ticks). A process that slept before it got here
// (stopped, or loading pages from a slow disk) is taken to have started
// later than it did, never earlier: a capture acknowledged before the
// command was run must never count.
func Launched() time.Time {
	launched := at.Add(-sinceLaunch)
	if lo, ok := createdTick(); ok {
		launched = later(launched, lo)
		launched = earlier(launched, lo.Add(tick-time.Nanosecond))
	}
	return earlier(launched, at)
}

// tick is the resolution of the kernel's record of a process's start.
const tick = 10 * time.Millisecond

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
