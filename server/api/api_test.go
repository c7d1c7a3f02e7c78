package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capturedev/capture/server/api"
	"github.com/capturedev/capture/server/openapi/openapitest"
	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/storetest"
)

type env struct {
	t      *testing.T
	st     *store.Store
	api    *api.API
	srv    *httptest.Server
	v      *openapitest.Validator
	boot   store.Bootstrap
	key    string
	client *http.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st := storetest.Store(t)
	boot, err := st.EnsureBootstrap(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Tests make many calls quickly; the rate limit has its own test.
	if _, err := st.SetPlan(t.Context(), boot.Project.ID, "team"); err != nil {
		t.Fatal(err)
	}
	return apiOver(t, st, boot)
}

// apiOver serves the API over st, whose bootstrap is boot; the env closes
// both.
func apiOver(t *testing.T, st *store.Store, boot store.Bootstrap) *env {
	t.Helper()
	a := api.New(st, api.Config{SMTPHost: "localhost", StartTLSPorts: []int{2587}, TLSPorts: []int{2465},
		CaptureBase: "http://127.0.0.1:7781", Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(a)
	v, err := openapitest.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Close()
		st.Close()
	})
	return &env{t: t, st: st, api: a, srv: srv, v: v, boot: boot, key: boot.Secret, client: srv.Client()}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

func (r response) errCode(t *testing.T) string {
	t.Helper()
	e, _ := r.json(t)["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// call sends a request with the env's key and checks the exchange against
// the OpenAPI document.
func (e *env) call(method, path string, body any) response {
	return e.callKey(e.key, method, path, body)
}

func (e *env) callKey(key, method, path string, body any) response {
	e.t.Helper()
	return e.callCtx(e.t.Context(), key, method, path, body)
}

func (e *env) callCtx(ctx context.Context, key, method, path string, body any) response {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.srv.URL+"/api/v1"+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := e.v.Check(req, resp.StatusCode, resp.Header, b); err != nil {
		e.t.Errorf("%s %s: response does not match the OpenAPI document: %v\nbody: %s", method, path, err, b)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func (e *env) insertRequest(endpointID, path string, body []byte) string {
	e.t.Helper()
	id, err := e.st.InsertRequest(e.t.Context(), &store.NewRequest{EndpointID: endpointID, ReceivedAt: time.Now(),
		Method: "POST", Path: path, Query: "a=1&b=%20", ContentType: "application/json", RemoteAddr: "127.0.0.1:5555",
		Headers: []store.Header{{Name: "Content-Type", Values: []string{"application/json"}},
			{Name: "X-Signature", Values: []string{"sig"}}, {Name: "Connection", Values: []string{"keep-alive"}}},
		Body: body})
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

func TestAuthentication(t *testing.T) {
	e := newEnv(t)
	k, _, _ := e.st.CreateKey(t.Context(), e.boot.Project.ID)
	e.st.RevokeKey(t.Context(), k.ID)
	for name, header := range map[string]string{
		"missing":   "",
		"malformed": "Token abc",
		"unknown":   "Bearer cap_unknownunknownunknownunknown1234",
		"not cap_":  "Bearer abc",
	} {
		req, _ := http.NewRequest("GET", e.srv.URL+"/api/v1/me", nil)
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		req.AddCookie(&http.Cookie{Name: "session", Value: "a web UI session"})
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != "Bearer" ||
			!strings.Contains(string(b), `"unauthorized"`) {
			t.Errorf("%s: %d %v %s", name, resp.StatusCode, resp.Header, b)
		}
		if err := e.v.Check(req, resp.StatusCode, resp.Header, b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	r := e.call("GET", "/me", nil)
	if r.status != 200 {
		t.Fatalf("me: %d %s", r.status, r.body)
	}
	me := r.json(t)
	if me["project"].(map[string]any)["id"] != e.boot.Project.ID || me["plan"].(map[string]any)["name"] != "team" {
		t.Errorf("me: %s", r.body)
	}
	// The schema needs no key.
	resp, err := e.client.Get(e.srv.URL + "/api/v1/schema/")
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("schema: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestOtherProjectIsNotFound(t *testing.T) {
	e := newEnv(t)
	other, _ := e.st.CreateProject(t.Context(), "other", "free")
	_, otherKey, _ := e.st.CreateKey(t.Context(), other.ID)
	reqID := e.insertRequest(e.boot.Endpoint.ID, "/x", []byte("{}"))
	for _, path := range []string{
		"/endpoints/" + e.boot.Endpoint.ID + "/requests",
		"/inboxes/" + e.boot.Inbox.ID + "/messages",
		"/requests/" + reqID,
	} {
		r := e.callKey(otherKey, "GET", path, nil)
		if r.status != 404 || r.errCode(t) != "not_found" {
			t.Errorf("%s: %d %s", path, r.status, r.body)
		}
	}
	if r := e.callKey(otherKey, "DELETE", "/requests/"+reqID, nil); r.status != 404 {
		t.Errorf("delete: %d", r.status)
	}
	if _, err := e.st.Request(t.Context(), e.boot.Project.ID, reqID); err != nil {
		t.Errorf("another project's delete removed it: %v", err)
	}
	l := e.callKey(otherKey, "GET", "/endpoints", nil).json(t)
	if items := l["items"].([]any); len(items) != 0 {
		t.Errorf("other project sees endpoints: %v", items)
	}
}

func TestQueryValidation(t *testing.T) {
	e := newEnv(t)
	ep := "/endpoints/" + e.boot.Endpoint.ID + "/requests"
	cases := []struct{ query, field, code string }{
		{"?subjet=x", "subjet", "invalid_parameter"},
		{"?limit=0", "limit", "invalid_parameter"},
		{"?limit=101", "limit", "invalid_parameter"},
		{"?limit=ten", "limit", "invalid_parameter"},
		{"?limit=1&limit=2", "limit", "invalid_parameter"},
		{"?wait=31", "wait", "invalid_parameter"},
		{"?wait=-1", "wait", "invalid_parameter"},
		{"?since=2026-01-02T15:04:05", "since", "invalid_parameter"},
		{"?since=yesterday", "since", "invalid_parameter"},
		// RFC 3339's offset hours stop at 23 and its fraction follows a
		// period, though Go's time.Parse takes both.
		{"?since=2026-01-02T15:04:05%2B24:00", "since", "invalid_parameter"},
		{"?since=2026-01-02T15:04:05+24:00", "since", "invalid_parameter"},
		{"?since=2026-01-02T15:04:05,123Z", "since", "invalid_parameter"},
		{"?before=req_a&after=req_b", "before", "invalid_parameter"},
	}
	for _, c := range cases {
		r := e.call("GET", ep+c.query, nil)
		if r.status != 400 || r.errCode(t) != c.code {
			t.Errorf("%s: %d %s", c.query, r.status, r.body)
			continue
		}
		fields := r.json(t)["error"].(map[string]any)["fields"].(map[string]any)
		if _, ok := fields[c.field]; !ok {
			t.Errorf("%s: fields %v do not name %s", c.query, fields, c.field)
		}
	}
	// A route that takes no parameter says so, rather than list none.
	if r := e.call("GET", "/me?x=1", nil); r.status != 400 || !strings.Contains(string(r.body), "this route takes none") {
		t.Errorf("/me?x=1: %d %s", r.status, r.body)
	}
	// Every mistake is named in one answer.
	r := e.call("GET", ep+"?subjet=x&limit=ten&since=yesterday", nil)
	if fields, _ := r.json(t)["error"].(map[string]any)["fields"].(map[string]any); len(fields) != 3 {
		t.Errorf("three mistakes: fields %v", fields)
	}
	// Thousands of unknown names are each named, but only the first ten
	// (in order) repeat what the route takes.
	var many strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&many, "&p%04d=1", i)
	}
	r = e.call("GET", ep+"?limit=ten"+many.String(), nil)
	fields, _ := r.json(t)["error"].(map[string]any)["fields"].(map[string]any)
	if len(fields) != 3001 || !strings.Contains(fields["p0009"].(string), "allowed: ") ||
		fields["p0010"] != "unknown parameter" || fields["p2999"] != "unknown parameter" {
		t.Errorf("3000 unknown: %d fields, p0009 %q, p0010 %q", len(fields), fields["p0009"], fields["p0010"])
	}
	if len(r.body) > 4*many.Len() {
		t.Errorf("3000 unknown names in a %d-byte query were answered in %d bytes", many.Len(), len(r.body))
	}
	// A cursor malformed, unknown, of another collection or missing.
	for _, q := range []string{"?before=req_nope", "?after=garbage", "?after=" + e.boot.Endpoint.ID, "?before=", "?after="} {
		if r := e.call("GET", ep+q, nil); r.status != 400 || r.errCode(t) != "invalid_cursor" {
			t.Errorf("%s: %d %s", q, r.status, r.body)
		}
	}
	if r := e.call("GET", "/me?x=1", nil); r.status != 400 {
		t.Errorf("me with a parameter: %d", r.status)
	}
	if r := e.call("GET", "/inboxes?wait=1", nil); r.status != 400 {
		t.Errorf("inboxes with wait: %d", r.status)
	}
	if r := e.call("PUT", "/me", nil); r.status != 405 || r.errCode(t) != "method_not_allowed" {
		t.Errorf("405: %d %s", r.status, r.body)
	}
	// Undocumented by definition, so checked without the validator.
	req, _ := http.NewRequest("GET", e.srv.URL+"/api/v1/nope", nil)
	req.Header.Set("Authorization", "Bearer "+e.key)
	if resp, err := e.client.Do(req); err != nil || resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("unknown route: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// A good since with a zone offset works.
	if r := e.call("GET", ep+"?since=2026-01-02T15:04:05%2B02:00", nil); r.status != 200 {
		t.Errorf("since with offset: %d %s", r.status, r.body)
	}
	// An unencoded "+" arrives as a space; the offset is still clear.
	req, _ = http.NewRequest("GET", e.srv.URL+"/api/v1"+ep+"?since=2026-01-02T15:04:05+02:00", nil)
	req.Header.Set("Authorization", "Bearer "+e.key)
	if resp, err := e.client.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("since with an unencoded +: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

func TestListsAndCursors(t *testing.T) {
	e := newEnv(t)
	for i := range 4 {
		if _, err := e.st.CreateInbox(t.Context(), e.boot.Project.ID, fmt.Sprint("in", i)); err != nil {
			t.Fatal(err)
		}
	}
	r := e.call("GET", "/inboxes?limit=2", nil).json(t)
	items := r["items"].([]any)
	if len(items) != 2 || r["next"] == nil {
		t.Fatalf("page 1: %v", r)
	}
	first := items[0].(map[string]any)
	if first["name"] != "in3" || first["smtp"].(map[string]any)["username"] != first["id"] {
		t.Errorf("newest first / smtp username: %v", first)
	}
	r = e.call("GET", "/inboxes?limit=2&before="+r["next"].(string), nil).json(t)
	r = e.call("GET", "/inboxes?limit=2&before="+r["next"].(string), nil).json(t)
	if items := r["items"].([]any); len(items) != 1 || r["next"] != nil {
		t.Fatalf("last page: %v", r)
	}
	eps := e.call("GET", "/endpoints", nil).json(t)["items"].([]any)
	if len(eps) != 1 || eps[0].(map[string]any)["capture_url"] != "http://127.0.0.1:7781/"+e.boot.Endpoint.ID {
		t.Errorf("endpoints: %v", eps)
	}

	ep := "/endpoints/" + e.boot.Endpoint.ID + "/requests"
	var ids []string
	for i := range 5 {
		ids = append(ids, e.insertRequest(e.boot.Endpoint.ID, fmt.Sprintf("/ci/%d", i), []byte("{}")))
	}
	r = e.call("GET", ep+"?after="+ids[0]+"&limit=2", nil).json(t)
	got := r["items"].([]any)
	if len(got) != 2 || got[0].(map[string]any)["id"] != ids[2] || got[1].(map[string]any)["id"] != ids[1] || r["next"] != ids[2] {
		t.Errorf("after page: %v", r)
	}
	r = e.call("GET", ep+"?path=/ci/3", nil).json(t)
	if got := r["items"].([]any); len(got) != 1 || got[0].(map[string]any)["path"] != "/ci/3" {
		t.Errorf("path filter: %v", r)
	}
}

func TestWaitWakesOnCapture(t *testing.T) {
	e := newEnv(t)
	ep := "/endpoints/" + e.boot.Endpoint.ID + "/requests"
	base := e.insertRequest(e.boot.Endpoint.ID, "/old", nil)

	done := make(chan response, 1)
	start := time.Now()
	go func() { done <- e.call("GET", ep+"?wait=20&path=/ci/7/&after="+base, nil) }()
	// A capture that does not match the filter must not end the wait.
	waitForWaiters(t, e, 1)
	e.insertRequest(e.boot.Endpoint.ID, "/other", nil)
	want := e.insertRequest(e.boot.Endpoint.ID, "/ci/7/hook", []byte(`{"ok":true}`))
	select {
	case r := <-done:
		items := r.json(t)["items"].([]any)
		if r.status != 200 || len(items) != 1 || items[0].(map[string]any)["id"] != want {
			t.Fatalf("wait returned %d %s", r.status, r.body)
		}
		t.Logf("wait returned %s after the call started", time.Since(start))
	case <-time.After(15 * time.Second):
		t.Fatal("wait did not wake on a matching capture")
	}

	// A wait that times out is a 200 with no items.
	r := e.call("GET", ep+"?wait=1&path=/never", nil)
	if m := r.json(t); r.status != 200 || len(m["items"].([]any)) != 0 || m["next"] != nil {
		t.Fatalf("timeout: %d %s", r.status, r.body)
	}
	// Existing results return at once whatever the wait.
	r = e.call("GET", ep+"?wait=30", nil)
	if len(r.json(t)["items"].([]any)) == 0 {
		t.Fatal("non-empty result held")
	}
}

// waitForWaiters polls the number of held waits: the test needs the server
// to be holding before it sends the capture that should wake it.
func waitForWaiters(t *testing.T, e *env, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if e.api.ActiveWaits(e.boot.Project.ID) >= n {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("fewer than %d waits held", n)
}

// A wait held by a key that is then revoked, by an admin command in
// another process, ends as unauthorized: when a capture wakes it, and
// without one, at once, giving its slot back. Waits of other keys go on.
func TestWaitEndsWhenItsKeyIsRevoked(t *testing.T) {
	e := newEnv(t)
	admin := storetest.OpenAgain(t, e.st)
	ep := "/endpoints/" + e.boot.Endpoint.ID + "/requests?wait=30&path=/after-revoke"
	wantUnauthorized := func(what string, r response) {
		t.Helper()
		if r.status != 401 || r.errCode(t) != "unauthorized" || r.header.Get("WWW-Authenticate") != "Bearer" {
			t.Errorf("%s: %d %v %s", what, r.status, r.header, r.body)
		}
	}
	waitWith := func(key, path string) <-chan response {
		done := make(chan response, 1)
		go func() { done <- e.callKey(key, "GET", path, nil) }()
		return done
	}
	answer := func(what string, done <-chan response) response {
		t.Helper()
		select {
		case r := <-done:
			return r
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: the wait did not end", what)
			return response{}
		}
	}
	revoke := func(keyID string) {
		t.Helper()
		if _, err := admin.RevokeKey(t.Context(), keyID); err != nil {
			t.Fatal(err)
		}
	}

	// A capture arriving after the revocation is not handed out.
	k, secret, err := e.st.CreateKey(t.Context(), e.boot.Project.ID)
	if err != nil {
		t.Fatal(err)
	}
	done := waitWith(secret, ep)
	waitForWaiters(t, e, 1)
	revoke(k.ID)
	e.insertRequest(e.boot.Endpoint.ID, "/after-revoke", []byte("secret"))
	r := answer("capture after revocation", done)
	wantUnauthorized("capture after revocation", r)
	if strings.Contains(string(r.body), "after-revoke") {
		t.Errorf("the revoked key's wait handed out the capture: %s", r.body)
	}

	// Without a capture, and beside a wait of another key.
	path := "/endpoints/" + e.boot.Endpoint.ID + "/requests?wait=30&path=/later"
	other := waitWith(e.key, path)
	waitForWaiters(t, e, 1)
	k, secret, err = e.st.CreateKey(t.Context(), e.boot.Project.ID)
	if err != nil {
		t.Fatal(err)
	}
	done = waitWith(secret, path)
	waitForWaiters(t, e, 2)
	revoke(k.ID)
	wantUnauthorized("no capture", answer("no capture", done))
	if n := e.api.ActiveWaits(e.boot.Project.ID); n != 1 {
		t.Errorf("%d waits held once the revoked key's ended, want the other key's only", n)
	}
	want := e.insertRequest(e.boot.Endpoint.ID, "/later", nil)
	if r := answer("the other key", other); r.status != 200 || !strings.Contains(string(r.body), want) {
		t.Errorf("the other key's wait: %d %s", r.status, r.body)
	}
}

func TestConcurrentWaitLimit(t *testing.T) {
	e := newEnv(t)
	ep := "/endpoints/" + e.boot.Endpoint.ID + "/requests?wait=30&path=/none"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	cancels := make([]context.CancelFunc, 4)
	for i := range 4 {
		cctx, c := context.WithCancel(ctx)
		cancels[i] = c
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(cctx, "GET", e.srv.URL+"/api/v1"+ep, nil)
			req.Header.Set("Authorization", "Bearer "+e.key)
			if resp, err := e.client.Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	waitForWaiters(t, e, 4)
	r := e.call("GET", ep, nil)
	if r.status != 429 || r.errCode(t) != "too_many_waits" || r.header.Get("Retry-After") != "1" {
		t.Fatalf("fifth wait: %d %v %s", r.status, r.header, r.body)
	}
	// A call without wait is not a wait and still works.
	if r := e.call("GET", "/endpoints/"+e.boot.Endpoint.ID+"/requests", nil); r.status != 200 {
		t.Fatalf("plain list during waits: %d", r.status)
	}
	// A client that disconnects frees its slot.
	cancels[0]()
	deadline := time.Now().Add(5 * time.Second)
	for e.api.ActiveWaits(e.boot.Project.ID) > 3 {
		if time.Now().After(deadline) {
			t.Fatal("slot not freed after disconnect")
		}
		time.Sleep(2 * time.Millisecond)
	}
	r = e.call("GET", "/endpoints/"+e.boot.Endpoint.ID+"/requests?wait=1&path=/none", nil)
	if r.status != 200 {
		t.Fatalf("wait after a slot was freed: %d %s", r.status, r.body)
	}
	cancel()
	wg.Wait()
}

func TestRateLimit(t *testing.T) {
	e := newEnv(t)
	e.st.SetPlan(t.Context(), e.boot.Project.ID, "free") // 50/s, burst 100
	// 300 calls sent at once exceed a burst of 100 however slow the machine:
	// refilling 200 tokens at 50/s would take four seconds. The refusal
	// checked is one of theirs: calls made after them could find the
	// bucket refilled on a busy machine.
	var mu sync.Mutex
	limited := 0
	var first response
	var wg sync.WaitGroup
	for range 300 {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", e.srv.URL+"/api/v1/me", nil)
			req.Header.Set("Authorization", "Bearer "+e.key)
			resp, err := e.client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 429 {
				return
			}
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Error(err)
				return
			}
			if err := e.v.Check(req, resp.StatusCode, resp.Header, b); err != nil {
				t.Errorf("429 does not match the OpenAPI document: %v\nbody: %s", err, b)
			}
			mu.Lock()
			defer mu.Unlock()
			if limited++; limited == 1 {
				first = response{status: resp.StatusCode, header: resp.Header, body: b}
			}
		})
	}
	wg.Wait()
	if limited == 0 {
		t.Fatal("300 calls at once were never limited on the free plan")
	}
	if first.errCode(t) != "rate_limited" || first.header.Get("Retry-After") == "" {
		t.Fatalf("429: %v %s", first.header, first.body)
	}
}

func TestMessageRoutes(t *testing.T) {
	e := newEnv(t)
	text, html := "Confirm: https://app.test/c?t=abc", `<a href="https://app.test/c?t=abc">Confirm</a>`
	linkText := "Confirm"
	id, err := e.st.InsertMessage(t.Context(), &store.NewMessage{
		InboxID: e.boot.Inbox.ID, ReceivedAt: time.Now(), EnvelopeFrom: "app@app.test", EnvelopeTo: []string{"user@x.test"},
		From: &store.Address{Name: "App", Address: "app@app.test"}, To: []store.Address{{Address: "user@x.test"}},
		Subject: "Confirm your account", Text: &text, HTML: &html,
		Headers: []store.Header{{Name: "Subject", Values: []string{"Confirm your account"}}, {Name: "Received", Values: []string{"a"}}, {Name: "Received", Values: []string{"b"}}},
		Links: []store.Link{{URL: "https://app.test/c?t=abc", Text: &linkText, Origin: "https://app.test", Kind: store.LinkVerify},
			{URL: "https://other.test/", Origin: "https://other.test"},
			{URL: "https://app.test/Unsubscribe", Origin: "https://app.test", Kind: store.LinkUnsubscribe}},
		LinksTruncated: true,
		Codes:          []store.Code{{Value: "482915", Context: "Your code is 482-915."}, {Value: "ZX81", Context: "or ZX81"}},
		Attachments: []store.NewAttachment{{Filename: "r.pdf", ContentType: "application/pdf", Data: []byte("%PDF-1.4")},
			{ContentType: "text/calendar; method=REQUEST", Data: []byte("BEGIN:VCALENDAR")}},
		Raw: []byte("Subject: Confirm your account\r\n\r\nhi\r\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	inbox := "/inboxes/" + e.boot.Inbox.ID + "/messages"
	l := e.call("GET", inbox+"?to=USER@&subject=confirm", nil).json(t)
	if items := l["items"].([]any); len(items) != 1 {
		t.Fatalf("filtered list: %v", l)
	}
	detail := e.call("GET", "/messages/"+id, nil)
	m := detail.json(t)
	headers := m["headers"].(map[string]any)
	if len(headers["Received"].([]any)) != 2 || m["body"].(map[string]any)["text"] != text {
		t.Errorf("message: %v", m)
	}
	if want := `"links_truncated":true,"codes":[{"value":"482915","context":"Your code is 482-915."},{"value":"ZX81","context":"or ZX81"}]`; !bytes.Contains(detail.body, []byte(want)) {
		t.Errorf("message %s\nwant %s", detail.body, want)
	}
	// Every link has its kind; one stored without is other.
	var kinds []string
	for _, l := range m["links"].([]any) {
		kinds = append(kinds, l.(map[string]any)["kind"].(string))
	}
	if strings.Join(kinds, " ") != "verify other unsubscribe" {
		t.Errorf("link kinds: %v", kinds)
	}
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"", []string{"https://app.test/c?t=abc", "https://other.test/", "https://app.test/Unsubscribe"}},
		{"?match=T=ABC", []string{"https://app.test/c?t=abc"}},
		{"?match=unsubscribe", []string{"https://app.test/Unsubscribe"}},
		{"?kind=verify", []string{"https://app.test/c?t=abc"}},
		{"?kind=other", []string{"https://other.test/"}},
		{"?kind=reset", nil},
		{"?kind=unsubscribe&match=app.test", []string{"https://app.test/Unsubscribe"}},
		{"?kind=verify&match=other", nil},
	} {
		r := e.call("GET", "/messages/"+id+"/links"+tt.query, nil)
		var got []string
		for _, l := range r.json(t)["items"].([]any) {
			got = append(got, l.(map[string]any)["url"].(string))
		}
		if r.status != 200 || strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("links%s: %d %v, want %v", tt.query, r.status, got, tt.want)
		}
		// Filtered or not, the list says the message kept only some links.
		if r.json(t)["links_truncated"] != true {
			t.Errorf("links%s: %s, want links_truncated true", tt.query, r.body)
		}
	}
	for _, bad := range []string{"confirm", "VERIFY", ""} {
		r := e.call("GET", "/messages/"+id+"/links?kind="+bad, nil)
		fields, _ := r.json(t)["error"].(map[string]any)["fields"].(map[string]any)
		if r.status != 400 || r.errCode(t) != "invalid_parameter" || fields["kind"] == nil {
			t.Errorf("kind=%s: %d %s", bad, r.status, r.body)
		}
	}
	raw := e.call("GET", "/messages/"+id+"/raw", nil)
	if raw.header.Get("Content-Type") != "message/rfc822" || !strings.HasPrefix(string(raw.body), "Subject:") {
		t.Errorf("raw: %v %q", raw.header, raw.body)
	}
	// An id holding an escaped slash is no id, never another route of
	// the message the router would read in the decoded path.
	for _, escaped := range []string{"%2Fraw", "%2fraw", "%2Flinks"} {
		r := e.call("GET", "/messages/"+id+escaped, nil)
		if r.status != 404 || r.errCode(t) != "not_found" || !strings.Contains(string(r.body), "escaped slash") {
			t.Errorf("GET /messages/%s%s: %d %s", id, escaped, r.status, r.body)
		}
	}
	if r := e.call("DELETE", "/messages/"+id+"%2Fraw", nil); r.status != 404 {
		t.Errorf("DELETE with an escaped slash: %d %s", r.status, r.body)
	}
	att := m["attachments"].([]any)[0].(map[string]any)
	a := e.call("GET", "/messages/"+id+"/attachments/"+att["id"].(string), nil)
	if string(a.body) != "%PDF-1.4" || a.header.Get("Content-Type") != "application/pdf" ||
		a.header.Get("Content-Disposition") != `attachment; filename=r.pdf` {
		t.Errorf("attachment: %v %q", a.header, a.body)
	}
	// A part without a name (an invite, a bounce's report) is a download
	// too, named by its id and type as the web names it.
	invite := m["attachments"].([]any)[1].(map[string]any)
	a = e.call("GET", "/messages/"+id+"/attachments/"+invite["id"].(string), nil)
	if want := "attachment; filename=" + invite["id"].(string) + ".ics"; string(a.body) != "BEGIN:VCALENDAR" ||
		a.header.Get("Content-Disposition") != want {
		t.Errorf("nameless attachment: %v %q, want Content-Disposition %s", a.header, a.body, want)
	}
	if r := e.call("GET", "/messages/"+id+"/attachments/att_nope", nil); r.status != 404 {
		t.Errorf("unknown attachment: %d", r.status)
	}
	if r := e.call("DELETE", "/messages/"+id, nil); r.status != 204 {
		t.Fatalf("delete: %d", r.status)
	}
	if r := e.call("GET", "/messages/"+id, nil); r.status != 404 {
		t.Fatalf("after delete: %d", r.status)
	}
	if r := e.call("DELETE", inbox, nil); r.status != 204 {
		t.Fatalf("purge: %d", r.status)
	}
}

func TestRequestRoutesAndDeliveries(t *testing.T) {
	e := newEnv(t)
	id := e.insertRequest(e.boot.Endpoint.ID, "/hook", []byte{0xff, 0x00, 0x01})
	r := e.call("GET", "/requests/"+id, nil).json(t)
	if r["body"] != nil || r["body_base64"] != "/wAB" || r["query"] != "a=1&b=%20" {
		t.Errorf("binary request: %v", r)
	}
	textID := e.insertRequest(e.boot.Endpoint.ID, "/hook", []byte(`{"é":1}`))
	if r := e.call("GET", "/requests/"+textID, nil).json(t); r["body"] != `{"é":1}` || r["body_base64"] != nil {
		t.Errorf("text request: %v", r)
	}

	d := e.call("POST", "/requests/"+id+"/deliveries", map[string]any{
		"target_url": "http://localhost:3000/hook", "response_status": 200, "error": nil, "duration_ms": 12})
	if d.status != 201 || d.json(t)["kind"] != "forward" || d.json(t)["status"] != "delivered" {
		t.Fatalf("record delivery: %d %s", d.status, d.body)
	}
	for name, body := range map[string]any{
		"missing duration": map[string]any{"target_url": "http://x/", "response_status": 200},
		"bad url":          map[string]any{"target_url": "localhost", "response_status": 200, "duration_ms": 1},
		"unknown field":    map[string]any{"target_url": "http://x/", "response_status": 200, "duration_ms": 1, "kind": "replay"},
		"nothing happened": map[string]any{"target_url": "http://x/", "duration_ms": 1},
	} {
		if r := e.call("POST", "/requests/"+id+"/deliveries", body); r.status != 400 || r.errCode(t) != "invalid_parameter" {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
	// JSON text that is not UTF-8, or escapes half a surrogate pair, is
	// refused rather than stored as U+FFFD; a whole pair is fine.
	for name, raw := range map[string]string{
		"invalid UTF-8":       "{\"target_url\":\"http://x/\",\"duration_ms\":1,\"error\":\"\xff\xfe\"}",
		"lone high surrogate": `{"target_url":"http://x/","duration_ms":1,"error":"\ud800"}`,
		"lone low surrogate":  `{"target_url":"http://x/","duration_ms":1,"error":"a\udc00b"}`,
		"high then not low":   `{"target_url":"http://x/","duration_ms":1,"error":"\ud83d\u0041"}`,
	} {
		req, _ := http.NewRequest("POST", e.srv.URL+"/api/v1/requests/"+id+"/deliveries", strings.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+e.key)
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), `"invalid_parameter"`) || !strings.Contains(string(b), `"body"`) {
			t.Errorf("%s: %d %s, want 400 invalid_parameter naming body", name, resp.StatusCode, b)
		}
	}
	if r := e.call("GET", "/requests/"+id, nil).json(t); len(r["deliveries"].([]any)) != 1 {
		t.Errorf("deliveries after bad reports: %v", r["deliveries"])
	}
	pair := e.call("POST", "/requests/"+id+"/deliveries", json.RawMessage(`{"target_url":"http://x/","duration_ms":1,"error":"\\ \ud83d\ude00"}`))
	if pair.status != 201 || pair.json(t)["error"] != `\ 😀` {
		t.Errorf("a whole surrogate pair and an escaped backslash: %d %s", pair.status, pair.body)
	}
	// What a client reports is kept as a URI.
	uni := e.call("POST", "/requests/"+id+"/deliveries", map[string]any{
		"target_url": "http://localhost:3000/café?q=a b", "duration_ms": 1, "response_status": 200})
	if uni.status != 201 || uni.json(t)["target_url"] != "http://localhost:3000/caf%C3%A9?q=a%20b" {
		t.Errorf("a report's URL with UTF-8 and a space: %d %s", uni.status, uni.body)
	}
	if r := e.call("GET", "/requests/"+id, nil).json(t); len(r["deliveries"].([]any)) != 3 {
		t.Errorf("deliveries: %v", r["deliveries"])
	}
	if r := e.call("DELETE", "/requests/"+id, nil); r.status != 204 {
		t.Fatalf("delete: %d", r.status)
	}
	if r := e.call("DELETE", "/endpoints/"+e.boot.Endpoint.ID+"/requests", nil); r.status != 204 {
		t.Fatalf("purge: %d", r.status)
	}
	if l := e.call("GET", "/endpoints/"+e.boot.Endpoint.ID+"/requests", nil).json(t); len(l["items"].([]any)) != 0 {
		t.Fatalf("after purge: %v", l)
	}
}

func TestReplay(t *testing.T) {
	e := newEnv(t)
	type seen struct {
		method, uri string
		header      http.Header
		body        []byte
	}
	got := make(chan seen, 4)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, r.Header, b}
		w.Header().Set("X-From", "target")
		w.WriteHeader(202)
		w.Write(bytes.Repeat([]byte("a"), 70<<10))
	}))
	defer target.Close()
	id := e.insertRequest(e.boot.Endpoint.ID, "/ci/1/hook", []byte(`{"a":1}`))

	if r := e.call("POST", "/requests/"+id+"/replay", nil); r.status != 409 || r.errCode(t) != "no_target" {
		t.Fatalf("no target: %d %s", r.status, r.body)
	}
	tgt := target.URL + "/base"
	if _, err := e.st.UpdateEndpoint(t.Context(), e.boot.Endpoint.ID, store.EndpointUpdate{Target: &tgt}); err != nil {
		t.Fatal(err)
	}

	r := e.call("POST", "/requests/"+id+"/replay", nil)
	if r.status != 201 {
		t.Fatalf("replay: %d %s", r.status, r.body)
	}
	s := <-got
	if s.method != "POST" || s.uri != "/base/ci/1/hook?a=1&b=%20" || string(s.body) != `{"a":1}` ||
		s.header.Get("X-Signature") != "sig" || s.header.Get("Connection") == "keep-alive" {
		t.Errorf("target saw %+v", s)
	}
	res := r.json(t)
	resp := res["response"].(map[string]any)
	if res["kind"] != "replay" || res["status"] != "delivered" || resp["status"] != float64(202) ||
		resp["truncated"] != true || len(resp["body"].(string)) != 64<<10 {
		t.Errorf("replay result: kind %v status %v response status %v truncated %v", res["kind"], res["status"], resp["status"], resp["truncated"])
	}

	r = e.call("POST", "/requests/"+id+"/replay", map[string]any{
		"method": "PUT", "path": "/edited", "query": "x=2",
		"headers": map[string]any{"X-Signature": nil, "X-New": []string{"1", "2"}, "Content-Type": "text/plain"},
		"body":    "edited body",
	})
	if r.status != 201 {
		t.Fatalf("edited replay: %d %s", r.status, r.body)
	}
	s = <-got
	if s.method != "PUT" || s.uri != "/base/edited?x=2" || string(s.body) != "edited body" ||
		s.header.Get("X-Signature") != "" || len(s.header["X-New"]) != 2 || s.header.Get("Content-Type") != "text/plain" {
		t.Errorf("edited replay: %+v", s)
	}
	r = e.call("POST", "/requests/"+id+"/replay", map[string]any{"body_base64": "AAEC"})
	if s = <-got; !bytes.Equal(s.body, []byte{0, 1, 2}) {
		t.Errorf("base64 body: %v", s.body)
	}

	for name, body := range map[string]any{
		"both bodies":     map[string]any{"body": "a", "body_base64": "YQ=="},
		"bad header name": map[string]any{"headers": map[string]any{"Bad Header": "x"}},
		"bad header type": map[string]any{"headers": map[string]any{"X": 1}},
		"bad method":      map[string]any{"method": "GE T"},
		"bad path":        map[string]any{"path": "no-slash"},
		"bad base64":      map[string]any{"body_base64": "!!"},
		"unknown field":   map[string]any{"target": "http://elsewhere/"},
	} {
		if r := e.call("POST", "/requests/"+id+"/replay", body); r.status != 400 || r.errCode(t) != "invalid_parameter" {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
	// A value of the wrong kind is named in JSON's terms, not Go's.
	for _, tt := range []struct {
		body        any
		field, want string
	}{
		{[]any{}, "body", "want an object, not an array"},
		{map[string]any{"method": 5}, "method", "want a string, not a number"},
	} {
		r := e.call("POST", "/requests/"+id+"/replay", tt.body)
		fields, _ := r.json(t)["error"].(map[string]any)["fields"].(map[string]any)
		if r.status != 400 || fields[tt.field] != tt.want {
			t.Errorf("%v: %d %s, want fields.%s %q", tt.body, r.status, r.body, tt.field, tt.want)
		}
	}

	target.Close()
	r = e.call("POST", "/requests/"+id+"/replay", nil)
	res = r.json(t)
	if r.status != 201 || res["status"] != "failed" || res["error"] == nil || res["response"] != nil {
		t.Errorf("unreachable target: %d %s", r.status, r.body)
	}
	deliveries := e.call("GET", "/requests/"+id, nil).json(t)["deliveries"].([]any)
	if len(deliveries) != 4 {
		t.Errorf("history has %d deliveries, want 4", len(deliveries))
	}
}

// TestWaitGivenUpIsNotARefusal: a client that stops waiting (a `capture
// wait` that timed out) was refused nothing, so the refusals metric, which
// operators alert on, does not count it as unavailable.
func TestWaitGivenUpIsNotARefusal(t *testing.T) {
	st := storetest.Store(t)
	boot, err := st.EnsureBootstrap(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var refused []string
	a := api.New(st, api.Config{SMTPHost: "localhost", CaptureBase: "http://127.0.0.1:7781",
		Logger: slog.New(slog.DiscardHandler), Refused: func(code string) {
			mu.Lock()
			refused = append(refused, code)
			mu.Unlock()
		}})
	srv := httptest.NewServer(a)
	defer st.Close()

	ctx, giveUp := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET",
			srv.URL+api.Prefix+"/inboxes/"+boot.Inbox.ID+"/messages?to=nobody&wait=30", nil)
		req.Header.Set("Authorization", "Bearer "+boot.Secret)
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	for a.ActiveWaits(boot.Project.ID) == 0 {
		select {
		case err := <-done:
			t.Fatalf("the wait ended before it was held: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	giveUp()
	<-done
	srv.Close() // returns once every handler has finished, the wait's included
	mu.Lock()
	defer mu.Unlock()
	if len(refused) != 0 {
		t.Errorf("a wait given up by its client was counted as refused: %v", refused)
	}
}

// A write the database could not take is a 503 whose message says why
// when the reason is the user's to fix: a full disk.
func TestUnavailableSaysWhy(t *testing.T) {
	e := newEnv(t)
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: %w: database or disk is full", store.ErrUnavailable, store.ErrDiskFull), "the disk is full; nothing was changed"},
		{fmt.Errorf("%w: nothing committed within 5s", store.ErrUnavailable), "the database cannot take writes now; nothing was changed"},
		{store.ErrClosed, "the server is stopping; nothing was changed"},
	} {
		rec := httptest.NewRecorder()
		e.api.Fail(rec, httptest.NewRequest("DELETE", "/api/v1/messages/msg_x", nil), tt.err)
		if rec.Code != 503 || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), tt.want) {
			t.Errorf("%v: %d %v %s, want 503 saying %q", tt.err, rec.Code, rec.Header(), rec.Body, tt.want)
		}
	}
}
