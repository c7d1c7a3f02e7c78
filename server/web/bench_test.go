package web_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capturedev/capture/server/web"
	"github.com/capturedev/capture/store"
)

// The page benchmarks run against a database of a million captures, built
// once into the user's cache directory (it takes minutes) and reused:
//
//	go test -run '^$' -bench Pages -benchtime 200x ./server/web/
//
// CAPTURE_WEB_BENCH_DIR moves the cache; CAPTURE_WEB_BENCH_MESSAGES and
// CAPTURE_WEB_BENCH_REQUESTS change its size (a new size builds a new one).
func benchDB(b *testing.B) (*store.Store, string) {
	b.Helper()
	messages := envInt("CAPTURE_WEB_BENCH_MESSAGES", 1_000_000)
	requests := envInt("CAPTURE_WEB_BENCH_REQUESTS", 100_000)
	dir := os.Getenv("CAPTURE_WEB_BENCH_DIR")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			b.Fatal(err)
		}
		dir = filepath.Join(cache, "capture-web-bench")
	}
	dir = filepath.Join(dir, fmt.Sprintf("%d-%d", messages, requests))
	done := filepath.Join(dir, "complete")
	if _, err := os.Stat(done); err != nil {
		os.RemoveAll(dir)
		build(b, dir, messages, requests)
		if err := os.WriteFile(done, nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	st, err := store.OpenDir(context.Background(), dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st, dir
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// build fills a new data dir: project "bench" on plan team, one inbox with
// the messages, one endpoint with the requests, through the store's own
// calls, many at once as the listeners make them.
func build(b *testing.B, dir string, messages, requests int) {
	b.Logf("building a database of %d messages and %d requests in %s", messages, requests, dir)
	began := time.Now()
	ctx := context.Background()
	st, err := store.OpenDir(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	p, err := st.CreateProject(ctx, "bench", "team")
	if err != nil {
		b.Fatal(err)
	}
	in, err := st.CreateInbox(ctx, p.ID, "bench")
	if err != nil {
		b.Fatal(err)
	}
	ep, err := st.CreateEndpoint(ctx, p.ID, "bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now().Add(-time.Duration(messages) * time.Millisecond)
	parallel(b, messages, func(i int) error {
		text := fmt.Sprintf("Hello user %d,\nconfirm your address: https://app.example.com/confirm?token=%08d\nThanks.\n", i, i)
		subject := fmt.Sprintf("Confirm your address #%d", i)
		if i%100 == 0 {
			subject = fmt.Sprintf("Your invoice %d", i)
		}
		to := fmt.Sprintf("user%d@example.com", i%5000)
		raw := "From: App <app@example.com>\r\nTo: " + to + "\r\nSubject: " + subject + "\r\n\r\n" + strings.ReplaceAll(text, "\n", "\r\n")
		_, err := st.InsertMessage(ctx, &store.NewMessage{InboxID: in.ID, ReceivedAt: start.Add(time.Duration(i) * time.Millisecond),
			EnvelopeFrom: "app@example.com", EnvelopeTo: []string{to}, From: &store.Address{Name: "App", Address: "app@example.com"},
			To: []store.Address{{Address: to}}, Subject: subject, Text: &text, Snippet: text[:60],
			Headers: []store.Header{{Name: "From", Values: []string{"App <app@example.com>"}}, {Name: "To", Values: []string{to}},
				{Name: "Subject", Values: []string{subject}}},
			Links: []store.Link{{URL: fmt.Sprintf("https://app.example.com/confirm?token=%08d", i), Origin: "https://app.example.com"}},
			Raw:   []byte(raw)})
		return err
	})
	parallel(b, requests, func(i int) error {
		_, err := st.InsertRequest(ctx, &store.NewRequest{EndpointID: ep.ID, ReceivedAt: time.Now(), Method: "POST",
			Path: "/hooks/" + strconv.Itoa(i%10), ContentType: "application/json", RemoteAddr: "127.0.0.1:5000",
			Headers: []store.Header{{Name: "Content-Type", Values: []string{"application/json"}}},
			Body:    []byte(fmt.Sprintf(`{"event":"payment.succeeded","n":%d}`, i))})
		return err
	})
	b.Logf("built in %s", time.Since(began).Round(time.Second))
}

func parallel(b *testing.B, n int, fn func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 64 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || failed.Load() != nil {
					return
				}
				if err := fn(i); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPages renders each page of the interface in-process, signed in,
// over the big database, and reports the server time per page.
func BenchmarkPages(b *testing.B) {
	st, _ := benchDB(b)
	ctx := context.Background()
	p, err := st.Project(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	inboxes, _ := st.Inboxes(ctx, p.ID, store.Page{Limit: 1})
	endpoints, _ := st.Endpoints(ctx, p.ID, store.Page{Limit: 1})
	in, ep := inboxes.Items[0], endpoints.Items[0]
	newest, _ := st.Messages(ctx, in.ID, store.MessageFilter{}, store.Page{Limit: 1})
	middle := idAtDepth(b, st, in.ID, int(in.MessageCount)/2)
	oldest := idAtDepth(b, st, in.ID, int(in.MessageCount))
	reqs, _ := st.Requests(ctx, ep.ID, store.RequestFilter{}, store.Page{Limit: 1})
	keys, _ := st.Keys(ctx, p.ID)
	if len(keys) == 0 {
		if _, _, err := st.CreateKey(ctx, p.ID); err != nil {
			b.Fatal(err)
		}
	}
	sess, err := st.CreateSession(ctx)
	if err != nil {
		b.Fatal(err)
	}
	h := web.New(st, web.Config{SMTPHost: "localhost", StartTLSPorts: []int{587}, TLSPorts: []int{465},
		CaptureBase: "http://127.0.0.1:7781", Logger: slog.New(slog.DiscardHandler)})

	base := "/projects/" + p.ID
	msg := base + "/messages/" + newest.Items[0].ID
	pages := []struct{ name, path string }{
		{"projects", "/projects"},
		{"keys", base + "/keys"},
		{"inboxes", base + "/inboxes"},
		{"endpoints", base + "/endpoints"},
		{"endpoint-settings", base + "/endpoints/" + ep.ID + "/settings"},
		{"messages", base + "/inboxes/" + in.ID},
		{"messages-middle", base + "/inboxes/" + in.ID + "?before=" + middle},
		{"messages-oldest", base + "/inboxes/" + in.ID + "?after=" + oldest},
		{"messages-to-filter", base + "/inboxes/" + in.ID + "?to=user42%40"},
		{"messages-subject-1pct", base + "/inboxes/" + in.ID + "?subject=invoice"},
		// The search box (SPEC §16): a word of one message, a word of 1 %.
		{"messages-search-rare", base + "/inboxes/" + in.ID + "?q=00042042"},
		{"messages-search-1pct", base + "/inboxes/" + in.ID + "?q=invoice"},
		{"message-html-tab", msg},
		{"message-text", msg + "?tab=text"},
		{"message-source", msg + "?tab=source"},
		{"message-headers", msg + "?tab=headers"},
		{"message-links", msg + "?tab=links"},
		{"message-codes", msg + "?tab=codes"},
		{"requests", base + "/endpoints/" + ep.ID},
		{"requests-path-filter", base + "/endpoints/" + ep.ID + "?path=/hooks/3"},
		{"requests-search", base + "/endpoints/" + ep.ID + "?q=payment.succeeded+%2242042%7D%22"},
		{"request", base + "/requests/" + reqs.Items[0].ID},
	}
	for _, pg := range pages {
		b.Run(pg.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", pg.path, nil)
			req.AddCookie(&http.Cookie{Name: "capture_session", Value: sess.Token})
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", pg.path, rec.Code, rec.Body.String())
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/page")
		})
	}
}

// idAtDepth returns the id of the message depth rows down the inbox
// (or of its oldest), found by paging with the store's cursors.
func idAtDepth(b *testing.B, st *store.Store, inboxID string, depth int) string {
	ctx := context.Background()
	pg := store.Page{Limit: store.MaxLimit}
	for seen := 0; ; {
		l, err := st.Messages(ctx, inboxID, store.MessageFilter{}, pg)
		if err != nil {
			b.Fatal(err)
		}
		seen += len(l.Items)
		if seen >= depth || l.Next == "" {
			return l.Items[len(l.Items)-1].ID
		}
		pg.Before = l.Next
	}
}
