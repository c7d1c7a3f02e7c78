package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func mustProject(t *testing.T, s *Store, name, plan string) Project {
	t.Helper()
	p, err := s.CreateProject(t.Context(), name, plan)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func insertRequests(t *testing.T, s *Store, endpointID string, paths ...string) []string {
	t.Helper()
	ids := make([]string, len(paths))
	for i, p := range paths {
		id, err := s.InsertRequest(t.Context(), &NewRequest{EndpointID: endpointID, ReceivedAt: now(), Method: "POST",
			Path: p, RemoteAddr: "127.0.0.1:1", Body: []byte(p)})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

func TestMigrationsAndReopen(t *testing.T) {
	path := newDatabase(t)
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	p := mustProject(t, s, "keep", "pro")
	var version int
	if err := s.queryRow(t.Context(), `SELECT version FROM schema_version`).Scan(&version); err != nil || version < 1 {
		t.Fatalf("schema_version = %d, %v", version, err)
	}
	if s.Shared() {
		var sync string
		if err := s.rdb.QueryRow(`SHOW synchronous_commit`).Scan(&sync); err != nil || sync != "on" {
			t.Fatalf("synchronous_commit = %q, %v (want on)", sync, err)
		}
		checkReopen(t, path, p)
		return
	}
	var journal string
	if err := s.rdb.QueryRow(`PRAGMA journal_mode`).Scan(&journal); err != nil || journal != "wal" {
		t.Fatalf("journal_mode = %q, %v", journal, err)
	}
	var fk, sync int
	if err := s.rdb.QueryRow(`PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
		t.Fatalf("foreign_keys = %d, %v", fk, err)
	}
	if err := s.rdb.QueryRow(`PRAGMA synchronous`).Scan(&sync); err != nil || sync != 1 {
		t.Fatalf("synchronous = %d, %v (want 1, NORMAL)", sync, err)
	}
	s.Close()
	checkReopen(t, path, p)
}

func checkReopen(t *testing.T, path string, p Project) {
	t.Helper()
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Project(t.Context(), "keep")
	if err != nil || got.ID != p.ID || got.Plan.Name != "pro" {
		t.Fatalf("after reopen: %+v, %v", got, err)
	}
}

func TestOpenBadPlaces(t *testing.T) {
	sqliteOnly(t, "data dirs and database files")
	dir := t.TempDir()
	file := filepath.Join(dir, "afile")
	os.WriteFile(file, []byte("x"), 0o600)
	if _, err := OpenDir(t.Context(), file); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("data dir that is a file: %v", err)
	}

	// A database file that is not SQLite is refused with its path named.
	bad := filepath.Join(dir, "bad")
	os.Mkdir(bad, 0o700)
	os.WriteFile(filepath.Join(bad, DBFile), []byte(strings.Repeat("not a database ", 100)), 0o600)
	if _, err := OpenDir(t.Context(), bad); err == nil || !strings.Contains(err.Error(), DBFile) {
		t.Fatalf("garbage database: %v", err)
	}

	if os.Geteuid() == 0 {
		t.Log("running as root: read-only permissions do not apply; skipping that case")
		return
	}
	ro := filepath.Join(dir, "ro")
	os.Mkdir(ro, 0o500)
	if _, err := OpenDir(t.Context(), ro); err == nil {
		t.Fatal("read-only data dir opened")
	}
}

func TestProjectsAndQuotas(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	p := mustProject(t, s, "web", "free")
	if _, err := s.CreateProject(ctx, "web", "free"); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate name: %v", err)
	}
	if _, err := s.CreateProject(ctx, "x", "gold"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad plan: %v", err)
	}
	if _, err := s.CreateProject(ctx, "  ", "free"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("blank name: %v", err)
	}
	// A name is printed in tables and terminals.
	for _, name := range []string{"evil\nname", "evil\x1b[2J", "tab\tname", "nul\x00", "del\x7f", "c1\u009b"} {
		if _, err := s.CreateProject(ctx, name, "free"); !errors.Is(err, ErrInvalid) {
			t.Errorf("project name %q: %v", name, err)
		}
		if _, err := s.CreateInbox(ctx, p.ID, name); !errors.Is(err, ErrInvalid) {
			t.Errorf("inbox name %q: %v", name, err)
		}
		if _, err := s.CreateEndpoint(ctx, p.ID, name, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("endpoint name %q: %v", name, err)
		}
	}
	if byID, err := s.Project(ctx, p.ID); err != nil || byID.Name != "web" {
		t.Fatalf("by id: %v %v", byID, err)
	}
	if _, err := s.Project(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}

	k, secret, err := s.CreateKey(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, "cap_") || len(secret) < 36 {
		t.Fatalf("secret %q", secret)
	}
	if _, _, err := s.CreateKey(ctx, p.ID); !errors.Is(err, ErrQuotaExceeded) || !strings.Contains(err.Error(), "quota_exceeded") {
		t.Fatalf("second key on free: %v", err)
	}
	gotKey, gotProject, err := s.Authenticate(ctx, secret)
	if err != nil || gotKey.ID != k.ID || gotProject.ID != p.ID {
		t.Fatalf("authenticate: %v %v %v", gotKey, gotProject, err)
	}
	// Only the hash is stored.
	var n int
	if err := s.queryRow(ctx, `SELECT count(*) FROM api_keys WHERE hash = ?`, []byte(secret)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatal("secret stored in clear")
	}
	if _, err := s.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RevokeKey(ctx, k.ID); !errors.Is(err, ErrInvalid) {
		t.Fatalf("revoke twice: %v", err)
	}
	if _, _, err := s.Authenticate(ctx, secret); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoked key authenticated: %v", err)
	}
	// A revoked key frees its slot.
	if _, _, err := s.CreateKey(ctx, p.ID); err != nil {
		t.Fatal(err)
	}

	for i := range 5 {
		if _, err := s.CreateInbox(ctx, p.ID, fmt.Sprint("in", i)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateEndpoint(ctx, p.ID, fmt.Sprint("ep", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateInbox(ctx, p.ID, "sixth"); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("sixth inbox: %v", err)
	}
	if _, err := s.CreateEndpoint(ctx, p.ID, "sixth", nil); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("sixth endpoint: %v", err)
	}
	if _, err := s.SetPlan(ctx, p.ID, "pro"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateInbox(ctx, p.ID, "sixth"); err != nil {
		t.Fatalf("sixth inbox on pro: %v", err)
	}
	u, err := s.Usage(ctx, p.ID)
	if err != nil || u.APIKeys != 1 || u.Inboxes != 6 || u.Endpoints != 5 {
		t.Fatalf("usage %+v %v", u, err)
	}
}

func TestInboxPasswordAndEndpointUpdate(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	p := mustProject(t, s, "p", "free")
	in, err := s.CreateInbox(ctx, p.ID, "mail")
	if err != nil {
		t.Fatal(err)
	}
	if len(in.SMTPPassword) < 24 || !strings.HasPrefix(in.ID, "inb_") {
		t.Fatalf("inbox %+v", in)
	}
	rotated, err := s.RotateInboxPassword(ctx, in.ID)
	if err != nil || rotated.SMTPPassword == in.SMTPPassword {
		t.Fatalf("rotate: %v %v", rotated, err)
	}
	if _, err := s.RotateInboxPassword(ctx, "inb_nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rotate unknown: %v", err)
	}
	other := mustProject(t, s, "other", "free")
	if _, err := s.Inbox(ctx, other.ID, in.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("other project's inbox: %v", err)
	}

	bad := "ftp://x"
	if _, err := s.CreateEndpoint(ctx, p.ID, "e", &bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad target: %v", err)
	}
	e, err := s.CreateEndpoint(ctx, p.ID, "e", nil)
	if err != nil {
		t.Fatal(err)
	}
	target, status, body, delay := "http://localhost:3000/x", 202, "ok", 1500*time.Millisecond
	e, err = s.UpdateEndpoint(ctx, e.ID, EndpointUpdate{Target: &target, Status: &status, Body: &body, Delay: &delay,
		Headers: map[string]string{"x-test": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if *e.TargetURL != target || e.Response.Status != 202 || e.Response.Body != "ok" ||
		e.Response.Delay != delay || e.Response.Headers["X-Test"] != "1" {
		t.Fatalf("updated %+v", e)
	}
	tooLong := 11 * time.Second
	for name, u := range map[string]EndpointUpdate{
		"status":  {Status: new(int)},
		"delay":   {Delay: &tooLong},
		"header":  {Headers: map[string]string{"bad name": "x"}},
		"length":  {Headers: map[string]string{"content-length": "99"}},
		"chunked": {Headers: map[string]string{"Transfer-Encoding": "chunked"}},
		"port":    {Target: ptr("http://127.0.0.1:99999/x")},
		"port 0":  {Target: ptr("http://127.0.0.1:0/x")},
		// The body "ok" is saved: HTTP sends none with these.
		"204 with the saved body": {Status: ptr(204)},
		"304 with a new body":     {Status: ptr(304), Body: ptr("x")},
	} {
		if _, err := s.UpdateEndpoint(ctx, e.ID, u); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got, err := s.Endpoint(ctx, "", e.ID); err != nil || got.Response.Status != 202 || got.Response.Body != "ok" || *got.TargetURL != target {
		t.Fatalf("a refused update changed the endpoint: %+v %v", got, err)
	}
	if got, err := s.UpdateEndpoint(ctx, e.ID, EndpointUpdate{Status: ptr(204), Body: ptr("")}); err != nil || got.Response.Status != 204 {
		t.Fatalf("204 with the body cleared: %+v %v", got, err)
	}
	if _, err := s.UpdateEndpoint(ctx, e.ID, EndpointUpdate{Body: ptr("late")}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a body for a 204 endpoint: %v", err)
	}
	if _, err := s.UpdateEndpoint(ctx, e.ID, EndpointUpdate{Status: &status, Body: &body}); err != nil {
		t.Fatal(err)
	}
	e, err = s.UpdateEndpoint(ctx, e.ID, EndpointUpdate{ClearTarget: true})
	if err != nil || e.TargetURL != nil || e.Response.Status != 202 {
		t.Fatalf("clear target: %+v %v", e, err)
	}
}

func TestBootstrapOnce(t *testing.T) {
	s := newStore(t)
	b, err := s.EnsureBootstrap(t.Context())
	if err != nil || !b.Created || b.Secret == "" || b.Inbox.ID == "" || b.Endpoint.ID == "" {
		t.Fatalf("first: %+v %v", b, err)
	}
	again, err := s.EnsureBootstrap(t.Context())
	if err != nil || again.Created || again.Secret != "" || again.Inbox.ID != b.Inbox.ID || again.Endpoint.ID != b.Endpoint.ID {
		t.Fatalf("second: %+v %v", again, err)
	}
	if _, p, err := s.Authenticate(t.Context(), b.Secret); err != nil || p.Name != DefaultName || p.Plan.Name != "free" {
		t.Fatalf("bootstrap key: %v %v", p, err)
	}
}

func TestPaginationBothWays(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	p := mustProject(t, s, "p", "team")
	e, _ := s.CreateEndpoint(ctx, p.ID, "e", nil)
	other, _ := s.CreateEndpoint(ctx, p.ID, "other", nil)
	paths := make([]string, 7)
	for i := range paths {
		paths[i] = fmt.Sprintf("/%d", i)
	}
	ids := insertRequests(t, s, e.ID, paths...) // ids[6] is the newest
	otherIDs := insertRequests(t, s, other.ID, "/x")

	idsOf := func(l List[RequestSummary]) []string {
		out := []string{}
		for _, it := range l.Items {
			out = append(out, it.ID)
		}
		return out
	}
	eq := func(name string, got, want []string) {
		t.Helper()
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: got %v want %v", name, got, want)
		}
	}

	l, err := s.Requests(ctx, e.ID, RequestFilter{}, Page{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	eq("newest page", idsOf(l), []string{ids[6], ids[5], ids[4]})
	if l.Next != ids[4] {
		t.Errorf("next = %s", l.Next)
	}
	l, _ = s.Requests(ctx, e.ID, RequestFilter{}, Page{Limit: 3, Before: l.Next})
	eq("before", idsOf(l), []string{ids[3], ids[2], ids[1]})
	l, _ = s.Requests(ctx, e.ID, RequestFilter{}, Page{Limit: 3, Before: l.Next})
	eq("last page", idsOf(l), []string{ids[0]})
	if l.Next != "" {
		t.Errorf("last page next = %q", l.Next)
	}

	l, _ = s.Requests(ctx, e.ID, RequestFilter{}, Page{Limit: 2, After: ids[1]})
	eq("after", idsOf(l), []string{ids[3], ids[2]})
	if l.Next != ids[3] {
		t.Errorf("after next = %q", l.Next)
	}
	l, _ = s.Requests(ctx, e.ID, RequestFilter{}, Page{Limit: 5, After: ids[3]})
	eq("after to the end", idsOf(l), []string{ids[6], ids[5], ids[4]})
	if l.Next != "" {
		t.Errorf("caught-up next = %q", l.Next)
	}
	l, _ = s.Requests(ctx, e.ID, RequestFilter{}, Page{After: ids[6]})
	eq("after newest", idsOf(l), []string{})

	for name, pg := range map[string]Page{
		"malformed":        {Before: "garbage"},
		"other collection": {After: otherIDs[0]},
		"never existed":    {Before: "req_AAAAAAAAAAAAAAAAAAAA"},
		"other kind of id": {Before: e.ID},
	} {
		if _, err := s.Requests(ctx, e.ID, RequestFilter{}, pg); !errors.Is(err, ErrInvalidCursor) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A deleted capture is no longer a valid cursor.
	if err := s.DeleteRequest(ctx, p.ID, ids[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Requests(ctx, e.ID, RequestFilter{}, Page{After: ids[2]}); !errors.Is(err, ErrInvalidCursor) {
		t.Errorf("deleted cursor: %v", err)
	}
	if _, err := s.Requests(ctx, e.ID, RequestFilter{}, Page{Before: ids[1], After: ids[3]}); !errors.Is(err, ErrInvalid) {
		t.Errorf("before+after: %v", err)
	}
	got, _ := s.Endpoint(ctx, p.ID, e.ID)
	if got.RequestCount != 6 {
		t.Errorf("request_count = %d", got.RequestCount)
	}
}

func TestRequestFilters(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	p := mustProject(t, s, "p", "free")
	e, _ := s.CreateEndpoint(ctx, p.ID, "e", nil)
	first := insertRequests(t, s, e.ID, "/ci/1/hook", "/ci/2/hook", "/other", "/ci/1/again")
	time.Sleep(2 * time.Millisecond) // received_at has millisecond precision
	for _, m := range []string{"PUT", "propfind"} {
		if _, err := s.InsertRequest(ctx, &NewRequest{EndpointID: e.ID, ReceivedAt: now(), Method: m, Path: "/ci/1/m"}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(f RequestFilter) int {
		l, err := s.Requests(ctx, e.ID, f, Page{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}
	if n := count(RequestFilter{PathPrefix: "/ci/1/"}); n != 4 {
		t.Errorf("path prefix: %d", n)
	}
	if n := count(RequestFilter{PathPrefix: "/ci/1%"}); n != 0 {
		t.Errorf("prefix is literal, not a pattern: %d", n)
	}
	if n := count(RequestFilter{Method: "post"}); n != 4 {
		t.Errorf("method case-insensitive: %d", n)
	}
	if n := count(RequestFilter{Method: "PROPFIND"}); n != 1 {
		t.Errorf("propfind: %d", n)
	}
	r, err := s.Request(ctx, p.ID, first[3])
	if err != nil {
		t.Fatal(err)
	}
	if n := count(RequestFilter{Since: r.ReceivedAt}); n != 2 {
		t.Errorf("since excludes the item's own time: %d", n)
	}
}

func TestMessagesRoundTrip(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	p := mustProject(t, s, "p", "free")
	in, _ := s.CreateInbox(ctx, p.ID, "in")
	text, html, linkText := "Hello Zoë", "<p>Hello</p>", "Confirm"
	date := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	id, err := s.InsertMessage(ctx, &NewMessage{
		InboxID: in.ID, ReceivedAt: now(), EnvelopeFrom: "bounce@app.test", EnvelopeTo: []string{"a@x.test", "bcc@x.test"},
		From: &Address{Name: "Ápp", Address: "noreply@app.test"}, To: []Address{{Address: "a@x.test"}},
		Cc: []Address{{Name: "C", Address: "c@x.test"}}, ReplyTo: []Address{{Address: "help@app.test"}},
		Subject: "Welcome ÉTÉ", Date: &date, MessageID: "m1@app.test",
		Headers: []Header{{Name: "Subject", Values: []string{"Welcome ÉTÉ"}}, {Name: "X-Two", Values: []string{"1", "2"}}},
		Text:    &text, HTML: &html,
		Links:       []Link{{URL: "https://app.test/c?t=1", Text: &linkText, Origin: "https://app.test"}, {URL: "http://x.test/", Origin: "http://x.test"}},
		Attachments: []NewAttachment{{Filename: "a.pdf", ContentType: "application/pdf", Data: []byte("%PDF")}, {Filename: "i.png", ContentType: "image/png", ContentID: "img1", Inline: true, Data: []byte{0, 1}}},
		Snippet:     "Hello Zoë", Raw: []byte("raw bytes\r\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Message(ctx, p.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "Welcome ÉTÉ" || m.From.Name != "Ápp" || len(m.To) != 1 || len(m.Cc) != 1 || len(m.ReplyTo) != 1 ||
		len(m.EnvelopeTo) != 2 || *m.Text != text || *m.HTML != html || !m.Date.Equal(date) || m.MessageID != "m1@app.test" ||
		len(m.Links) != 2 || *m.Links[0].Text != "Confirm" || len(m.Attachments) != 2 || !m.Attachments[1].Inline ||
		m.Attachments[1].ContentID != "img1" || m.AttachmentCount != 2 || m.Size != 11 || len(m.Headers) != 2 {
		t.Fatalf("message %+v", m)
	}
	links, _, _ := s.MessageLinks(ctx, p.ID, id, LinkFilter{Match: "t=1"})
	if len(links) != 1 {
		t.Fatalf("match: %v", links)
	}
	_, data, err := s.AttachmentData(ctx, p.ID, id, m.Attachments[0].ID)
	if err != nil || string(data) != "%PDF" {
		t.Fatalf("attachment %q %v", data, err)
	}
	raw, _ := s.MessageRaw(ctx, p.ID, id)
	if string(raw) != "raw bytes\r\n" {
		t.Fatalf("raw %q", raw)
	}
	other := mustProject(t, s, "other", "free")
	if _, err := s.Message(ctx, other.ID, id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("other project: %v", err)
	}
	for f, want := range map[MessageFilter]int{
		{To: "A@X"}:      1,
		{To: "bcc@"}:     1, // envelope recipients count
		{To: "c@x.test"}: 1, // Cc counts
		{To: "zzz"}:      0,
		{From: "ápp"}:    1, // non-ASCII case folding
		{From: "bounce"}: 1,
		{Subject: "été"}: 1,
	} {
		l, err := s.Messages(ctx, in.ID, f, Page{})
		if err != nil || len(l.Items) != want {
			t.Errorf("%+v: %d items, %v", f, len(l.Items), err)
		}
	}
	l, _ := s.Messages(ctx, in.ID, MessageFilter{}, Page{})
	if len(l.Items[0].To) != 1 || len(l.Items[0].Cc) != 1 {
		t.Errorf("list item recipients %+v", l.Items[0])
	}
	if err := s.DeleteMessage(ctx, other.ID, id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete from other project: %v", err)
	}
	if err := s.DeleteMessage(ctx, p.ID, id); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.queryRow(ctx, `SELECT count(*) FROM attachments`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d child rows left after delete", n)
	}
}

func TestMessageCodesAndLinkKinds(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	p := mustProject(t, s, "p", "free")
	in, _ := s.CreateInbox(ctx, p.ID, "in")
	verify := "Verify email"
	m := &NewMessage{
		InboxID: in.ID, ReceivedAt: now(), EnvelopeFrom: "a@app.test", Subject: "482913 is your code",
		Links: []Link{
			{URL: "https://app.test/verify?t=1", Text: &verify, Origin: "https://app.test", Kind: LinkVerify},
			{URL: "https://app.test/help", Origin: "https://app.test"}, // no kind: other
			{URL: "https://app.test/u?t=1", Origin: "https://app.test", Kind: LinkUnsubscribe},
		},
		LinksTruncated: true,
		Codes:          []Code{{"482913", "482913 is your code"}, {"118734", "the old code 118734"}},
		Raw:            []byte("x"),
	}
	id, err := s.InsertMessage(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Message(ctx, p.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Codes, m.Codes) || !got.LinksTruncated {
		t.Errorf("codes %+v, links truncated %v", got.Codes, got.LinksTruncated)
	}
	var kinds []string
	for _, l := range got.Links {
		kinds = append(kinds, l.Kind)
	}
	if !slices.Equal(kinds, []string{LinkVerify, LinkOther, LinkUnsubscribe}) || *got.Links[0].Text != verify {
		t.Errorf("links %+v", got.Links)
	}

	for _, tt := range []struct {
		f    LinkFilter
		want []string
	}{
		{LinkFilter{}, []string{"https://app.test/verify?t=1", "https://app.test/help", "https://app.test/u?t=1"}},
		{LinkFilter{Kind: LinkVerify}, []string{"https://app.test/verify?t=1"}},
		{LinkFilter{Kind: LinkOther}, []string{"https://app.test/help"}},
		{LinkFilter{Kind: LinkLogin}, nil},
		{LinkFilter{Match: "t=1", Kind: LinkUnsubscribe}, []string{"https://app.test/u?t=1"}},
		{LinkFilter{Match: "help", Kind: LinkVerify}, nil},
	} {
		links, truncated, err := s.MessageLinks(ctx, p.ID, id, tt.f)
		if err != nil {
			t.Fatalf("%+v: %v", tt.f, err)
		}
		if !truncated {
			t.Errorf("%+v: links_truncated false, want the message's true", tt.f)
		}
		var urls []string
		for _, l := range links {
			urls = append(urls, l.URL)
		}
		if !slices.Equal(urls, tt.want) {
			t.Errorf("%+v: %q, want %q", tt.f, urls, tt.want)
		}
	}
	if _, _, err := s.MessageLinks(ctx, p.ID, id, LinkFilter{Kind: "magic"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown kind filter: %v", err)
	}

	// A message without codes reads back an empty list, not nil.
	plain, err := s.InsertMessage(ctx, &NewMessage{InboxID: in.ID, ReceivedAt: now(), EnvelopeFrom: "a@app.test", Raw: []byte("y")})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Message(ctx, p.ID, plain); got.Codes == nil || len(got.Codes) != 0 || got.LinksTruncated {
		t.Errorf("message without codes: %+v, %v", got.Codes, got.LinksTruncated)
	}

	// Bad input is refused and stores nothing.
	for name, bad := range map[string]*NewMessage{
		"link kind":  {InboxID: in.ID, EnvelopeFrom: "a@app.test", Links: []Link{{URL: "https://x.test/", Origin: "https://x.test", Kind: "magic"}}},
		"empty code": {InboxID: in.ID, EnvelopeFrom: "a@app.test", Codes: []Code{{Value: "", Context: "x"}}},
	} {
		if _, err := s.InsertMessage(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if l, _ := s.Messages(ctx, in.ID, MessageFilter{}, Page{}); len(l.Items) != 2 {
		t.Errorf("%d messages stored, want 2", len(l.Items))
	}
}

func TestWatchWakesOnCommit(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	p := mustProject(t, s, "p", "free")
	e, _ := s.CreateEndpoint(ctx, p.ID, "e", nil)
	other, _ := s.CreateEndpoint(ctx, p.ID, "o", nil)
	ch := s.Watch(e.ID)
	otherCh := s.Watch(other.ID)
	insertRequests(t, s, e.ID, "/")
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("watch not woken by a commit")
	}
	select {
	case <-otherCh:
		t.Fatal("another collection's watcher woke")
	default:
	}
}

func TestConcurrentInsertsAllCommitted(t *testing.T) {
	s := newStore(t)
	p := mustProject(t, s, "p", "team")
	e, _ := s.CreateEndpoint(t.Context(), p.ID, "e", nil)
	const writers, each = 16, 50
	var wg sync.WaitGroup
	ids := make(chan string, writers*each)
	for range writers {
		wg.Go(func() {
			for range each {
				id, err := s.InsertRequest(context.Background(), &NewRequest{EndpointID: e.ID, ReceivedAt: now(), Method: "POST", Path: "/"})
				if err != nil {
					t.Error(err)
					return
				}
				// Acknowledged means readable.
				if _, err := s.Request(context.Background(), p.ID, id); err != nil {
					t.Error(err)
				}
				ids <- id
			}
		})
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		seen[id] = true
	}
	got, _ := s.Endpoint(t.Context(), p.ID, e.ID)
	if len(seen) != writers*each || got.RequestCount != writers*each {
		t.Fatalf("%d ids, count %d", len(seen), got.RequestCount)
	}
}

func TestFailingWriteDoesNotFailItsBatch(t *testing.T) {
	s := newStore(t)
	p := mustProject(t, s, "p", "team")
	e, _ := s.CreateEndpoint(t.Context(), p.ID, "e", nil)
	var wg sync.WaitGroup
	errs := make([]error, 40)
	for i := range errs {
		wg.Go(func() {
			endpoint := e.ID
			if i%4 == 0 {
				endpoint = "whe_missing" // foreign key violation
			}
			_, errs[i] = s.InsertRequest(context.Background(), &NewRequest{EndpointID: endpoint, ReceivedAt: now(), Method: "POST"})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if (i%4 == 0) != (err != nil) {
			t.Errorf("insert %d: %v", i, err)
		}
	}
	got, _ := s.Endpoint(t.Context(), p.ID, e.ID)
	if got.RequestCount != 30 {
		t.Fatalf("count %d", got.RequestCount)
	}
}

func TestPrune(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	p := mustProject(t, s, "p", "free")
	e, _ := s.CreateEndpoint(ctx, p.ID, "e", nil)
	in, _ := s.CreateInbox(ctx, p.ID, "i")
	old := now().Add(-8 * 24 * time.Hour)
	for range 3 {
		s.InsertRequest(ctx, &NewRequest{EndpointID: e.ID, ReceivedAt: old, Method: "POST"})
		s.InsertMessage(ctx, &NewMessage{InboxID: in.ID, ReceivedAt: old, Raw: []byte("x")})
	}
	fresh := insertRequests(t, s, e.ID, "/new")
	n, err := s.Prune(ctx, time.Now())
	if err != nil || n != 6 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	l, _ := s.Requests(ctx, e.ID, RequestFilter{}, Page{})
	if len(l.Items) != 1 || l.Items[0].ID != fresh[0] {
		t.Fatalf("left %+v", l.Items)
	}
	got, _ := s.Endpoint(ctx, p.ID, e.ID)
	gotIn, _ := s.Inbox(ctx, p.ID, in.ID)
	if got.RequestCount != 1 || gotIn.MessageCount != 0 {
		t.Fatalf("counts %d %d", got.RequestCount, gotIn.MessageCount)
	}
}

func TestPruneOverCap(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	p := mustProject(t, s, "p", "free")
	e, _ := s.CreateEndpoint(ctx, p.ID, "e", nil)
	// Pretend the endpoint already holds the cap, then add three more.
	s.write(ctx, func(t *wtx) error {
		_, err := t.exec(`UPDATE endpoints SET request_count = ? WHERE id = ?`, 10_000-3, e.ID)
		return err
	})
	ids := insertRequests(t, s, e.ID, "/1", "/2", "/3", "/4", "/5", "/6")
	n, err := s.Prune(ctx, time.Now())
	if err != nil || n != 3 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	l, _ := s.Requests(ctx, e.ID, RequestFilter{}, Page{})
	if len(l.Items) != 3 || l.Items[2].ID != ids[3] {
		t.Fatalf("oldest not evicted first: %+v", l.Items)
	}
}

func TestDeliveries(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	p := mustProject(t, s, "p", "free")
	e, _ := s.CreateEndpoint(ctx, p.ID, "e", nil)
	id := insertRequests(t, s, e.ID, "/")[0]
	ok, fail := 204, 500
	errText := "connection refused"
	for _, nd := range []NewDelivery{
		{Kind: DeliveryReplay, TargetURL: "http://t/", ResponseStatus: &ok, Duration: 12 * time.Millisecond},
		{Kind: DeliveryForward, TargetURL: "http://t/", ResponseStatus: &fail},
		{Kind: DeliveryForward, TargetURL: "http://t/", Error: &errText},
	} {
		if _, err := s.AddDelivery(ctx, p.ID, id, nd); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.AddDelivery(ctx, p.ID, id, NewDelivery{Kind: "carrier pigeon"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad kind: %v", err)
	}
	other := mustProject(t, s, "o", "free")
	if _, err := s.AddDelivery(ctx, other.ID, id, NewDelivery{Kind: DeliveryForward}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("other project: %v", err)
	}
	r, _ := s.Request(ctx, p.ID, id)
	if len(r.Deliveries) != 3 || r.Deliveries[0].Status != DeliveryDelivered || r.Deliveries[0].DurationMS != 12 ||
		r.Deliveries[1].Status != DeliveryFailed || *r.Deliveries[2].Error != errText {
		t.Fatalf("deliveries %+v", r.Deliveries)
	}
}

func TestLockedDatabaseIsAClearError(t *testing.T) {
	s := newStore(t)
	// Another process holding the write lock past the busy timeout.
	release := lockDatabase(t, s)
	_, err := s.CreateProject(t.Context(), "blocked", "free")
	if err == nil || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("write under another writer's lock: %v", err)
	}
	release()
	if _, err := s.Project(t.Context(), "blocked"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the failed write changed something: %v", err)
	}
	if _, err := s.CreateProject(t.Context(), "blocked", "free"); err != nil {
		t.Fatalf("after the lock is gone: %v", err)
	}
}

// On PostgreSQL a commit by another process (another replica) wakes this
// one's waiters, and only for its collection.
func TestWatchWakesAcrossProcesses(t *testing.T) {
	s := newStore(t)
	if !s.Shared() {
		t.Skip("PostgreSQL only: one process serves a SQLite database, and its own commits wake its waiters")
	}
	ctx := t.Context()
	p := mustProject(t, s, "p", "free")
	e, _ := s.CreateEndpoint(ctx, p.ID, "e", nil)
	other, _ := s.CreateEndpoint(ctx, p.ID, "o", nil)
	replica := openAgain(t, s)
	ch, otherCh := s.Watch(e.ID), s.Watch(other.ID)
	insertRequests(t, replica, e.ID, "/from-the-other-replica")
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("a commit by another process did not wake the watcher")
	}
	select {
	case <-otherCh:
		t.Fatal("another collection's watcher woke")
	default:
	}
	// What the other process committed is there to read once woken.
	l, err := s.Requests(ctx, e.ID, RequestFilter{}, Page{})
	if err != nil || len(l.Items) != 1 || l.Items[0].Path != "/from-the-other-replica" {
		t.Fatalf("after the wake: %+v, %v", l.Items, err)
	}
	// A settings change there is seen here without a write of its own.
	before := s.SettingsSeen()
	status := 201
	if _, err := replica.UpdateEndpoint(ctx, e.ID, EndpointUpdate{Status: &status}); err != nil {
		t.Fatal(err)
	}
	if v, err := s.SettingsVersion(ctx); err != nil || v <= before {
		t.Fatalf("settings version %d after a change elsewhere, was %d (%v)", v, before, err)
	}
}

// The connection that listens for other replicas' commits comes back when
// PostgreSQL drops it, and commits after that wake waiters again.
func TestListenerReconnects(t *testing.T) {
	s := newStore(t)
	if !s.Shared() {
		t.Skip("PostgreSQL only: SQLite has no connection to lose")
	}
	ctx := t.Context()
	p := mustProject(t, s, "p", "free")
	e, _ := s.CreateEndpoint(ctx, p.ID, "e", nil)
	replica := openAgain(t, s)
	admin, err := sql.Open("pgx", s.b.(*postgresDB).url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	// The listeners' connections are the ones whose last statement was a
	// LISTEN; the replica's is dropped too, which does not matter here.
	listeners := func() (pids []int) {
		rows, err := admin.QueryContext(ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE 'LISTEN%'`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var pid int
			rows.Scan(&pid)
			pids = append(pids, pid)
		}
		return pids
	}
	before := listeners()
	if len(before) != 2 {
		t.Fatalf("%d listening connections, want one per store", len(before))
	}
	woken := s.Watch(e.ID)
	for _, pid := range before {
		if _, err := admin.ExecContext(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
	}
	// Whatever was announced while nobody listened is lost: the new
	// connection wakes every waiter to look again.
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Fatal("waiters were not woken when the listener came back")
	}
	// Wait (boundedly) until both stores listen again, then a commit by
	// the replica wakes this store's waiter as before.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := 0; len(listeners()) < 2; i++ {
		if i == 1000 {
			t.Fatal("the listeners did not reconnect")
		}
		<-tick.C
	}
	// Twice: the reconnect's own wake-up may close the first channel.
	for i := range 2 {
		ch := s.Watch(e.ID)
		insertRequests(t, replica, e.ID, fmt.Sprint("/after-the-drop/", i))
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("a commit by another process after the reconnect did not wake the watcher")
		}
	}
}

