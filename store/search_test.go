package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/store/pgtest"
)

// searchFixture is a store with one inbox and one endpoint whose captures
// have names, so that tests can say which ones a search must find.
type searchFixture struct {
	t        *testing.T
	s        *Store
	project  Project
	inbox    Inbox
	endpoint Endpoint
	names    map[string]string // capture id → name
}

// newStoreIndexedByHand is newStore whose staged index rows move into
// FTS5 only when a test says: no commit of its own runs in between.
func newStoreIndexedByHand(t *testing.T) *Store {
	t.Helper()
	if pgtest.Requested() {
		return newStore(t)
	}
	s, err := openSQLite(t.Context(), filepath.Join(t.TempDir(), DBFile), time.Hour, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newSearchFixture's store moves staged index rows only when the test
// says (indexed): each search can be tried before and after. On
// PostgreSQL nothing is staged: a capture is indexed as it is stored.
func newSearchFixture(t *testing.T) *searchFixture {
	t.Helper()
	s := newStoreIndexedByHand(t)
	p := mustProject(t, s, "search", "team")
	in, err := s.CreateInbox(t.Context(), p.ID, "in")
	if err != nil {
		t.Fatal(err)
	}
	ep, err := s.CreateEndpoint(t.Context(), p.ID, "ep", nil)
	if err != nil {
		t.Fatal(err)
	}
	return &searchFixture{t: t, s: s, project: p, inbox: in, endpoint: ep, names: map[string]string{}}
}

// staged counts the index rows not yet moved into FTS5.
func (f *searchFixture) staged() int {
	f.t.Helper()
	var n int
	if err := f.s.rdb.QueryRow(`SELECT (SELECT count(*) FROM messages_search_staged) +
		(SELECT count(*) FROM requests_search_staged)`).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// bothWays runs check with the index rows staged, then moves them into
// FTS5 and runs it again: a search finds the same either way.
func (f *searchFixture) bothWays(check func(t *testing.T)) {
	f.t.Helper()
	if f.s.Shared() {
		f.t.Run("indexed", check)
		return
	}
	if f.staged() == 0 {
		f.t.Fatal("nothing staged to search")
	}
	f.t.Run("staged", check)
	if err := f.s.indexStaged(f.t.Context()); err != nil {
		f.t.Fatal(err)
	}
	if n := f.staged(); n != 0 {
		f.t.Fatalf("%d index rows still staged", n)
	}
	f.t.Run("indexed", check)
}

// message stores m in the fixture's inbox under name and returns its id.
func (f *searchFixture) message(name string, m NewMessage) string {
	f.t.Helper()
	m.InboxID = f.inbox.ID
	if m.ReceivedAt.IsZero() {
		m.ReceivedAt = now()
	}
	if m.Raw == nil {
		m.Raw = []byte("raw")
	}
	id, err := f.s.InsertMessage(f.t.Context(), &m)
	if err != nil {
		f.t.Fatal(err)
	}
	f.names[id] = name
	return id
}

func (f *searchFixture) request(name string, r NewRequest) string {
	f.t.Helper()
	r.EndpointID = f.endpoint.ID
	if r.ReceivedAt.IsZero() {
		r.ReceivedAt = now()
	}
	if r.Method == "" {
		r.Method = "POST"
	}
	id, err := f.s.InsertRequest(f.t.Context(), &r)
	if err != nil {
		f.t.Fatal(err)
	}
	f.names[id] = name
	return id
}

// messages lists every message the filter finds, newest first, by name.
func (f *searchFixture) messages(mf MessageFilter) []string {
	f.t.Helper()
	l, err := f.s.Messages(f.t.Context(), f.inbox.ID, mf, Page{Limit: MaxLimit})
	if err != nil {
		f.t.Fatalf("Messages(%+v): %v", mf, err)
	}
	return named(f, l.Items, func(m MessageSummary) string { return m.ID })
}

func (f *searchFixture) requests(rf RequestFilter) []string {
	f.t.Helper()
	l, err := f.s.Requests(f.t.Context(), f.endpoint.ID, rf, Page{Limit: MaxLimit})
	if err != nil {
		f.t.Fatalf("Requests(%+v): %v", rf, err)
	}
	return named(f, l.Items, func(r RequestSummary) string { return r.ID })
}

// named is the fixture's names of listed captures, in their order.
func named[T any](f *searchFixture, items []T, id func(T) string) []string {
	names := []string{}
	for _, it := range items {
		names = append(names, f.names[id(it)])
	}
	return names
}

func ptr[T any](v T) *T { return &v }

func TestSearchMessages(t *testing.T) {
	f := newSearchFixture(t)
	f.message("welcome", NewMessage{Subject: "Welcome to Élan", EnvelopeFrom: "bounce@elan.example",
		From: &Address{Name: "Zoë Smith", Address: "zoe@elan.example"},
		To:   []Address{{Name: "Bob Jones", Address: "bob@example.org"}},
		Text: ptr("Your code is xyzabc123. Thanks!")})
	f.message("reset", NewMessage{Subject: "Account notice", EnvelopeFrom: "a@b.example",
		HTML: ptr(`<html><head><title>titleword</title><style>.stylish{color:red}</style></head><body>` +
			`<table><tr><td>Reset</td><td>your</td></tr></table><p>Your <b>pass</b>word &amp; more&nbsp;here</p>` +
			`<script>var hidden = "scriptword";</script></body></html>`),
		Attachments: []NewAttachment{{Filename: "invoice-2024.pdf", ContentType: "application/pdf", Data: []byte("%PDF")}}})
	f.message("fox", NewMessage{Subject: "Pangram", EnvelopeFrom: "a@b.example",
		Cc:   []Address{{Name: "Carol Café", Address: "carol@cafe.example"}},
		Text: ptr("The quick brown fox jumps over the lazy dog.")})
	f.message("scrambled", NewMessage{Subject: "Words", EnvelopeFrom: "a@b.example",
		Text: ptr("quick and brown are apart here, as is the fox")})
	f.message("places", NewMessage{Subject: "Łódź Ørsted Đorđe Straße Ærø Œuvre Þór İstanbul", EnvelopeFrom: "a@b.example"})
	f.message("long", NewMessage{Subject: "Signature", EnvelopeFrom: "a@b.example",
		Text: ptr("sig=0123456789abcdef0123456789abcdefxyzw56789 ÅNGSTRÖM ﬁnal ＦＵＬＬ")})
	// More tokens hold "qxz" than one word may become in the index query:
	// the search falls back to checking the text.
	var many []string
	for i := range maxExpansion + 20 {
		many = append(many, fmt.Sprintf("a%dqxz", i))
	}
	f.message("many", NewMessage{Subject: "Many", EnvelopeFrom: "a@b.example", Text: ptr(strings.Join(many, " "))})
	// A code set out in groups is found by the value its codes give.
	f.message("code", NewMessage{Subject: "Dein Code", EnvelopeFrom: "a@b.example",
		Text: ptr("Dein Bestätigungscode: 582 931. Oder K7P-2QX."), Codes: []Code{{Value: "582931"}, {Value: "K7P2QX"}}})

	cases := []struct {
		q    string
		want []string // newest first
	}{
		{"xyzabc123", []string{"welcome"}},
		{"abc12", []string{"welcome"}},            // inside a token
		{"ABC12", []string{"welcome"}},            // case
		{"elan", []string{"welcome"}},             // É
		{"ÉLAN", []string{"welcome"}},             // query side too
		{"zoe", []string{"welcome"}},              // From name, ë
		{"zoe@elan.example", []string{"welcome"}}, // From address
		{"bob jones", []string{"welcome"}},        // To name
		{"bob@example.org", []string{"welcome"}},  // To address
		{"bounce", []string{}},                    // the envelope is not searched
		{"reset your", []string{"reset"}},         // HTML text, cells apart
		{`"reset your"`, []string{"reset"}},       // a phrase across cells
		{"password", []string{"reset"}},           // inline tags join a word
		{"more here", []string{"reset"}},          // entities
		{"titleword", []string{}},
		{"stylish", []string{}},
		{"scriptword", []string{}},
		{"invoice-2024.pdf", []string{"reset"}}, // attachment name
		{"2024.pdf", []string{"reset"}},
		{"cafe", []string{"fox"}}, // Cc name
		{"carol@cafe", []string{"fox"}},
		{"quick brown", []string{"scrambled", "fox"}}, // words ANDed
		{`"quick brown"`, []string{"fox"}},            // a phrase is in order
		{`"brown fox"`, []string{"fox"}},
		{`"own fo"`, []string{"fox"}}, // a phrase's ends are substrings too
		{`"fox" "dog"`, []string{"fox"}},
		{"fox lazy", []string{"fox"}},
		{"fox nowhere", []string{}},
		{"ox", []string{"scrambled", "fox"}}, // two characters: checked in the text
		{"fox !!!", []string{"scrambled", "fox"}},
		{"0123456789abcdef0123", []string{"long"}}, // the start of a long token
		{"89abcdef0123", []string{"long"}},         // its first 32 characters
		{"xyzw567", []string{}},                    // past them: not searched, staged or not
		{"sig=0123456789", []string{"long"}},
		{"angstrom", []string{"long"}},
		{"final", []string{"long"}},               // a ligature
		{"full", []string{"long"}},                // full-width letters
		{"lodz orsted dorde", []string{"places"}}, // letters with a stroke
		{"strasse aero oeuvre thor istanbul", []string{"places"}},
		{`"łódź ørsted"`, []string{"places"}}, // query side too
		{"qxz", []string{"many"}},             // too many tokens: checked in the text
		{"1qxz", []string{"many"}},
		{"99qxz many", []string{"many"}},
		{"582931", []string{"code"}}, // a code's value
		{"k7p2qx", []string{"code"}},
		{"582 931", []string{"code"}}, // and the text as it is
		{`"582 931"`, []string{"code"}},
		{"582931 dein", []string{"code"}},
		{"582931 de", []string{"code"}},          // a short word: checked in the text and the codes
		{`582931 "dein code"`, []string{"code"}}, // a phrase: the same
	}
	f.bothWays(func(t *testing.T) {
		for _, tc := range cases {
			t.Run(tc.q, func(t *testing.T) {
				if got := f.messages(MessageFilter{Q: tc.q}); !slices.Equal(got, tc.want) {
					t.Errorf("q=%q found %v, want %v", tc.q, got, tc.want)
				}
			})
		}
	})

	if !f.s.b.vocabulary() {
		// PostgreSQL settles a word on each candidate's tokens, however
		// many tokens hold it, without reading the text.
		for _, q := range []string{"qxz", "abc12"} {
			if p, err := f.s.planSearch(t.Context(), q); err != nil || len(p.check) != 0 {
				t.Errorf("plan for %q: %+v, %v", q, p, err)
			}
		}
		return
	}
	// A word in too many tokens was indeed left to the text check.
	p, err := f.s.planSearch(t.Context(), "qxz")
	if err != nil || len(p.groups) != 0 || len(p.check) != 1 {
		t.Errorf("plan for a common substring: %+v, %v", p, err)
	}
	// A single word the index settles reads no text.
	p, err = f.s.planSearch(t.Context(), "abc12")
	if err != nil || len(p.groups) != 1 || len(p.check) != 0 {
		t.Errorf("plan for a rare substring: %+v, %v", p, err)
	}
}

func TestSearchWithFilters(t *testing.T) {
	f := newSearchFixture(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	f.message("a-old", NewMessage{Subject: "Invoice ready", From: &Address{Address: "billing@shop.example"},
		To: []Address{{Address: "ann@example.org"}}, Text: ptr("total 42"), ReceivedAt: base})
	f.message("b", NewMessage{Subject: "Invoice ready", From: &Address{Address: "billing@shop.example"},
		To: []Address{{Address: "ben@example.org"}}, Text: ptr("total 42"), ReceivedAt: base.Add(time.Minute)})
	f.message("c", NewMessage{Subject: "Receipt", From: &Address{Address: "billing@shop.example"},
		To: []Address{{Address: "ann@example.org"}}, Text: ptr("total 42"), ReceivedAt: base.Add(2 * time.Minute)})
	f.message("d", NewMessage{Subject: "Invoice ready", From: &Address{Address: "news@shop.example"},
		To: []Address{{Address: "ann@example.org"}}, Text: ptr("no amount"), ReceivedAt: base.Add(3 * time.Minute)})

	cases := []struct {
		name string
		f    MessageFilter
		want []string
	}{
		{"q alone", MessageFilter{Q: "invoice"}, []string{"d", "b", "a-old"}},
		{"q and to", MessageFilter{Q: "invoice", To: "ann@"}, []string{"d", "a-old"}},
		{"q and from", MessageFilter{Q: "invoice", From: "billing"}, []string{"b", "a-old"}},
		{"q and subject", MessageFilter{Q: "total", Subject: "receipt"}, []string{"c"}},
		{"q and since", MessageFilter{Q: "invoice", Since: base}, []string{"d", "b"}},
		{"checked q and since", MessageFilter{Q: `"invoice ready" 42`, Since: base}, []string{"b"}},
		{"everything", MessageFilter{Q: "42 ready", To: "ann", From: "billing", Since: base.Add(-time.Second)}, []string{"a-old"}},
	}
	f.bothWays(func(t *testing.T) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				if got := f.messages(tc.f); !slices.Equal(got, tc.want) {
					t.Errorf("found %v, want %v", got, tc.want)
				}
			})
		}
	})
}

