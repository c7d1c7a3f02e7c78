package server

import (
	"net/http/httptest"
	"testing"
	"time"
)

// A purge of a collection at its cap outlasts the read API's write
// timeout, as a replay or a wait does: it gets a deadline of its own, and
// nothing else does by its path alone.
func TestPurgesHaveTheirOwnDeadline(t *testing.T) {
	for _, tt := range []struct {
		method, path string
		want         time.Duration
		long         bool
	}{
		{"DELETE", "/api/v1/inboxes/inb_1/messages", purgeAllowance, true},
		{"DELETE", "/api/v1/endpoints/whe_1/requests", purgeAllowance, true},
		{"POST", "/projects/prj_1/inboxes/inb_1/purge", purgeAllowance, true},
		{"POST", "/projects/prj_1/endpoints/whe_1/purge", purgeAllowance, true},
		{"DELETE", "/api/v1/messages/msg_1", 0, false},
		{"GET", "/api/v1/inboxes/inb_1/messages", 0, false},
		{"DELETE", "/api/v1/requests/req_1", 0, false},
		{"POST", "/projects/prj_1/inboxes/inb_1/delete", 0, false},
	} {
		d, long := longRequestTime(httptest.NewRequest(tt.method, tt.path, nil))
		if d != tt.want || long != tt.long {
			t.Errorf("%s %s: %v %v, want %v %v", tt.method, tt.path, d, long, tt.want, tt.long)
		}
	}
}
