package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capturedev/capture/server"
	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/pgtest"
)

// While PostgreSQL does not answer at all (every process of it stopped,
// as a hung server or a network partition looks), every surface that reads
// answers 503 with Retry-After in its own error shape once the read's
// bound passes, rather than holding the request until the listener's
// write timeout drops it with no answer (SPEC §8, §13): the read API, a
// wait (never an empty 200), a web page, an email API send, whose
// credential is looked up first. Once the database answers again, so does
// each of them.
func TestUnresponsiveDatabaseIsUnavailableEverywhere(t *testing.T) {
	if !pgtest.Requested() {
		t.Skip("PostgreSQL only: a stopped SQLite disk cannot be stood in for")
	}
	own := pgtest.Private(t)
	st, err := store.OpenPostgres(t.Context(), own.URL, store.WithReadTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	boot, err := st.EnsureBootstrap(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Listen(st, config(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// A bound on the test only: a request held without limit would be
	// dropped by the server after 30 s or more.
	client := &http.Client{Timeout: 20 * time.Second}
	type call struct {
		name string
		req  func() *http.Request
		// refused says whether a 503's body is in the surface's shape.
		refused func(body string) bool
	}
	envelope := func(body string) bool {
		var env envelope
		return json.Unmarshal([]byte(body), &env) == nil && env.Error != nil && env.Error.Code == "unavailable"
	}
	get := func(url string, auth bool) func() *http.Request {
		return func() *http.Request {
			req, _ := http.NewRequest("GET", url, nil)
			if auth {
				req.Header.Set("Authorization", "Bearer "+boot.Secret)
			}
			return req
		}
	}
	calls := []call{
		{"GET /me", get(srv.APIBase()+"/me", true), envelope},
		{"a wait", get(srv.APIBase()+"/inboxes/"+boot.Inbox.ID+"/messages?wait=1", true), envelope},
		{"a web page", func() *http.Request {
			req := get(srv.HTTPBase()+"/", false)()
			req.Header.Set("Accept", "text/html")
			return req
		}, func(body string) bool { return strings.Contains(body, "did not answer") }},
		{"a Resend send", func() *http.Request {
			req, _ := http.NewRequest("POST", srv.EmailAPIBase()+"/emails",
				strings.NewReader(`{"from":"a@example.com","to":"b@example.com","subject":"s","text":"t"}`))
			req.Header.Set("Authorization", "Bearer "+boot.Inbox.SMTPPassword)
			req.Header.Set("Content-Type", "application/json")
			return req
		}, func(body string) bool { return strings.Contains(body, `"statusCode":503`) }},
	}
	type answer struct {
		status     int
		retryAfter string
		body       string
		err        error
	}
	all := func() []answer {
		answers := make([]answer, len(calls))
		var wg sync.WaitGroup
		for i, c := range calls {
			wg.Go(func() {
				resp, err := client.Do(c.req())
				if err != nil {
					answers[i].err = err
					return
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				answers[i] = answer{resp.StatusCode, resp.Header.Get("Retry-After"), string(b), err}
			})
		}
		wg.Wait()
		return answers
	}
	for i, a := range all() {
		if a.err != nil || a.status != http.StatusOK {
			t.Fatalf("%s before the database stops: %d %v %s", calls[i].name, a.status, a.err, a.body)
		}
	}

	own.Freeze(t)
	for i, a := range all() {
		if a.err != nil || a.status != http.StatusServiceUnavailable || a.retryAfter == "" || !calls[i].refused(a.body) {
			t.Errorf("%s while the database does not answer: %d (Retry-After %q) %v %s, want 503 with Retry-After",
				calls[i].name, a.status, a.retryAfter, a.err, a.body)
		}
	}

	own.Thaw(t)
	for i, a := range all() {
		if a.err != nil || a.status != http.StatusOK {
			t.Errorf("%s once the database answers again: %d %v %s", calls[i].name, a.status, a.err, a.body)
		}
	}

	// A wait already holding when the database stops reads once more at
	// its deadline, so it too is answered 503, not an empty 200. (The
	// inbox holds the Resend send by now: the wait filters for nothing.)
	held := make(chan answer, 1)
	go func() {
		resp, err := client.Do(get(srv.APIBase()+"/inboxes/"+boot.Inbox.ID+"/messages?to=nobody-held@&wait=2", true)())
		if err != nil {
			held <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		held <- answer{resp.StatusCode, resp.Header.Get("Retry-After"), string(b), err}
	}()
	holding := `capture_active_waits{project="` + boot.Project.ID + `"} 1`
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := client.Get(srv.HTTPBase() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), holding) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the wait never held its slot; /metrics:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	own.Freeze(t)
	if a := <-held; a.err != nil || a.status != http.StatusServiceUnavailable || a.retryAfter == "" || !envelope(a.body) {
		t.Errorf("a wait held when the database stopped: %d (Retry-After %q) %v %s, want 503 with Retry-After",
			a.status, a.retryAfter, a.err, a.body)
	}
	own.Thaw(t)
}
