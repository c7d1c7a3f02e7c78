package apiclient_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/forward/internal/capturetest"
	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/store/datadir"
)

func TestClientAgainstServer(t *testing.T) {
	t.Parallel()
	srv := capturetest.Start(t)
	ctx := t.Context()
	c := apiclient.New(srv.APIBase+"/", srv.Key, nil)

	me, err := c.Me(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if me.Project.ID != srv.ProjectID || me.Plan.Name != "free" || me.Key.ID == "" {
		t.Errorf("Me = %+v", me)
	}

	// The server's root, as a user of other tools would give it, reaches
	// the API under it.
	for _, base := range []string{srv.HTTPBase, srv.HTTPBase + "/"} {
		atRoot := apiclient.New(base, srv.Key, nil)
		if got, err := atRoot.Me(ctx); err != nil || got.Project.ID != srv.ProjectID || atRoot.BaseURL() != srv.APIBase {
			t.Errorf("New(%q): Me = %+v, %v; base %q, want %q", base, got, err, atRoot.BaseURL(), srv.APIBase)
		}
	}

	inboxes, err := c.Inboxes(ctx, apiclient.Page{})
	if err != nil || len(inboxes.Items) != 1 || inboxes.Items[0].ID != srv.InboxID || inboxes.Next != "" {
		t.Errorf("Inboxes = %+v, %v", inboxes, err)
	}
	msgs, err := c.Messages(ctx, srv.InboxID, apiclient.MessageQuery{Subject: "x", Since: time.Now().Add(-time.Hour), Limit: 5})
	if err != nil || len(msgs.Items) != 0 {
		t.Errorf("Messages = %+v, %v", msgs, err)
	}

	ep, err := c.Endpoint(ctx, srv.EndpointID)
	if err != nil {
		t.Fatal(err)
	}
	if ep.CaptureURL != srv.CaptureBase+"/"+srv.EndpointID || ep.TargetURL != nil {
		t.Errorf("Endpoint = %+v", ep)
	}
	_, err = c.Endpoint(ctx, "whe_doesnotexist")
	var apiErr *contract.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 404 || apiErr.Code != contract.CodeNotFound {
		t.Errorf("Endpoint(unknown) = %v, want a 404 not_found", err)
	}

	binary := []byte{0xff, 0x00, 0xfe, 'a'}
	ids := []string{
		srv.Post(t, "POST", "/a/b?x=1", http.Header{"X-One": {"1", "2"}}, []byte(`{"n":1}`)),
		srv.Post(t, "PUT", "/bin", nil, binary),
		srv.Post(t, "GET", "", nil, nil),
	}

	all, err := c.Requests(ctx, srv.EndpointID, apiclient.RequestQuery{})
	if err != nil || len(all.Items) != 3 || all.Items[0].ID != ids[2] || all.Items[2].ID != ids[0] {
		t.Fatalf("Requests = %+v, %v", all, err)
	}
	page, err := c.Requests(ctx, srv.EndpointID, apiclient.RequestQuery{After: ids[0], Limit: 1})
	if err != nil || len(page.Items) != 1 || page.Items[0].ID != ids[1] || page.Next != ids[1] {
		t.Errorf("Requests(after, limit 1) = %+v, %v", page, err)
	}
	filtered, err := c.Requests(ctx, srv.EndpointID, apiclient.RequestQuery{Method: "put", Path: "/b"})
	if err != nil || len(filtered.Items) != 1 || filtered.Items[0].ID != ids[1] {
		t.Errorf("Requests(method, path) = %+v, %v", filtered, err)
	}
	searched, err := c.Requests(ctx, srv.EndpointID, apiclient.RequestQuery{Q: "x-one", Method: "post"})
	if err != nil || len(searched.Items) != 0 {
		t.Errorf("Requests(q of a header name) = %+v, %v; header names are not searched", searched, err)
	}
	searched, err = c.Requests(ctx, srv.EndpointID, apiclient.RequestQuery{Q: `"a b"`})
	if err != nil || len(searched.Items) != 1 || searched.Items[0].ID != ids[0] {
		t.Errorf("Requests(q) = %+v, %v", searched, err)
	}
	_, err = c.Requests(ctx, srv.EndpointID, apiclient.RequestQuery{Q: `"open`})
	if !errors.As(err, &apiErr) || apiErr.Code != contract.CodeInvalidParameter || apiErr.Fields["q"] == "" {
		t.Errorf("Requests(bad q) = %v, want invalid_parameter naming q", err)
	}
	_, err = c.Requests(ctx, srv.EndpointID, apiclient.RequestQuery{After: "req_gone"})
	if !contract.IsCode(err, contract.CodeInvalidCursor) {
		t.Errorf("Requests(after unknown) = %v, want invalid_cursor", err)
	}

	r, err := c.Request(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if r.Target() != "/a/b?x=1" || r.Headers.Get("x-one") != "1" || len(r.Headers.HTTP()["X-One"]) != 2 {
		t.Errorf("Request = %+v", r)
	}
	if b, err := r.BodyBytes(); err != nil || string(b) != `{"n":1}` {
		t.Errorf("BodyBytes = %q, %v", b, err)
	}
	rb, err := c.Request(ctx, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if b, err := rb.BodyBytes(); err != nil || !bytes.Equal(b, binary) || rb.Body != nil {
		t.Errorf("binary BodyBytes = %x, %v", b, err)
	}

	status, target, ms := 502, "http://localhost:3000/a/b?x=1", int64(7)
	d, err := c.RecordDelivery(ctx, ids[0], contract.DeliveryReport{TargetURL: &target, ResponseStatus: &status, DurationMS: &ms})
	if err != nil || d.Kind != contract.KindForward || d.Status != contract.StatusFailed || *d.ResponseStatus != 502 {
		t.Errorf("RecordDelivery = %+v, %v", d, err)
	}
	nope := "nope"
	_, err = c.RecordDelivery(ctx, ids[0], contract.DeliveryReport{TargetURL: &nope, DurationMS: &ms})
	if !errors.As(err, &apiErr) || apiErr.Code != contract.CodeInvalidParameter || apiErr.Fields["target_url"] == "" {
		t.Errorf("RecordDelivery(bad) = %v, want invalid_parameter naming target_url", err)
	}
	r, _ = c.Request(ctx, ids[0])
	if len(r.Deliveries) != 1 || r.Deliveries[0].DurationMS != 7 {
		t.Errorf("deliveries = %+v", r.Deliveries)
	}

	_, err = c.Replay(ctx, ids[0], nil)
	if !contract.IsCode(err, contract.CodeNoTarget) {
		t.Errorf("Replay without a target = %v, want no_target", err)
	}

	if err := c.DeleteRequest(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Request(ctx, ids[0]); !contract.IsCode(err, contract.CodeNotFound) {
		t.Errorf("Request(deleted) = %v, want not_found", err)
	}
	if err := c.DeleteMessage(ctx, "msg_nope"); !contract.IsCode(err, contract.CodeNotFound) {
		t.Errorf("DeleteMessage(unknown) = %v, want not_found", err)
	}

	_, err = apiclient.New(srv.APIBase, "cap_wrong", nil).Me(ctx)
	if !errors.As(err, &apiErr) || apiErr.Status != 401 || apiErr.Code != contract.CodeUnauthorized {
		t.Errorf("Me(bad key) = %v, want 401 unauthorized", err)
	}
}

func TestReplay(t *testing.T) {
	t.Parallel()
	srv := capturetest.Start(t)
	ctx := t.Context()
	gotc := make(chan *http.Request, 1)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotc <- r
		w.Header().Set("X-Answer", "yes")
		w.WriteHeader(202)
		w.Write([]byte("accepted"))
	}))
	defer target.Close()
	endpoint, err := srv.Store.CreateEndpoint(ctx, srv.ProjectID, "replayed", &target.URL)
	if err != nil {
		t.Fatal(err)
	}
	srv.EndpointID = endpoint.ID
	id := srv.Post(t, "POST", "/hook?a=1", http.Header{"X-Old": {"1"}}, []byte("body"))

	c := srv.Client()
	method, body := "PUT", "edited"
	rep, err := c.Replay(ctx, id, &contract.ReplayEdits{Method: &method, Body: &body,
		Headers: map[string]contract.HeaderEdit{"X-Old": {Remove: true}, "X-New": {Values: []string{"2"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Kind != contract.KindReplay || rep.Response == nil || rep.Response.Status != 202 ||
		*rep.Response.Body != "accepted" || rep.Request.URL != target.URL+"/hook?a=1" {
		t.Errorf("Replay = %+v", rep)
	}
	got := <-gotc
	if got.Method != "PUT" || got.Header.Get("X-Old") != "" || got.Header.Get("X-New") != "2" {
		t.Errorf("target got %+v", got)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	limited := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer cap_k" {
			t.Errorf("Authorization = %q", r.Header.Get("Authorization"))
		}
		w.Header().Set("Retry-After", "3")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(429)
		w.Write([]byte(`{"error":{"code":"rate_limited","message":"slow down","fields":{}}}`))
	}))
	defer limited.Close()
	_, err := apiclient.New(limited.URL, "cap_k", nil).Me(ctx)
	var apiErr *contract.Error
	if !errors.As(err, &apiErr) || apiErr.Code != contract.CodeRateLimited || apiErr.RetryAfter != 3*time.Second {
		t.Errorf("429 = %#v", err)
	}
	if d, ok := apiclient.RetryAfter(err); !ok || d != 3*time.Second {
		t.Errorf("RetryAfter = %v, %v", d, ok)
	}

	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad gateway", 502)
	}))
	defer proxy.Close()
	_, err = apiclient.New(proxy.URL, "cap_k", nil).Me(ctx)
	if !errors.As(err, &apiErr) || apiErr.Status != 502 || apiErr.Code != "" || !strings.Contains(apiErr.Message, "bad gateway") {
		t.Errorf("502 without envelope = %#v", err)
	}

	_, err = apiclient.New("http://"+capturetest.ClosedAddr(t)+"/api/v1", "cap_k", nil).Me(ctx)
	var ue *apiclient.UnreachableError
	if !errors.Is(err, apiclient.ErrUnreachable) || !errors.As(err, &ue) || !strings.Contains(err.Error(), "refused") {
		t.Errorf("closed port = %v, want ErrUnreachable", err)
	}
}

