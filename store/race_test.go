//go:build race

package store

// raceEnabled: the race detector makes sync.Pool drop what it is given
// at random, so allocation counts through a pool vary.
const raceEnabled = true