// Addresses and the TLS files are rows of settings: absent until set, and
// replaced, never added to, when set again.
func TestSettingsRows(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	if _, ok, err := s.Addresses(ctx); ok || err != nil {
		t.Fatalf("addresses before any serve: ok %v, %v", ok, err)
	}
	if _, err := s.TLSFile(ctx, "ca.pem"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("TLS file never set: %v", err)
	}
	for _, base := range []string{"http://127.0.0.1:20001", "http://127.0.0.1:20002"} {
		want := Addresses{HTTPBase: base, APIBase: base + "/api/v1", SMTPHost: "127.0.0.1", StartTLSPorts: []int{20025}}
		if err := s.SetAddresses(ctx, want); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := s.Addresses(ctx); !ok || err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("addresses %+v, %v, %v; want %+v", got, ok, err, want)
		}
		pem := "-----BEGIN CERTIFICATE-----\n" + base + "\n"
		if err := s.SetTLSFile(ctx, "ca.pem", []byte(pem)); err != nil {
			t.Fatal(err)
		}
		if got, err := s.TLSFile(ctx, "ca.pem"); err != nil || string(got) != pem {
			t.Fatalf("TLS file %q, %v; want %q", got, err, pem)
		}
	}
	var rows int
	if err := s.queryRow(ctx, `SELECT count(*) FROM settings WHERE name IN ('addresses', 'tls/ca.pem')`).Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("%d settings rows (%v); want one for each name", rows, err)
	}
}

