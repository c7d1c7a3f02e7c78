package api_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/capturedev/capture/server/api"
	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/server/openapi"
	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/storetest"
)

// TestDocumentedParametersAreAccepted sends every query parameter the
// OpenAPI document gives a GET route, one at a time, and wants a 200: the
// validator refuses an undocumented parameter that succeeds, and this is
// the other half, a documented one the server refuses.
func TestDocumentedParametersAreAccepted(t *testing.T) {
	e := newEnv(t)
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Document)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := e.st.InsertMessage(t.Context(), &store.NewMessage{InboxID: e.boot.Inbox.ID, ReceivedAt: time.Now(),
		EnvelopeFrom: "app@app.test", EnvelopeTo: []string{"user@x.test"}, Subject: "hi", Raw: []byte("Subject: hi\r\n\r\nhi\r\n")})
	if err != nil {
		t.Fatal(err)
	}
	req := e.insertRequest(e.boot.Endpoint.ID, "/ci/1", []byte("{}"))
	// A path's {id} by the collection it names; cursors name that
	// collection's newest item, so a page before or after it is valid.
	ids := map[string]string{"inboxes": e.boot.Inbox.ID, "endpoints": e.boot.Endpoint.ID, "messages": msg, "requests": req}
	cursors := map[string]string{"/inboxes": e.boot.Inbox.ID, "/endpoints": e.boot.Endpoint.ID,
		"/inboxes/{id}/messages": msg, "/endpoints/{id}/requests": req}
	values := map[string]string{"limit": "5", "since": "2025-05-04T09:30:12.345Z", "wait": "1", "to": "user",
		"from": "app", "subject": "hi", "q": "hi", "method": "post", "path": "/ci/", "match": "https", "kind": "verify"}

	checked := 0
	for path, item := range doc.Paths.Map() {
		op := item.Get
		if op == nil {
			continue
		}
		target := path
		for collection, id := range ids {
			target = strings.Replace(target, collection+"/{id}", collection+"/"+id, 1)
		}
		if strings.Contains(target, "{") {
			continue // attachments and the schema take no query parameters
		}
		for _, p := range op.Parameters {
			if p.Value.In != openapi3.ParameterInQuery {
				continue
			}
			name := p.Value.Name
			value, ok := values[name]
			if name == "before" || name == "after" {
				value, ok = cursors[path]
			}
			if !ok {
				t.Errorf("GET %s: no test value for the documented parameter %q", path, name)
				continue
			}
			checked++
			r := e.call("GET", target+"?"+url.Values{name: {value}}.Encode(), nil)
			if r.status != 200 {
				t.Errorf("GET %s?%s=%s: %d %s", path, name, value, r.status, r.body)
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked %d documented parameters; the document lists more", checked)
	}
}

// The store's vocabularies are written to the wire as they are, so they
// must be the contract's (and the document's) words.
func TestStoreWordsAreTheContracts(t *testing.T) {
	if !slices.Equal(store.LinkKinds, contract.LinkKinds) {
		t.Errorf("store link kinds %v, contract %v", store.LinkKinds, contract.LinkKinds)
	}
	for _, pair := range [][2]string{
		{store.DeliveryReplay, contract.KindReplay},
		{store.DeliveryForward, contract.KindForward},
		{store.DeliveryDelivered, contract.StatusDelivered},
		{store.DeliveryFailed, contract.StatusFailed},
	} {
		if pair[0] != pair[1] {
			t.Errorf("store writes %q where the contract says %q", pair[0], pair[1])
		}
	}
}

// Config.Refused hears the code of every error answer, the router's own
// (no route, a method the route does not take) included.
func TestRefusedHearsEveryError(t *testing.T) {
	st := storetest.Store(t)
	boot, err := st.EnsureBootstrap(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var heard []string
	a := api.New(st, api.Config{Logger: slog.New(slog.DiscardHandler), Refused: func(code string) {
		mu.Lock()
		heard = append(heard, code)
		mu.Unlock()
	}})
	srv := httptest.NewServer(a)
	defer srv.Close()
	for _, c := range []struct{ method, path, key string }{
		{"GET", "/api/v1/me", ""},
		{"GET", "/api/v1/nope", boot.Secret},
		{"PUT", "/api/v1/me", boot.Secret},
		{"GET", "/api/v1/me?x=1", boot.Secret},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), c.method, srv.URL+c.path, nil)
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"unauthorized", "not_found", "method_not_allowed", "invalid_parameter"}
	if !slices.Equal(heard, want) {
		t.Errorf("Refused heard %v, want %v", heard, want)
	}
}