func TestSearchInvalidQuery(t *testing.T) {
	f := newSearchFixture(t)
	for _, q := range []string{`"unclosed`, `a "b" "c`, `""`, `!!! ---`, "   ", "\xff\xfe", strings.Repeat("a ", 600),
		wordsN(maxQueryWords + 1)} {
		_, err := f.s.Messages(t.Context(), f.inbox.ID, MessageFilter{Q: q}, Page{})
		var qe *QueryError
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &qe) || qe.Param != "q" || qe.Reason == "" {
			t.Errorf("q=%.40q: %v, want an invalid q error", q, err)
		}
		_, err = f.s.Requests(t.Context(), f.endpoint.ID, RequestFilter{Q: q}, Page{})
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("requests q=%.40q: %v", q, err)
		}
	}
	_, err := f.s.Messages(t.Context(), f.inbox.ID, MessageFilter{Q: `"unclosed`}, Page{})
	if want := `invalid: q: a quotation mark is not closed`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("message %q lacks %q", err, want)
	}
}

// TestParseQuery: a term ends at a space outside quotation marks, so a
// key and value pasted from a JSON body stay one term (their words next
// to each other, in order), while quoted words apart are apart.
func TestParseQuery(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{`"status":"paid"`, []string{"status paid"}},
		{`{"status":"paid"}`, []string{"status paid"}},
		{`status:paid`, []string{"status paid"}},
		{`"status:paid"`, []string{"status paid"}},
		{`"status" "paid"`, []string{"status", "paid"}},
		{`"status": "paid"`, []string{"status", "paid"}},
		{`{"note":"two words"} x`, []string{"note two words", "x"}},
		{`"quick brown" fox`, []string{"quick brown", "fox"}},
		{`x"y"z`, []string{"x y z"}},
		{`"a b"c d`, []string{"a b c", "d"}},
		{`a "" b`, []string{"a", "b"}},
		{"\"tab\tinside\"\tword", []string{"tab inside", "word"}},
	} {
		got, err := parseQuery(tc.q)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseQuery(%s) = %q, %v; want %q", tc.q, got, err, tc.want)
		}
	}
	// An odd number of quotation marks, wherever they are, is an
	// unclosed one.
	for _, q := range []string{`"unclosed`, `a "b" "c`, `"status":"paid`, `5" screen`, `ab"`} {
		if _, err := parseQuery(q); err == nil || !strings.Contains(err.Error(), "quotation mark is not closed") {
			t.Errorf("parseQuery(%s): %v, want an unclosed quotation mark", q, err)
		}
	}
}

