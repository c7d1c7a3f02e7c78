package web

import "time"

// SetMaxTurnWait shortens how long a sign-in attempt waits behind the
// client's others, for the test's duration.
func SetMaxTurnWait(d time.Duration) (restore func()) {
	old := maxTurnWait
	maxTurnWait = d
	return func() { maxTurnWait = old }
}
