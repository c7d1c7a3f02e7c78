package wait

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/forward/internal/capturetest"
	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/store"
)

// The parts SPEC §15 and §16 add (codes, link kinds, q) go over the wire as
// SPEC §8 shapes them: an API that speaks that shape checks exactly what
// the client sends and reads. The command's tests (cmd/wait_test.go) run
// codes, kinds and q against the real server too.
func TestCodesKindsSearchOnTheWire(t *testing.T) {
	var mu sync.Mutex
	var queries []url.Values
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.Query())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/inboxes":
			w.Write([]byte(`{"items":[{"id":"inb_1","name":"default","created_at":"2026-01-01T00:00:00.000Z",` +
				`"message_count":1,"smtp":{"host":"localhost","username":"inb_1","ports":{"starttls":[2587],"tls":[]}}}],"next":null}`))
		case "/api/v1/inboxes/inb_1/messages":
			w.Write([]byte(`{"items":[{"id":"msg_1","inbox_id":"inb_1","received_at":"2026-01-01T00:00:01.000Z",` +
				`"from":null,"to":[],"cc":[],"subject":"Code","size":1,"attachment_count":0,"snippet":""}],"next":null}`))
		case "/api/v1/messages/msg_1":
			w.Write([]byte(`{"id":"msg_1","codes":[{"value":"482915","context":"Your code is 482-915"},` +
				`{"value":"ZX81","context":"or ZX81"}]}`))
		case "/api/v1/messages/msg_1/links":
			if r.URL.Query().Get("kind") == "verify" {
				w.Write([]byte(`{"items":[{"url":"https://app.test/verify?t=1","text":"Verify","origin":"https://app.test","kind":"verify"}],"next":null}`))
				return
			}
			w.Write([]byte(`{"items":[],"next":null}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	run := func(cfg Config) (string, error) {
		var out bytes.Buffer
		cfg.Client, cfg.Kind, cfg.Stdout = apiclient.New(api.URL+"/api/v1", "cap_k", nil), Email, &out
		cfg.Timeout, cfg.Since = 5*time.Second, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		err := Run(t.Context(), cfg)
		return out.String(), err
	}

	if out, err := run(Config{Q: `"sign in" code`, Print: "code"}); err != nil || out != "482915\n" {
		t.Errorf("--print code = %q, %v; want the first code", out, err)
	}
	sawQ := false
	for _, q := range queries {
		if q.Get("q") == `"sign in" code` {
			sawQ = true
		}
	}
	if !sawQ {
		t.Errorf("no list call carried q=: %v", queries)
	}
	if out, err := run(Config{Print: "link", LinkKind: contract.LinkVerify, Match: "verify"}); err != nil || out != "https://app.test/verify?t=1\n" {
		t.Errorf("--print link --kind verify = %q, %v", out, err)
	}
	if last := queries[len(queries)-1]; last.Get("kind") != "verify" || last.Get("match") != "verify" {
		t.Errorf("links call = %v, want kind=verify&match=verify", last)
	}
	_, err := run(Config{Print: "link", LinkKind: contract.LinkReset})
	var we *Error
	if !errors.As(err, &we) || we.Code != ExitNoPart || !strings.Contains(err.Error(), "msg_1") || !strings.Contains(err.Error(), "kind reset") {
		t.Errorf("no reset link: %v, want exit %d naming msg_1", err, ExitNoPart)
	}
}

// An API that answers "come back later" (too_many_waits) until the wait
// is over leaves it timed out, exit 1, with that answer as the reason
// nothing was seen: it is neither a usage error nor a configuration one.
func TestWaitEndsWhileTheAPIIsBusy(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/api/v1/inboxes" {
			w.Write([]byte(`{"items":[{"id":"inb_1","name":"default","created_at":"2026-01-01T00:00:00.000Z",` +
				`"message_count":0,"smtp":{"host":"localhost","username":"inb_1","ports":{"starttls":[2587],"tls":[]}}}],"next":null}`))
			return
		}
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"error":{"code":"too_many_waits","message":"the project holds 10 waits already"}}`))
	}))
	defer api.Close()
	err := Run(t.Context(), Config{Client: apiclient.New(api.URL+"/api/v1", "cap_k", nil), Kind: Email,
		Timeout: 200 * time.Millisecond, Stdout: io.Discard})
	var we *Error
	if !errors.As(err, &we) || we.Code != ExitTimedOut || !strings.Contains(err.Error(), "no email within 200ms (the API was busy: ") ||
		!strings.Contains(err.Error(), "10 waits already") {
		t.Errorf("Run = %v; want exit %d, no email within 200ms, and the API's answer", err, ExitTimedOut)
	}
}

