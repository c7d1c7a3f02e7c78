package webload

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || string(body) != `{"a":1}` || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		switch k := n.Add(1); {
		case k%10 == 0:
			w.WriteHeader(http.StatusTeapot)
		case k%3 == 0:
			// Unknown length: chunked on the wire.
			w.Write([]byte("chunk one,"))
			w.(http.Flusher).Flush()
			w.Write([]byte("chunk two"))
		case k%7 == 0:
			w.Header().Set("Connection", "close")
			w.Write([]byte("bye"))
		default:
			w.Write([]byte(`{"id":"req_x"}`))
		}
	}))
	defer srv.Close()

	res, err := Run(t.Context(), Options{URL: srv.URL + "/whe_x/p?q=1", Conns: 4, Requests: 200, Body: []byte(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 200 || res.Errors != 20 {
		t.Errorf("got %d requests, %d errors; want 200, 20 (every tenth is a 418)", res.Requests, res.Errors)
	}
	if got := n.Load(); got != 200 {
		t.Errorf("server saw %d requests, want 200", got)
	}
	if res.P50 <= 0 || res.P99 < res.P50 || res.Elapsed <= 0 {
		t.Errorf("implausible timings: %+v", res)
	}

	res, err = Run(t.Context(), Options{URL: srv.URL, Conns: 2, Duration: 100 * time.Millisecond, Body: []byte(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests == 0 || res.Elapsed > 2*time.Second {
		t.Errorf("duration-bound run: %+v", res)
	}
}

func TestRunBadTarget(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	for _, url := range []string{addr, "ftp://example.com/", "http:///nohost"} {
		if _, err := Run(t.Context(), Options{URL: url, Conns: 1, Requests: 1}); err == nil {
			t.Errorf("%s: no error", url)
		} else if !strings.HasPrefix(err.Error(), "webload: ") {
			t.Errorf("%s: error %q lacks the package prefix", url, err)
		}
	}
}