func TestHeadersKeepOrder(t *testing.T) {
	var hs contract.Headers
	in := `{"Zeta":["1"],"Alpha":["2","3"],"Mid":[]}`
	if err := hs.UnmarshalJSON([]byte(in)); err != nil {
		t.Fatal(err)
	}
	if len(hs) != 3 || hs[0].Name != "Zeta" || hs[1].Name != "Alpha" || hs[2].Name != "Mid" {
		t.Errorf("order lost: %+v", hs)
	}
	out, err := hs.MarshalJSON()
	if err != nil || string(out) != in {
		t.Errorf("MarshalJSON = %s, %v", out, err)
	}
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	empty := t.TempDir()
	if err := datadir.WriteCredentials(dir, datadir.Credentials{API: "http://127.0.0.1:9999/api/v1/", Key: "cap_file"}); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := datadir.WriteCredentials(root, datadir.Credentials{API: "https://capture.test/", Key: "cap_file"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name            string
		apiKey, key     string
		apiFlag, data   string
		want            datadir.Credentials
		wantErrContains string
	}{
		{name: "file", data: dir, want: datadir.Credentials{API: "http://127.0.0.1:9999/api/v1", Key: "cap_file"}},
		{name: "CAPTURE_API_KEY first", apiKey: "cap_a", key: "cap_b", data: dir,
			want: datadir.Credentials{API: "http://127.0.0.1:9999/api/v1", Key: "cap_a"}},
		{name: "CAPTURE_KEY", key: "cap_b", data: dir, want: datadir.Credentials{API: "http://127.0.0.1:9999/api/v1", Key: "cap_b"}},
		{name: "flag over file", apiFlag: "http://example.test/api/v1/", data: dir,
			want: datadir.Credentials{API: "http://example.test/api/v1", Key: "cap_file"}},
		{name: "default URL", apiKey: "cap_a", data: empty, want: datadir.Credentials{API: apiclient.DefaultAPI, Key: "cap_a"}},
		// The server's root, as other tools document their URL, means
		// the API under it.
		{name: "server root", apiKey: "cap_a", apiFlag: "http://127.0.0.1:7780", data: empty,
			want: datadir.Credentials{API: apiclient.DefaultAPI, Key: "cap_a"}},
		{name: "server root with slash", apiKey: "cap_a", apiFlag: "http://127.0.0.1:7780/", data: empty,
			want: datadir.Credentials{API: apiclient.DefaultAPI, Key: "cap_a"}},
		{name: "server root from the file", data: root, want: datadir.Credentials{API: "https://capture.test/api/v1", Key: "cap_file"}},
		{name: "other path kept", apiKey: "cap_a", apiFlag: "http://proxy.test/capture/api/v1", data: empty,
			want: datadir.Credentials{API: "http://proxy.test/capture/api/v1", Key: "cap_a"}},
		{name: "no key", data: empty, wantErrContains: "with `capture key create --save`"},
		{name: "bad URL", apiKey: "cap_a", apiFlag: "localhost:7780", data: empty, wantErrContains: "want an absolute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(apiclient.EnvAPIKey, tt.apiKey)
			t.Setenv(apiclient.EnvKey, tt.key)
			got, err := apiclient.Resolve(tt.apiFlag, tt.data)
			if tt.wantErrContains != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErrContains) {
					t.Fatalf("err = %v, want %q", err, tt.wantErrContains)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Resolve = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}

	t.Run("data dir from the environment", func(t *testing.T) {
		t.Setenv(apiclient.EnvAPIKey, "")
		t.Setenv(apiclient.EnvKey, "")
		t.Setenv("CAPTURE_DATA_DIR", dir)
		got, err := apiclient.Resolve("", "")
		if err != nil || got.Key != "cap_file" {
			t.Errorf("Resolve = %+v, %v", got, err)
		}
	})
	t.Run("corrupt file", func(t *testing.T) {
		bad := t.TempDir()
		os.WriteFile(filepath.Join(bad, datadir.CredentialsFile), []byte("{"), 0o600)
		t.Setenv(apiclient.EnvAPIKey, "")
		t.Setenv(apiclient.EnvKey, "")
		if _, err := apiclient.Resolve("", bad); err == nil {
			t.Error("want an error for a corrupt credentials.json")
		}
	})
}

// TestAllFollowsNext reads a list of three pages, passing each page's
// cursor to the next call, and stops on the first error.
func TestAllFollowsNext(t *testing.T) {
	pages := map[string]contract.List[int]{
		"":   {Items: []int{1, 2}, Next: "c1"},
		"c1": {Items: []int{3}, Next: "c2"},
		"c2": {Items: []int{4, 5}},
	}
	var calls []apiclient.Page
	list := func(_ context.Context, p apiclient.Page) (contract.List[int], error) {
		calls = append(calls, p)
		return pages[p.Before], nil
	}
	got, err := apiclient.All(t.Context(), list)
	if err != nil || !slices.Equal(got, []int{1, 2, 3, 4, 5}) {
		t.Fatalf("All = %v, %v", got, err)
	}
	if len(calls) != 3 || calls[0].Limit != contract.MaxLimit || calls[2].Before != "c2" {
		t.Errorf("calls %+v", calls)
	}

	boom := errors.New("boom")
	_, err = apiclient.All(t.Context(), func(context.Context, apiclient.Page) (contract.List[int], error) {
		return contract.List[int]{}, boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("error = %v", err)
	}
}
