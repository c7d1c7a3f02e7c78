package api

// ActiveWaits is how many list calls of the project are holding for new
// captures right now: tests wait for it before sending the capture that
// should wake them.
func (a *API) ActiveWaits(projectID string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.waits[projectID]
}