// With the database down the API answers every call, the inbox's lookup
// included, with 503 and its reason: the wait ends at its --timeout as one
// that found nothing, saying so, not ten seconds later blaming the API.
func TestWaitEndsWhileTheDatabaseIsDown(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":{"code":"unavailable","message":"lost the connection to the database; nothing was changed, retry after 1 s"}}`))
	}))
	defer api.Close()
	for _, kind := range []string{Email, Request} {
		err := Run(t.Context(), Config{Client: apiclient.New(api.URL+"/api/v1", "cap_k", nil), Kind: kind,
			Timeout: 300 * time.Millisecond, Stdout: io.Discard})
		var we *Error
		if !errors.As(err, &we) || we.Code != ExitTimedOut || !strings.Contains(err.Error(), "within 300ms (the API was busy: ") ||
			!strings.Contains(err.Error(), "lost the connection to the database") {
			t.Errorf("Run %v = %v; want exit %d, nothing within 300ms, and the API's answer", kind, err, ExitTimedOut)
		}
	}
}

// A serve that stops while the wait holds is retried to the deadline (a
// restart is waited through); still down then, the wait cannot say that
// nothing arrived, and exits 2 as an API that does not answer at its start
// does.
func TestWaitEndsWhileTheAPIIsDown(t *testing.T) {
	srv := capturetest.Start(t)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		time.Sleep(300 * time.Millisecond)
		srv.Stop(t)
	}()
	err := Run(t.Context(), Config{Client: srv.Client(), Kind: Request, Timeout: 1500 * time.Millisecond, Stdout: io.Discard})
	<-stopped
	var we *Error
	if !errors.As(err, &we) || we.Code != ExitUsage || !strings.Contains(err.Error(), "no request within 1.5s: the API stopped answering (") ||
		!strings.Contains(err.Error(), "is `capture serve` running?") {
		t.Errorf("Run = %v; want exit %d, the API stopped answering", err, ExitUsage)
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"10m":                       now.Add(-10 * time.Minute),
		"1h30m":                     now.Add(-90 * time.Minute),
		"2026-02-28T10:00:00Z":      time.Date(2026, 2, 28, 10, 0, 0, 0, time.UTC),
		"2026-03-01T13:00:00+02:00": time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC),
		// The zero time would mean no --since, from the start on.
		"0001-01-01T00:00:00Z": time.Time{}.Add(time.Nanosecond),
	} {
		if got, err := ParseSince(in, now); err != nil || !got.Equal(want) {
			t.Errorf("ParseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-5m", "0s", "yesterday", "2026-03-01T10:00:00", "10"} {
		if got, err := ParseSince(bad, now); err == nil {
			t.Errorf("ParseSince(%q) = %v, want an error", bad, got)
		}
	}
	// The same times as the read API's since=: one parser.
	for _, bad := range []string{"2026-03-01T10:00:00+24:00", "2026-03-01T10:00:00,5Z"} {
		if got, err := ParseSince(bad, now); err == nil || !strings.Contains(err.Error(), "want an RFC 3339 time") {
			t.Errorf("ParseSince(%q) = %v, %v; want an error: not RFC 3339", bad, got, err)
		}
	}
	// The longest duration back reaches about 292 years; one longer is well
	// formed but too far back, and says how far it may go.
	if got, err := ParseSince("2562047h", now); err != nil || !got.Equal(now.Add(-MaxSinceBack)) {
		t.Errorf("ParseSince(2562047h) = %v, %v", got, err)
	}
	for _, long := range []string{"3000000h", "2562048h", "9223372036854775808ns", "2000000h2000000h", "2562047h30m"} {
		_, err := ParseSince(long, now)
		if err == nil || !strings.Contains(err.Error(), "too far back: a duration back is at most 2562047h (about 292 years)") {
			t.Errorf("ParseSince(%q): %v; want too far back, naming the bound", long, err)
		}
	}
	if _, err := ParseSince("-3000000h", now); err == nil || !strings.Contains(err.Error(), "greater than zero") {
		t.Errorf("ParseSince(-3000000h): %v; want a duration greater than zero", err)
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{30 * time.Second: "30s", 2 * time.Minute: "2m", 90 * time.Second: "1m30s",
		time.Hour: "1h", 1500 * time.Millisecond: "1.5s"} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

// --inbox and --endpoint take an id or a name, and default to the
// project's only one, else the one named default.
func TestSourceDefaults(t *testing.T) {
	t.Parallel()
	srv := capturetest.Start(t)
	ctx := t.Context()
	p, err := srv.Store.CreateProject(ctx, "other", "free")
	if err != nil {
		t.Fatal(err)
	}
	signup, err := srv.Store.CreateInbox(ctx, p.ID, "signup")
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := srv.Store.CreateKey(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	c := apiclient.New(srv.APIBase, key, nil)
	sent, err := srv.Store.InsertMessage(ctx, &store.NewMessage{InboxID: signup.ID, ReceivedAt: time.Now(), Subject: "hi", Raw: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	run := func(source string) (string, error) {
		var out bytes.Buffer
		err := Run(ctx, Config{Client: c, Kind: Email, Source: source, Since: time.Now().Add(-time.Minute),
			Timeout: 5 * time.Second, Stdout: &out})
		return out.String(), err
	}
	for _, source := range []string{"", "signup", signup.ID} {
		if out, err := run(source); err != nil || out != sent+"\n" {
			t.Errorf("source %q: %q, %v; want the message of the only inbox", source, out, err)
		}
	}
	if _, err := srv.Store.CreateInbox(ctx, p.ID, "billing"); err != nil {
		t.Fatal(err)
	}
	var we *Error
	if _, err := run(""); !errors.As(err, &we) || we.Code != ExitUsage || !strings.Contains(err.Error(), "pass --inbox") ||
		!strings.Contains(err.Error(), "signup") {
		t.Errorf("two inboxes, none named default: %v", err)
	}
	if out, err := run("signup"); err != nil || out != sent+"\n" {
		t.Errorf("by name among two: %q, %v", out, err)
	}
	// Two named default: a guess could watch the wrong one, so none is
	// taken, and the choices are told apart by their ids.
	first, err := srv.Store.CreateInbox(ctx, p.ID, "default")
	if err != nil {
		t.Fatal(err)
	}
	// It is watched: nothing arrives there.
	if err := Run(ctx, Config{Client: c, Kind: Email, Timeout: 100 * time.Millisecond, Stdout: io.Discard}); !errors.As(err, &we) ||
		we.Code != ExitTimedOut {
		t.Errorf("one of three named default: %v", err)
	}
	second, err := srv.Store.CreateInbox(ctx, p.ID, "default")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run(""); !errors.As(err, &we) || we.Code != ExitUsage || !strings.Contains(err.Error(), first.ID+" (default)") ||
		!strings.Contains(err.Error(), second.ID+" (default)") {
		t.Errorf("two named default: %v", err)
	}
	// Nor is one of them taken when the name is given, and an id still
	// picks one.
	if _, err := run("default"); !errors.As(err, &we) || we.Code != ExitUsage || !strings.Contains(err.Error(), `2 inboxes are named "default"`) ||
		!strings.Contains(err.Error(), first.ID) || !strings.Contains(err.Error(), second.ID) {
		t.Errorf("--inbox default, two named so: %v", err)
	}
	if err := Run(ctx, Config{Client: c, Kind: Email, Source: second.ID, Timeout: 100 * time.Millisecond, Stdout: io.Discard}); !errors.As(err, &we) ||
		we.Code != ExitTimedOut {
		t.Errorf("--inbox with the id of one of two named default: %v", err)
	}
	// The bootstrap project's inbox is named default.
	if err := Run(ctx, Config{Client: srv.Client(), Kind: Request, Timeout: time.Second, Stdout: io.Discard}); !errors.As(err, &we) ||
		we.Code != ExitTimedOut || !strings.Contains(err.Error(), "no request within 1s") {
		t.Errorf("default endpoint: %v", err)
	}
}
