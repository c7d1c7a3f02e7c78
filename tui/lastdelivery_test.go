package tui

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/server/api/contract"
)

// The list's status column comes from each list item's last_delivery: a
// delivery that another client records (a forwarding client, a moment
// after the capture) shows on the next refresh, and the viewer never
// fetches requests one by one to learn it.
func TestListShowsLastDeliveryFromListItems(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var fetched atomic.Int32
	u, _ := url.Parse(strings.TrimSuffix(e.srv.APIBase(), "/api/v1"))
	rp := httputil.NewSingleHostReverseProxy(u)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "GET" && strings.Contains(r.URL.Path, "/requests/req_") {
			fetched.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	cfg := e.config()
	cfg.Client = apiclient.New(proxy.URL+"/api/v1", e.boot.Secret, nil)

	delivered := e.post("POST", "/hooks/delivered", "application/json", "{}")
	failed := e.post("POST", "/hooks/failed", "application/json", "{}")
	e.post("POST", "/hooks/never", "application/json", "{}")
	ui := e.run(cfg, func(m *Model) { m.refreshEvery = 100 * time.Millisecond })
	ui.waitText("● live")
	ui.keys("shift+tab", "j", "tab")
	ui.waitFor("three requests, none delivered", func(s string) bool {
		return strings.Contains(s, "/hooks/never") && strings.Contains(row(t, s, "/hooks/delivered"), "—")
	})

	status, target, ms := 201, "http://localhost:3000/hooks/delivered", int64(4)
	if _, err := e.client.RecordDelivery(t.Context(), delivered, contract.DeliveryReport{TargetURL: &target,
		ResponseStatus: &status, DurationMS: &ms}); err != nil {
		t.Fatal(err)
	}
	refused := "refused: connection refused"
	if _, err := e.client.RecordDelivery(t.Context(), failed, contract.DeliveryReport{TargetURL: &target,
		Error: &refused, DurationMS: &ms}); err != nil {
		t.Fatal(err)
	}
	s := ui.waitFor("the recorded deliveries", func(s string) bool {
		return strings.Contains(row(t, s, "/hooks/delivered"), "201") && strings.Contains(row(t, s, "/hooks/failed"), "err")
	})
	if l := row(t, s, "/hooks/never"); !strings.Contains(l, "—") {
		t.Errorf("never delivered: %q", l)
	}
	if n := fetched.Load(); n != 0 {
		t.Errorf("the viewer fetched %d requests one by one to learn their deliveries", n)
	}
}
