package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/storetest"
)

// collection is one kind of capture list, for tests that run on both.
type collection struct {
	name string
	// list is the path of the list; add stores a capture tagged tag (its
	// subject or path) and returns its id; only is a filter that matches
	// the captures tagged tag alone.
	list func(e *env) string
	add  func(e *env, tag string) string
	only func(tag string) string
	// deleteOne and purge are the API's routes that delete.
	deleteOne, purge func(e *env, id string) string
}

var collections = []collection{
	{
		name:      "messages",
		list:      func(e *env) string { return "/inboxes/" + e.boot.Inbox.ID + "/messages" },
		add:       func(e *env, tag string) string { return insertMessage(e.t, e.st, e.boot.Inbox.ID, tag) },
		only:      func(tag string) string { return "subject=" + tag },
		deleteOne: func(_ *env, id string) string { return "/messages/" + id },
		purge:     func(e *env, _ string) string { return "/inboxes/" + e.boot.Inbox.ID + "/messages" },
	},
	{
		name:      "requests",
		list:      func(e *env) string { return "/endpoints/" + e.boot.Endpoint.ID + "/requests" },
		add:       func(e *env, tag string) string { return e.insertRequest(e.boot.Endpoint.ID, "/"+tag, nil) },
		only:      func(tag string) string { return "path=/" + tag },
		deleteOne: func(_ *env, id string) string { return "/requests/" + id },
		purge:     func(e *env, _ string) string { return "/endpoints/" + e.boot.Endpoint.ID + "/requests" },
	},
}

func insertMessage(t *testing.T, st *store.Store, inboxID, subject string) string {
	t.Helper()
	id, err := st.InsertMessage(t.Context(), &store.NewMessage{InboxID: inboxID, ReceivedAt: time.Now(),
		EnvelopeFrom: "app@app.test", EnvelopeTo: []string{"user@x.test"}, Subject: subject,
		Raw: []byte("Subject: " + subject + "\r\n\r\nhi\r\n")})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A wait whose after= cursor is deleted, purged or pruned while it holds
// answers invalid_cursor at once, before any capture comes: it never
// answers an empty page for a cursor that names nothing, after which the
// client's next call would be refused anyway. The wait is long; without
// the wake it would end with 200 and no items, which the test refuses.
func TestWaitRefusesItsCursorDeletedWhileHeld(t *testing.T) {
	removers := []struct {
		name   string
		remove func(e *env, c collection, id string)
	}{
		{"delete", func(e *env, c collection, id string) {
			if r := e.call("DELETE", c.deleteOne(e, id), nil); r.status != 204 {
				e.t.Fatalf("delete: %d %s", r.status, r.body)
			}
		}},
		{"purge", func(e *env, c collection, id string) {
			if r := e.call("DELETE", c.purge(e, id), nil); r.status != 204 {
				e.t.Fatalf("purge: %d %s", r.status, r.body)
			}
		}},
		{"prune", func(e *env, _ collection, _ string) {
			// Past every plan's retention: the pruner takes everything.
			if n, err := e.st.Prune(e.t.Context(), time.Now().Add(365*24*time.Hour)); err != nil || n == 0 {
				e.t.Fatalf("prune: %d, %v", n, err)
			}
		}},
	}
	for _, c := range collections {
		for _, rm := range removers {
			t.Run(c.name+"/"+rm.name, func(t *testing.T) {
				e := newEnv(t)
				cursor := c.add(e, "first")
				done := make(chan response, 1)
				go func() { done <- e.call("GET", c.list(e)+"?wait=10&after="+cursor, nil) }()
				waitForWaiters(t, e, 1)
				rm.remove(e, c, cursor)
				r := <-done
				if r.status != 400 || r.errCode(t) != "invalid_cursor" {
					t.Fatalf("the held wait answered %d %s, want 400 invalid_cursor", r.status, r.body)
				}
			})
		}
	}
}

// Deleting a capture other than a wait's cursor wakes the wait too; it
// reads again, keeps waiting, and answers with the capture that comes
// next, never early with nothing.
func TestWaitOutlastsDeletesOfOtherCaptures(t *testing.T) {
	for _, c := range collections {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			other := c.add(e, "other")
			cursor := c.add(e, "cursor")
			done := make(chan response, 1)
			go func() { done <- e.call("GET", c.list(e)+"?wait=20&"+c.only("next")+"&after="+cursor, nil) }()
			waitForWaiters(t, e, 1)
			if r := e.call("DELETE", c.deleteOne(e, other), nil); r.status != 204 {
				t.Fatalf("delete: %d %s", r.status, r.body)
			}
			// A round trip gives the woken wait time to read again before
			// the capture it waits for is committed.
			if r := e.call("GET", c.list(e), nil); r.status != 200 {
				t.Fatalf("list: %d %s", r.status, r.body)
			}
			select {
			case r := <-done:
				t.Fatalf("the wait ended on a delete of another capture: %d %s", r.status, r.body)
			default:
			}
			want := c.add(e, "next")
			r := <-done
			items, _ := r.json(t)["items"].([]any)
			if r.status != 200 || len(items) != 1 || items[0].(map[string]any)["id"] != want {
				t.Fatalf("the wait answered %d %s, want %s", r.status, r.body, want)
			}
		})
	}
}

// On PostgreSQL, a delete through one replica wakes a wait held by another
// (through the cross-replica wake-up captures use), which answers
// invalid_cursor at once rather than at its deadline or the next capture.
func TestWaitOnAReplicaRefusesItsCursorDeletedThroughAnother(t *testing.T) {
	url := storetest.PostgresDatabase(t)
	var boot store.Bootstrap
	replica := func() *env {
		st, err := store.Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		if boot.Secret == "" {
			if boot, err = st.EnsureBootstrap(t.Context()); err != nil {
				t.Fatal(err)
			}
			if _, err := st.SetPlan(t.Context(), boot.Project.ID, "team"); err != nil {
				t.Fatal(err)
			}
		}
		return apiOver(t, st, boot)
	}
	waiting, deleting := replica(), replica()
	for _, c := range collections {
		for _, remove := range []func(*env, string) string{c.deleteOne, c.purge} {
			cursor := c.add(waiting, "first")
			done := make(chan response, 1)
			go func() { done <- waiting.call("GET", c.list(waiting)+"?wait=10&after="+cursor, nil) }()
			waitForWaiters(t, waiting, 1)
			if r := deleting.call("DELETE", remove(deleting, cursor), nil); r.status != 204 {
				t.Fatalf("delete through the other replica: %d %s", r.status, r.body)
			}
			r := <-done
			if r.status != 400 || r.errCode(t) != "invalid_cursor" {
				t.Fatalf("%s: the wait on the first replica answered %d %s, want 400 invalid_cursor", c.name, r.status, r.body)
			}
		}
	}
}
