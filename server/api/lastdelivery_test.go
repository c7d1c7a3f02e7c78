package api_test

import "testing"

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
