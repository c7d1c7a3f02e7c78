package store

import (
	"strings"
	"testing"
	"time"
)

// A request list item carries its newest delivery, whichever kind, and
// nothing for a request never delivered; the single request agrees.
func TestLastDeliveryOnListItems(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	p := mustProject(t, s, "p", "free")
	e, _ := s.CreateEndpoint(ctx, p.ID, "e", nil)
	ids := insertRequests(t, s, e.ID, "/never", "/twice", "/failed")
	ok, teapot := 204, 418
	errText := "refused"
	for _, d := range []struct {
		id string
		nd NewDelivery
	}{
		{ids[1], NewDelivery{Kind: DeliveryForward, TargetURL: "http://t/", ResponseStatus: &teapot}},
		{ids[2], NewDelivery{Kind: DeliveryForward, TargetURL: "http://t/", Error: &errText}},
		{ids[1], NewDelivery{Kind: DeliveryReplay, TargetURL: "http://t/", ResponseStatus: &ok}},
	} {
		if _, err := s.AddDelivery(ctx, p.ID, d.id, d.nd); err != nil {
			t.Fatal(err)
		}
	}
	l, err := s.Requests(ctx, e.ID, RequestFilter{}, Page{})
	if err != nil || len(l.Items) != 3 {
		t.Fatalf("Requests = %+v, %v", l, err)
	}
	byID := map[string]*DeliverySummary{}
	for _, it := range l.Items {
		byID[it.ID] = it.LastDelivery
	}
	if byID[ids[0]] != nil {
		t.Errorf("never delivered: %+v", byID[ids[0]])
	}
	if d := byID[ids[1]]; d == nil || d.Kind != DeliveryReplay || d.Status != DeliveryDelivered ||
		d.ResponseStatus == nil || *d.ResponseStatus != 204 || time.Since(d.CreatedAt) > time.Minute {
		t.Errorf("newest of two = %+v, want the 204 replay", d)
	}
	if d := byID[ids[2]]; d == nil || d.Kind != DeliveryForward || d.Status != DeliveryFailed || d.ResponseStatus != nil {
		t.Errorf("failed = %+v", d)
	}
	r, err := s.Request(ctx, p.ID, ids[1])
	if d := r.LastDelivery; err != nil || d == nil || d.Kind != DeliveryReplay || *d.ResponseStatus != 204 ||
		!d.CreatedAt.Equal(byID[ids[1]].CreatedAt) {
		t.Errorf("Request.LastDelivery = %+v, %v", r.LastDelivery, err)
	}
}

// The newest delivery is found by index, one probe per listed request,
// never by scanning deliveries or requests.
func TestLastDeliveryQueryPlan(t *testing.T) {
	sqliteOnly(t, "SQLite's EXPLAIN QUERY PLAN; PostgreSQL plans by table statistics")
	s := newStore(t)
	rows, err := s.rdb.QueryContext(t.Context(), `EXPLAIN QUERY PLAN SELECT requests.seq, requests.id, `+
		requestSummaryCols+` FROM requests `+lastDeliveryJoin+
		` WHERE requests.endpoint_id = ? ORDER BY requests.seq DESC LIMIT 21`, "whe_x")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	joined := strings.Join(plan, "\n")
	t.Logf("plan:\n%s", joined)
	for _, want := range []string{"requests_endpoint_seq", "deliveries_request", "INTEGER PRIMARY KEY"} {
		if !strings.Contains(joined, want) {
			t.Errorf("plan does not use %s:\n%s", want, joined)
		}
	}
	for _, bad := range []string{"SCAN deliveries", "SCAN requests", "TEMP B-TREE"} {
		if strings.Contains(joined, bad) {
			t.Errorf("plan has %s:\n%s", bad, joined)
		}
	}
}

// Recording a delivery wakes the endpoint's watchers, so that live lists
// show the new last delivery.
func TestAddDeliveryWakesEndpoint(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	p := mustProject(t, s, "p", "free")
	e, _ := s.CreateEndpoint(ctx, p.ID, "e", nil)
	ids := insertRequests(t, s, e.ID, "/hook")
	status := 200
	changed := s.Watch(e.ID)
	if _, err := s.AddDelivery(ctx, p.ID, ids[0], NewDelivery{Kind: DeliveryForward, TargetURL: "http://t/",
		ResponseStatus: &status}); err != nil {
		t.Fatal(err)
	}
	// The writer wakes watchers just after it answers the caller.
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("a recorded delivery did not wake the endpoint's watchers")
	}
}
