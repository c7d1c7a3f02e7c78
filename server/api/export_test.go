package api

import (
	"net/http"

	"github.com/capturedev/capture/store"
)

// ActiveWaits is how many list calls of the project are holding for new
// captures right now: tests wait for it before sending the capture that
// should wake them.
func (a *API) ActiveWaits(projectID string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.waits[projectID]
}

// MessageJSON is GET /messages/{id}'s answer for m encoded whole, as it
// was before it was streamed: what the stream must equal byte for byte.
func MessageJSON(m store.Message) []byte { return append(marshal(renderMessage(m)), '\n') }

// RequestJSON is GET /requests/{id}'s answer for r encoded whole.
func RequestJSON(r store.Request) []byte { return append(marshal(renderRequest(r)), '\n') }

// Fail answers err as a route's error would be answered.
func (a *API) Fail(w http.ResponseWriter, r *http.Request, err error) { a.error(w, r, err) }
