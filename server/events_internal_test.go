package server

import (
	"net/http/httptest"
	"testing"
)

// At a stop, requests held until something happens end at once with 503;
// every other request in flight is finished. A purge is finished: it
// commits a chunk at a time, and cut off between two it would have
// deleted part of the collection while answering that nothing was done.
func TestWhatAStopEndsAtOnce(t *testing.T) {
	for _, c := range []struct {
		method, target, accept string
		endsAtOnce             bool
	}{
		{"GET", "/api/v1/inboxes/inb_1/messages?wait=20", "", true},
		{"GET", "/api/v1/endpoints/whe_1/requests?after=req_1&wait=5", "", true},
		{"GET", "/projects/proj_1/inboxes/inb_1/events", "", true},
		{"GET", "/projects/proj_1/inboxes/inb_1", "text/event-stream", true},
		{"GET", "/mcp", "text/event-stream", true},
		{"GET", "/api/v1/inboxes/inb_1/messages", "", false},
		{"POST", "/api/v1/requests/req_1/replay", "", false},
		{"DELETE", "/api/v1/inboxes/inb_1/messages", "", false},
		{"DELETE", "/api/v1/endpoints/whe_1/requests", "", false},
		{"POST", "/projects/proj_1/inboxes/inb_1/purge", "", false},
		{"POST", "/mcp", "", false},
	} {
		r := httptest.NewRequest(c.method, c.target, nil)
		if c.accept != "" {
			r.Header.Set("Accept", c.accept)
		}
		if got := waitsForEvents(r); got != c.endsAtOnce {
			t.Errorf("%s %s (Accept %q): ended at once by a stop = %v, want %v", c.method, c.target, c.accept, got, c.endsAtOnce)
		}
	}
}
