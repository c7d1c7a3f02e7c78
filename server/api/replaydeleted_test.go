package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/capturedev/capture/store"
)

// A request deleted while its replay is in flight: the target got the
// replay, and nothing could be recorded. The answer is not_found, as the
// request is, and nothing is answered as created; its message says the
// replay was sent, where, and what came of it, so the caller does not
// take it for a replay that never went out.
func TestReplayOfARequestDeletedInFlight(t *testing.T) {
	for _, tt := range []struct {
		name    string
		answer  func(w http.ResponseWriter)
		outcome string
	}{
		{"answered", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusAccepted)
			w.Write([]byte("ok"))
		}, "the target answered 202"},
		{"not answered", func(w http.ResponseWriter) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		}, "it got no answer (the target closed the connection without an answer)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			id := e.insertRequest(e.boot.Endpoint.ID, "/ci/hook", []byte(`{"a":1}`))
			received := make(chan string, 1)
			target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// Deleted after it was sent and before it is recorded.
				err := e.st.DeleteRequest(r.Context(), e.boot.Project.ID, id)
				received <- r.Method + " " + r.RequestURI
				if err != nil {
					t.Errorf("delete in flight: %v", err)
				}
				tt.answer(w)
			}))
			defer target.Close()
			tgt := target.URL + "/base"
			if _, err := e.st.UpdateEndpoint(t.Context(), e.boot.Endpoint.ID, store.EndpointUpdate{Target: &tgt}); err != nil {
				t.Fatal(err)
			}

			r := e.call("POST", "/requests/"+id+"/replay", nil)
			if got := <-received; got != "POST /base/ci/hook?a=1&b=%20" {
				t.Errorf("the target received %q", got)
			}
			if r.status != 404 || r.errCode(t) != "not_found" {
				t.Fatalf("replay answered %d %s, want 404 not_found", r.status, r.body)
			}
			msg, _ := r.json(t)["error"].(map[string]any)["message"].(string)
			for _, want := range []string{id, "deleted while its replay was in flight", "was sent (POST " + target.URL + "/base/ci/hook?a=1&b=%20)",
				tt.outcome, "no delivery history is left to record it in"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the message %q does not say %q", msg, want)
				}
			}
			if r := e.call("GET", "/requests/"+id, nil); r.status != 404 {
				t.Errorf("the request after its delete: %d %s", r.status, r.body)
			}
		})
	}
}