// TestSearchPastedJSONQuery: `"status":"paid"` finds the capture whose
// status is paid, not those that are paid somewhere else or unpaid, on
// either database, staged or indexed.
func TestSearchPastedJSONQuery(t *testing.T) {
	f := newSearchFixture(t)
	hdr := []Header{{Name: "Content-Type", Values: []string{"application/json"}}}
	f.request("paid", NewRequest{Path: "/hooks", Headers: hdr, Body: []byte(`{"status":"paid","amount":10}`)})
	f.request("failed", NewRequest{Path: "/hooks", Headers: hdr, Body: []byte(`{"status":"failed","note":"paid"}`)})
	f.request("unpaid", NewRequest{Path: "/hooks", Headers: hdr, Body: []byte(`{"status":"unpaid"}`)})
	f.request("spaced", NewRequest{Path: "/hooks", Headers: hdr, Body: []byte(`{"note": "two words", "status": "paid"}`)})
	cases := []struct {
		q    string
		want []string
	}{
		{`"status":"paid"`, []string{"spaced", "paid"}},
		{`{"status":"paid"}`, []string{"spaced", "paid"}},
		{`status:paid`, []string{"spaced", "paid"}},
		{`"status:paid"`, []string{"spaced", "paid"}},
		{`"status" "paid"`, []string{"spaced", "unpaid", "failed", "paid"}},
		{`"note":"two words"`, []string{"spaced"}},
		{`"note":"paid"`, []string{"failed"}},
	}
	f.bothWays(func(t *testing.T) {
		for _, tc := range cases {
			if got := f.requests(RequestFilter{Q: tc.q}); !slices.Equal(got, tc.want) {
				t.Errorf("q=%s found %v, want %v", tc.q, got, tc.want)
			}
		}
	})
}

