package apiclient_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/capturedev/capture/forward/apiclient"
)

// A 200 without a body, which only a server going away mid-answer sends,
// is an outage to retry, not an empty list to trust.
func TestEmptyAnswerIsUnreachable(t *testing.T) {
	empty := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer empty.Close()
	_, err := apiclient.New(empty.URL+"/api/v1", "cap_k", nil).Requests(t.Context(), "whe_x", apiclient.RequestQuery{})
	if !errors.Is(err, apiclient.ErrUnreachable) {
		t.Errorf("Requests = %v, want ErrUnreachable", err)
	}
}
