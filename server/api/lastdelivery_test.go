package api_test

import (
	"testing"
	"time"
)

// Each request list item carries its newest delivery, so a list shows what
// happened to every request without fetching each one; the single request
// carries the same.
func TestListItemsCarryLastDelivery(t *testing.T) {
	e := newEnv(t)
	ep := e.boot.Endpoint.ID
	never := e.insertRequest(ep, "/never", nil)
	twice := e.insertRequest(ep, "/twice", []byte("x"))
	for _, status := range []int{502, 200} {
		if r := e.call("POST", "/requests/"+twice+"/deliveries", map[string]any{
			"target_url": "http://localhost:3000/twice", "response_status": status, "duration_ms": 3}); r.status != 201 {
			t.Fatalf("record delivery: %d %s", r.status, r.body)
		}
	}
	items := e.call("GET", "/endpoints/"+ep+"/requests", nil).json(t)["items"].([]any)
	last := map[string]any{}
	for _, it := range items {
		m := it.(map[string]any)
		v, ok := m["last_delivery"]
		if !ok {
			t.Fatalf("item without last_delivery: %v", m)
		}
		last[m["id"].(string)] = v
	}
	if last[never] != nil {
		t.Errorf("never delivered: last_delivery = %v, want null", last[never])
	}
	d, _ := last[twice].(map[string]any)
	if d["kind"] != "forward" || d["status"] != "delivered" || d["response_status"] != float64(200) || d["created_at"] == nil {
		t.Errorf("last_delivery = %v, want the newest (200, delivered)", last[twice])
	}
	one := e.call("GET", "/requests/"+twice, nil).json(t)
	if got, _ := one["last_delivery"].(map[string]any); got["response_status"] != float64(200) || got["created_at"] != d["created_at"] {
		t.Errorf("GET /requests/{id} last_delivery = %v, want the list's %v", one["last_delivery"], d)
	}
}

// A delivery wakes the waits on its endpoint (so that live lists show it),
// and a wait for new captures reads again and keeps waiting: it answers
// with the capture that arrives next, never early with nothing.
func TestWaitOutlastsDeliveries(t *testing.T) {
	e := newEnv(t)
	ep := e.boot.Endpoint.ID
	old := e.insertRequest(ep, "/old", nil)
	done := make(chan response, 1)
	go func() { done <- e.call("GET", "/endpoints/"+ep+"/requests?wait=20&q=new&after="+old, nil) }()
	waitForWaiters(t, e, 1)
	for _, status := range []int{502, 200} {
		if r := e.call("POST", "/requests/"+old+"/deliveries", map[string]any{
			"target_url": "http://localhost:3000/old", "response_status": status, "duration_ms": 3}); r.status != 201 {
			t.Fatalf("record delivery: %d %s", r.status, r.body)
		}
	}
	// A round trip gives the woken wait time to read again before the
	// capture it waits for is committed.
	if r := e.call("GET", "/requests/"+old, nil); r.status != 200 {
		t.Fatalf("GET /requests/{id}: %d", r.status)
	}
	select {
	case r := <-done:
		t.Fatalf("the wait ended on a delivery: %d %s", r.status, r.body)
	default:
	}
	want := e.insertRequest(ep, "/new", nil)
	select {
	case r := <-done:
		items, _ := r.json(t)["items"].([]any)
		if r.status != 200 || len(items) != 1 || items[0].(map[string]any)["id"] != want {
			t.Fatalf("wait returned %d %s, want the new capture", r.status, r.body)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the wait did not wake on the capture after the deliveries")
	}
}