// wordsN is n distinct words.
func wordsN(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, " word%d", i)
	}
	return b.String()
}

// TestSearchPages pages through matches with both cursors, for a query the
// index answers alone and for one whose rows are checked.
func TestSearchPages(t *testing.T) {
	f := newSearchFixture(t)
	var want []string // newest first
	for i := range 40 {
		name := fmt.Sprint("m", i)
		text := "filler words"
		if i%3 == 0 {
			text = "the needle is here"
		}
		f.message(name, NewMessage{Subject: name, Text: ptr(text)})
		if i%3 == 0 {
			want = append([]string{name}, want...)
		}
	}
	f.bothWays(func(t *testing.T) { checkSearchPages(t, f, want) })
}

// TestSearchPastManyNearMisses: a phrase whose words many newer captures
// hold apart (near misses, which the index cannot tell from matches) still
// finds the old captures that hold it, with its page and cursor right, however
// many near misses each page's query reads past.
func TestSearchPastManyNearMisses(t *testing.T) {
	f := newSearchFixture(t)
	f.message("first", NewMessage{Subject: "first", Text: ptr("the amber falcon flies")})
	f.message("second", NewMessage{Subject: "second", Text: ptr("an amber falcon")})
	for i := range 60 {
		f.message(fmt.Sprint("miss", i), NewMessage{Subject: "falcon", Text: ptr("amber light")})
	}
	f.bothWays(func(t *testing.T) {
		l, err := f.s.Messages(t.Context(), f.inbox.ID, MessageFilter{Q: `"amber falcon"`}, Page{Limit: 1})
		if err != nil || len(l.Items) != 1 || f.names[l.Items[0].ID] != "second" || l.Next == "" {
			t.Fatalf("first page: %+v, %v", l, err)
		}
		l, err = f.s.Messages(t.Context(), f.inbox.ID, MessageFilter{Q: `"amber falcon"`}, Page{Limit: 1, Before: l.Next})
		if err != nil || len(l.Items) != 1 || f.names[l.Items[0].ID] != "first" || l.Next != "" {
			t.Fatalf("second page: %+v, %v", l, err)
		}
	})
}