// IsUnavailable tells a database out of reach (here a PostgreSQL that
// refuses the connection) and ErrUnavailable from a call that was wrong.
func TestIsUnavailable(t *testing.T) {
	db, err := sql.Open("pgx", "postgres://capture@127.0.0.1:1/capture?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	refused := db.PingContext(t.Context())
	if refused == nil {
		t.Fatal("a PostgreSQL answered on port 1")
	}
	s := newStore(t)
	var n int
	wrong := s.queryRow(t.Context(), `SELECT no_such_column FROM messages`).Scan(&n)
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{refused, true},
		{fmt.Errorf("list: %w", refused), true},
		{ErrUnavailable, true},
		{wrong, false},
		{ErrNotFound, false},
		{nil, false},
	} {
		if got := IsUnavailable(tt.err); got != tt.want {
			t.Errorf("IsUnavailable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// A link is stored as a URI; match finds it by its escapes or by the text
// they stand for, in any case.
func TestLinkMatchDecodesEscapes(t *testing.T) {
	l := Link{URL: "https://example.de/%C3%BCber/a%20b?q=1", Kind: LinkOther}
	for match, want := range map[string]bool{
		"über": true, "ÜBER": true, "%c3%bc": true, "a b": true, "a%20b": true, "q=1": true, "uber": false,
	} {
		if got := (LinkFilter{Match: match}).selects(l); got != want {
			t.Errorf("match %q: %v, want %v", match, got, want)
		}
	}
	// An escaped match finds the URL as sent, unescaped.
	sent := Link{URL: "https://app.test/verify?token=k3&email=a@example.com", Kind: LinkVerify}
	for match, want := range map[string]bool{
		"%40example.com": true, "verify%3Ftoken": true, "verify%3ftoken=K3": true, "@example.com": true, "%40other": false,
	} {
		if got := (LinkFilter{Match: match}).selects(sent); got != want {
			t.Errorf("match %q on %s: %v, want %v", match, sent.URL, got, want)
		}
	}
}