func checkSearchPages(t *testing.T, f *searchFixture, want []string) {
	for _, q := range []string{"needle", "eedl", `"needle is"`, "ne"} {
		t.Run(q, func(t *testing.T) {
			var got []string
			next := ""
			for range 10 {
				l, err := f.s.Messages(t.Context(), f.inbox.ID, MessageFilter{Q: q}, Page{Limit: 4, Before: next})
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range l.Items {
					got = append(got, f.names[m.ID])
				}
				if next = l.Next; next == "" {
					break
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("before pages: %v, want %v", got, want)
			}

			// Forward from the oldest match: the pages hold the newer
			// matches oldest page first, each page newest first.
			oldest := ""
			for id, name := range f.names {
				if name == want[len(want)-1] {
					oldest = id
				}
			}
			got = nil
			next = oldest
			for range 10 {
				l, err := f.s.Messages(t.Context(), f.inbox.ID, MessageFilter{Q: q}, Page{Limit: 4, After: next})
				if err != nil {
					t.Fatal(err)
				}
				var page []string
				for _, m := range l.Items {
					page = append(page, f.names[m.ID])
				}
				got = append(page, got...)
				if next = l.Next; next == "" {
					break
				}
			}
			if !slices.Equal(got, want[:len(want)-1]) {
				t.Fatalf("after pages: %v, want %v", got, want[:len(want)-1])
			}
		})
	}
}

// TestSearchWait follows a wait: the list with the query and an after
// cursor stays empty when a capture that does not match arrives, and
// returns the one that does.
func TestSearchWait(t *testing.T) {
	f := newSearchFixture(t)
	last := f.message("before", NewMessage{Subject: "token 991122 inside"})
	check := func(want []string) {
		t.Helper()
		l, err := f.s.Messages(t.Context(), f.inbox.ID, MessageFilter{Q: "1122"}, Page{After: last})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range l.Items {
			got = append(got, f.names[m.ID])
		}
		if !slices.Equal(got, want) {
			t.Fatalf("after %s: %v, want %v", f.names[last], got, want)
		}
	}
	watch := f.s.Watch(f.inbox.ID)
	check(nil)
	f.message("other", NewMessage{Subject: "your code is 334455"})
	<-watch // the waiter wakes for any capture, and looks again
	watch = f.s.Watch(f.inbox.ID)
	check(nil)
	f.message("match", NewMessage{Subject: "your code is 8811229"}) // a token first seen now
	<-watch
	check([]string{"match"})
}

func TestSearchRequests(t *testing.T) {
	f := newSearchFixture(t)
	f.request("order", NewRequest{Path: "/hooks/orders/Ünïcode", Query: "event=order.paid&name=Jos%C3%A9",
		Headers: []Header{{Name: "X-Signature", Values: []string{"t=1700000000,v1=deadbeefcafe"}},
			{Name: "User-Agent", Values: []string{"Stripe/1.0"}}},
		Body: []byte(`{"customer":{"name":"Renée","id":"cus_9XyZ42"}}`)})
	f.request("binary", NewRequest{Method: "PUT", Path: "/upload", Body: []byte("\xff\xfe hidden binary words")})
	f.request("plain", NewRequest{Method: "GET", Path: "/health", Query: "probe=1",
		Body: []byte("ordinary text with deadbeef")})

	cases := []struct {
		f    RequestFilter
		want []string
	}{
		{RequestFilter{Q: "hooks"}, []string{"order"}},
		{RequestFilter{Q: "unicode"}, []string{"order"}},                        // path, folded
		{RequestFilter{Q: "order.paid"}, []string{"order"}},                     // query
		{RequestFilter{Q: "jose"}, []string{"order"}},                           // query, percent-decoded
		{RequestFilter{Q: "beefcafe"}, []string{"order"}},                       // header value
		{RequestFilter{Q: "stripe"}, []string{"order"}},                         // header value
		{RequestFilter{Q: "signature"}, []string{}},                             // header names are not searched
		{RequestFilter{Q: "renee 9xyz"}, []string{"order"}},                     // body
		{RequestFilter{Q: `"name renee"`}, []string{"order"}},                   // a phrase in JSON
		{RequestFilter{Q: "deadbeef"}, []string{"plain", "order"}},              // body and header
		{RequestFilter{Q: "deadbeef", Method: "get"}, []string{"plain"}},        // with a filter
		{RequestFilter{Q: "deadbeef", PathPrefix: "/hooks"}, []string{"order"}}, // with a filter
		{RequestFilter{Q: "hidden"}, []string{}},                                // a body that is not UTF-8
		{RequestFilter{Q: "upload"}, []string{"binary"}},
	}
	f.bothWays(func(t *testing.T) {
		for _, tc := range cases {
			t.Run(tc.f.Q, func(t *testing.T) {
				if got := f.requests(tc.f); !slices.Equal(got, tc.want) {
					t.Errorf("%+v found %v, want %v", tc.f, got, tc.want)
				}
			})
		}
	})
}

// indexed counts the index rows, staged or not, holding token.
func indexed(t *testing.T, s *Store, table, token string) int {
	t.Helper()
	var n int
	if s.Shared() {
		if err := s.rdb.QueryRow(`SELECT count(*) FROM `+table+` WHERE ' ' || tokens || ' ' LIKE $1`, "% "+token+" %").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := s.rdb.QueryRow(`SELECT (SELECT count(*) FROM `+table+` WHERE `+table+` MATCH ?1) +
		(SELECT count(*) FROM `+table+`_staged WHERE instr(' ' || tokens || ' ', ' ' || ?2 || ' ') > 0)`, `"`+token+`"`, token).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSearchIndexFollowsDeletes(t *testing.T) {
	f := newSearchFixture(t)
	ctx := t.Context()
	one := f.message("one", NewMessage{Subject: "alphaword"})
	f.message("two", NewMessage{Subject: "alphaword betaword"})
	newest := f.message("three", NewMessage{Subject: "gammaword"})
	// These three leave from FTS5, what follows from the staged rows.
	if err := f.s.indexStaged(ctx); err != nil {
		t.Fatal(err)
	}
	if n := indexed(t, f.s, "messages_search", "alphaword"); n != 2 {
		t.Fatalf("indexed alphaword %d times", n)
	}
	if err := f.s.DeleteMessage(ctx, f.project.ID, one); err != nil {
		t.Fatal(err)
	}
	if n := indexed(t, f.s, "messages_search", "alphaword"); n != 1 {
		t.Errorf("after delete: alphaword indexed %d times", n)
	}
	// The next message takes the deleted newest one's seq: it must not
	// inherit its tokens.
	if err := f.s.DeleteMessage(ctx, f.project.ID, newest); err != nil {
		t.Fatal(err)
	}
	f.message("four", NewMessage{Subject: "deltaword"})
	if got := f.messages(MessageFilter{Q: "gammaword"}); len(got) != 0 {
		t.Errorf("gammaword after delete: %v", got)
	}
	if got := f.messages(MessageFilter{Q: "deltaword"}); !slices.Equal(got, []string{"four"}) {
		t.Errorf("deltaword: %v", got)
	}

	if err := f.s.PurgeInbox(ctx, f.project.ID, f.inbox.ID); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"alphaword", "betaword", "deltaword"} {
		if n := indexed(t, f.s, "messages_search", w); n != 0 {
			t.Errorf("after purge: %s indexed %d times", w, n)
		}
	}

	// Requests: delete and purge.
	r1 := f.request("r1", NewRequest{Path: "/epsilonword"})
	f.request("r2", NewRequest{Path: "/epsilonword/zeta"})
	if err := f.s.DeleteRequest(ctx, f.project.ID, r1); err != nil {
		t.Fatal(err)
	}
	if got := f.requests(RequestFilter{Q: "epsilonword"}); !slices.Equal(got, []string{"r2"}) {
		t.Errorf("after request delete: %v", got)
	}
	if err := f.s.PurgeEndpoint(ctx, f.project.ID, f.endpoint.ID); err != nil {
		t.Fatal(err)
	}
	if n := indexed(t, f.s, "requests_search", "epsilonword"); n != 0 {
		t.Errorf("after endpoint purge: indexed %d times", n)
	}

	// Prune, and a cascade from the inbox.
	old := time.Now().Add(-200 * 24 * time.Hour)
	f.message("ancient", NewMessage{Subject: "etaword", ReceivedAt: old})
	f.request("ancient-request", NewRequest{Path: "/etaword", ReceivedAt: old})
	f.message("recent", NewMessage{Subject: "thetaword"})
	if _, err := f.s.Prune(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if indexed(t, f.s, "messages_search", "etaword") != 0 || indexed(t, f.s, "requests_search", "etaword") != 0 {
		t.Error("pruned captures still indexed")
	}
	if got := f.messages(MessageFilter{Q: "thetaword"}); !slices.Equal(got, []string{"recent"}) {
		t.Errorf("kept message after prune: %v", got)
	}
	err := f.s.write(ctx, func(t *wtx) error {
		_, err := t.exec(`DELETE FROM inboxes WHERE id = ?`, f.inbox.ID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := indexed(t, f.s, "messages_search", "thetaword"); n != 0 {
		t.Errorf("after the inbox went: thetaword indexed %d times", n)
	}
}

// TestSearchOtherCollections keeps each collection's search to itself.
func TestSearchOtherCollections(t *testing.T) {
	f := newSearchFixture(t)
	other, err := f.s.CreateInbox(t.Context(), f.project.ID, "other")
	if err != nil {
		t.Fatal(err)
	}
	f.message("mine-old", NewMessage{Subject: "sharedword"})
	for range 5 {
		if _, err := f.s.InsertMessage(t.Context(), &NewMessage{InboxID: other.ID, Subject: "sharedword", ReceivedAt: now(), Raw: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	f.message("mine-new", NewMessage{Subject: "sharedword too"})
	for _, q := range []string{"sharedword", "aredwor", `"sharedword too"`} {
		if got := f.messages(MessageFilter{Q: q}); len(got) == 0 || got[0] != "mine-new" {
			t.Errorf("q=%s: %v", q, got)
		}
	}
	if got := f.messages(MessageFilter{Q: "sharedword"}); !slices.Equal(got, []string{"mine-new", "mine-old"}) {
		t.Errorf("found %v", got)
	}
}

// TestMigrateSearch opens a database from before search: the migration
// indexes what it holds, and the vocabulary finds words inside its tokens.
func TestMigrateSearch(t *testing.T) {
	sqliteOnly(t, "a SQLite database from before search")
	s, _ := openFromVersion(t, 7,
		`INSERT INTO projects VALUES ('prj_1', 'old', 'team', 0)`,
		`INSERT INTO inboxes (id, project_id, name, smtp_password, message_count, created_at)
			VALUES ('inb_1', 'prj_1', 'in', 'pw', 2, 0)`,
		`INSERT INTO endpoints (id, project_id, name, request_count, created_at) VALUES ('whe_1', 'prj_1', 'ep', 1, 0)`,
		`INSERT INTO messages (seq, id, inbox_id, received_at, envelope_from, from_name, from_address, subject, size,
			attachment_count, snippet, search_from, search_to, search_subject, recipients, warnings, links, headers,
			text_body, html_body, raw)
			VALUES (1, 'msg_html', 'inb_1', 1000, 'a@x', 'Zoë', 'zoe@old.example', 'Old news', 3, 2, '', '', '', '',
				'{"envelope":[],"to":[{"name":"Ann","address":"ann@old.example"}],"cc":[],"reply_to":[]}', '[]', '[]', '[]',
				NULL, '<p>Tracking <b>XJ</b>4471QZ</p><script>scriptword</script>', x'726177'),
			(2, 'msg_text', 'inb_1', 2000, 'a@x', NULL, NULL, 'Plain', 3, 0, '', '', '', '',
				'{"envelope":[],"to":[],"cc":[],"reply_to":[]}', '[]', '[]', '[]',
				'Bonjour Renée, code 918273', NULL, x'726177')`,
		`INSERT INTO attachments VALUES ('att_1', 1, 0, 'label-77.pdf', 'application/pdf', NULL, 0, 1, x'78'),
			('att_2', 1, 1, 'notes.txt', 'text/plain', NULL, 0, 1, x'79')`,
		`INSERT INTO requests (seq, id, endpoint_id, received_at, method, path, query, size, remote_addr, headers, body)
			VALUES (1, 'req_hook', 'whe_1', 1000, 'POST', '/hooks/legacy', 'a=%C3%A9t%C3%A9', 20, '127.0.0.1:1',
				'[["X-Token",["tok_a1b2c3d4"]]]', CAST('{"status":"shipped"}' AS BLOB))`,
	)
	f := &searchFixture{t: t, s: s, project: Project{ID: "prj_1"}, inbox: Inbox{ID: "inb_1"}, endpoint: Endpoint{ID: "whe_1"},
		names: map[string]string{"msg_html": "html", "msg_text": "text", "req_hook": "hook"}}
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"xj4471qz", []string{"html"}},
		{"4471", []string{"html"}}, // inside a token: the vocabulary was filled
		{"zoe ann", []string{"html"}},
		{"label-77", []string{"html"}},
		{"notes.txt", []string{"html"}},
		{"scriptword", []string{}},
		{"renee 1827", []string{"text"}},
		{`"bonjour renee"`, []string{"text"}},
	} {
		if got := f.messages(MessageFilter{Q: tc.q}); !slices.Equal(got, tc.want) {
			t.Errorf("q=%q after migration: %v, want %v", tc.q, got, tc.want)
		}
	}
	for _, q := range []string{"legacy", "été", "b2c3", "shipped"} {
		if got := f.requests(RequestFilter{Q: q}); !slices.Equal(got, []string{"hook"}) {
			t.Errorf("q=%q after migration: %v", q, got)
		}
	}
	// Captures after the migration are indexed, and deleted ones leave.
	f.message("new", NewMessage{Subject: "fresh 4471 too"})
	if got := f.messages(MessageFilter{Q: "4471"}); !slices.Equal(got, []string{"new", "html"}) {
		t.Errorf("after a new capture: %v", got)
	}
	for id, name := range f.names {
		if name == "html" {
			if err := s.DeleteMessage(t.Context(), f.project.ID, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := f.messages(MessageFilter{Q: "4471"}); !slices.Equal(got, []string{"new"}) {
		t.Errorf("after deleting a migrated message: %v", got)
	}
}

// FuzzParseQuery: any query either fails as an invalid q or gives words
// in normal form, and a text equal to the query always matches it.
func FuzzParseQuery(f *testing.F) {
	f.Fuzz(func(t *testing.T, q string) {
		words, err := parseQuery(q)
		if err != nil {
			var qe *QueryError
			if !errors.As(err, &qe) || !errors.Is(err, ErrInvalid) || qe.Param != "q" || qe.Reason == "" {
				t.Fatalf("parseQuery(%q): %v is not an invalid q", q, err)
			}
			return
		}
		if len(words) == 0 || len(words) > maxQueryWords {
			t.Fatalf("parseQuery(%q): %d words", q, len(words))
		}
		seen := map[string]bool{}
		for _, w := range words {
			if w == "" || w != normalizeText(w) || strings.Contains(w, `"`) || seen[w] {
				t.Fatalf("parseQuery(%q): word %q", q, w)
			}
			seen[w] = true
		}
		if !(searchPlan{check: words}).matches([]string{q}) {
			t.Fatalf("parseQuery(%q) = %q: the query's own text does not match", q, words)
		}
	})
}

// TestSearchWhileTheIndexMoves: a search reads the vocabulary, then the
// index; rows that move from staged into FTS5 between the two reads are
// found all the same, as the search reads one snapshot.
func TestSearchWhileTheIndexMoves(t *testing.T) {
	if pgtest.Requested() {
		t.Skip("PostgreSQL indexes a capture as it stores it: nothing moves")
	}
	f := newSearchFixture(t)
	f.request("hook", NewRequest{Path: "/hook", Body: []byte(`{"event":"delete the repository"}`)})
	f.message("mail", NewMessage{Subject: "hello", EnvelopeFrom: "a@example.com", Text: ptr("please reconcile the ledger")})
	moved := false
	f.s.afterSearchPlan = func() {
		if err := f.s.indexStaged(context.Background()); err != nil {
			t.Error(err)
		}
		moved = f.staged() == 0
	}
	if got := f.requests(RequestFilter{Q: "repositor"}); !slices.Equal(got, []string{"hook"}) {
		t.Errorf("requests q=repositor while the index moved: %v, want [hook]", got)
	}
	if !moved {
		t.Fatal("the staged rows did not move during the search")
	}
	f.s.afterSearchPlan = nil
	// The mover has run: a new word only the message holds.
	f.message("mail2", NewMessage{Subject: "hi", EnvelopeFrom: "a@example.com", Text: ptr("quarterly reconciliation")})
	f.s.afterSearchPlan = func() {
		if err := f.s.indexStaged(context.Background()); err != nil {
			t.Error(err)
		}
	}
	if got := f.messages(MessageFilter{Q: "reconciliat"}); !slices.Equal(got, []string{"mail2"}) {
		t.Errorf("messages q=reconciliat while the index moved: %v, want [mail2]", got)
	}
}

// newSlicingFixture is a search fixture whose moves file at most 40 new
// terms each, so that randomWords files over four.
func newSlicingFixture(t *testing.T) *searchFixture {
	if pgtest.Requested() {
		t.Skip("PostgreSQL indexes a capture as it stores it: nothing moves")
	}
	// Restored once the store, whose writer reads it, has closed: its
	// cleanup, registered after, runs before.
	saved := maxTermsPerMove
	t.Cleanup(func() { maxTermsPerMove = saved })
	maxTermsPerMove = 40
	return newSearchFixture(t)
}

// randomWords is a text of 130 words found nowhere else, each starting
// with tag.
func randomWords(tag string) string {
	var words []string
	for i := range 130 {
		words = append(words, fmt.Sprintf("%s%03dzq%c", tag, i, 'a'+i%26))
	}
	return strings.Join(words, " ")
}

// move runs one move of each staged table in one writer transaction, as
// indexStaged does, and says whether rows are left.
func (f *searchFixture) move(tables ...int) (more bool) {
	f.t.Helper()
	if err := f.s.write(f.t.Context(), func(tx *wtx) error {
		for _, ix := range tables {
			m, err := tx.moveStaged(ix)
			if err != nil {
				return err
			}
			more = more || m
		}
		return nil
	}); err != nil {
		f.t.Fatal(err)
	}
	return more
}

// TestMoveFilesALargeVocabularyInSlices: a capture with more new terms
// than one move may file (a body of random words) has them filed over
// several transactions, each bounded, and moves into FTS5 once all are in;
// the captures around it move as usual, and every one of them is found
// by a word inside its tokens all along.
func TestMoveFilesALargeVocabularyInSlices(t *testing.T) {
	f := newSlicingFixture(t)
	f.request("before", NewRequest{Path: "/before", Body: []byte("alphaword betaword")})
	f.request("random", NewRequest{Path: "/random", Body: []byte(randomWords("w"))})
	f.request("after", NewRequest{Path: "/after", Body: []byte("gammaword")})

	terms := func() int {
		var n int
		if err := f.s.rdb.QueryRow(`SELECT count(*) FROM search_terms`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	found := func(q string, want ...string) {
		t.Helper()
		if got := f.requests(RequestFilter{Q: q}); !slices.Equal(got, want) {
			t.Errorf("q=%s: %v, want %v", q, got, want)
		}
	}
	moves := 0
	for more := true; more; moves++ {
		if moves == 20 {
			t.Fatal("the large capture never moved")
		}
		before := terms()
		more = f.move(requestsStaged)
		if added := terms() - before; added > maxTermsPerMove {
			t.Fatalf("move %d filed %d terms, more than %d", moves, added, maxTermsPerMove)
		}
		// Mid-way, each capture is found, from FTS5 or from staged.
		found("012zq", "random")
		found("129zq", "random")
		found("lphawor", "before")
		found("ammawor", "after")
	}
	// "before" alone, three slices of "random" and "random" moving with
	// its last, then "after".
	if moves < 4 {
		t.Errorf("%d moves; want the large capture's terms filed over several", moves)
	}
	if n := f.staged(); n != 0 {
		t.Fatalf("%d rows still staged", n)
	}
	found("012zq", "random")
	found("129zq", "random")
	found("w1", "random")
	found("gammaword", "after")
}

// TestMoveResumesOnlyTheSameRow: a capture deleted while its terms were
// being filed leaves its seq to the next capture (the newest's seq is
// drawn again), whose terms are filed from its own first token.
func TestMoveResumesOnlyTheSameRow(t *testing.T) {
	f := newSlicingFixture(t)
	random := f.request("random", NewRequest{Path: "/random", Body: []byte(randomWords("w"))})
	f.move(requestsStaged) // its first slice of terms
	seq := func(id string) (n int64) {
		if err := f.s.rdb.QueryRow(`SELECT seq FROM requests WHERE id = ?`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	was := seq(random)
	if err := f.s.DeleteRequest(t.Context(), f.project.ID, random); err != nil {
		t.Fatal(err)
	}
	other := f.request("other", NewRequest{Path: "/other", Body: []byte("deltaword epsilonword")})
	if seq(other) != was {
		t.Fatalf("the next capture took seq %d, not the deleted %d: nothing to test", seq(other), was)
	}
	for i := 0; f.move(requestsStaged); i++ {
		if i == 5 {
			t.Fatal("the index never emptied")
		}
	}
	if n := f.staged(); n != 0 {
		t.Fatalf("%d rows still staged", n)
	}
	if got := f.requests(RequestFilter{Q: "eltawor"}); !slices.Equal(got, []string{"other"}) {
		t.Errorf("q=eltawor: %v, want [other]", got)
	}
}

// TestMoveFilesTwoLargeVocabulariesAtOnce: a message and a request each
// with more new terms than one move may file have their terms filed side
// by side, each resuming where its own last slice ended, never starting
// over because the other table's row was filed in between.
func TestMoveFilesTwoLargeVocabulariesAtOnce(t *testing.T) {
	f := newSlicingFixture(t)
	text := randomWords("m")
	f.message("mail", NewMessage{Subject: "s", Text: &text})
	f.request("hook", NewRequest{Path: "/hook", Body: []byte(randomWords("r"))})
	moves := 0
	for more := true; more; moves++ {
		if moves == 20 {
			t.Fatal("the large captures never moved")
		}
		more = f.move(messagesStaged, requestsStaged)
	}
	// Each is filed in four slices of 40 terms or fewer, the two at once,
	// and moves with its last.
	if moves > 4 {
		t.Errorf("%d moves for two captures of four slices each, filed side by side", moves)
	}
	if n := f.staged(); n != 0 {
		t.Fatalf("%d rows still staged", n)
	}
	if got := f.messages(MessageFilter{Q: "m129zq"}); !slices.Equal(got, []string{"mail"}) {
		t.Errorf("messages q=m129zq: %v, want [mail]", got)
	}
	if got := f.requests(RequestFilter{Q: "r129zq"}); !slices.Equal(got, []string{"hook"}) {
		t.Errorf("requests q=r129zq: %v, want [hook]", got)
	}
}

// FuzzRequestTokens: tokenizing a request's body where it lies gives what
// tokenizing its search fields as text gives, whatever the body holds
// (text, accents and ligatures, bytes that are not UTF-8, escapes to
// decode when the header, its Content-Type, says form or JSON).
func FuzzRequestTokens(f *testing.F) {
	f.Fuzz(func(t *testing.T, path, query, header string, body []byte) {
		headers := []Header{{Name: "Content-Type", Values: []string{header}}}
		want := searchTokens(requestSearchFields(path, query, headers, body))
		if got := requestTokens(path, query, headers, body); got != want {
			t.Fatalf("requestTokens(%q, %q, %q, %q) = %q, want %q", path, query, header, body, got, want)
		}
	})
}
