package store

import (
	"context"
	"slices"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// filterMessages are messages whose filtered fields are spelled one way,
// and found by another: NFC and NFD, dotted and dotless I, ß and ss.
var filterMessages = []struct {
	subject, fromName, from, to string
}{
	{norm.NFC.String("Café in İstanbul"), "Zoë Straße", "zoe@example.com", "İpek@example.com"},
	{norm.NFD.String("Résumé für Ayşe"), "Ørjan", "orjan@example.com", "ayse@example.com"},
	{"Re: [ci] build #12 PASSED", "CI Bot", "ci@example.com", "dev@example.com"},
}

// insertFilterMessages stores filterMessages and returns their ids.
func insertFilterMessages(t *testing.T, s *Store, inboxID string) []string {
	t.Helper()
	var ids []string
	for _, m := range filterMessages {
		id, err := s.InsertMessage(t.Context(), &NewMessage{InboxID: inboxID, ReceivedAt: now(), EnvelopeFrom: m.from,
			EnvelopeTo: []string{m.to}, From: &Address{Name: m.fromName, Address: m.from},
			To: []Address{{Address: m.to}}, Subject: m.subject, Raw: []byte("Subject: x\r\n\r\nx")})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// checkMessageFilters checks that each filter finds the messages (indexes
// into filterMessages) it should.
func checkMessageFilters(t *testing.T, s *Store, inboxID string, ids []string) {
	t.Helper()
	for _, c := range []struct {
		f    MessageFilter
		want []int
	}{
		{MessageFilter{Subject: "cafe"}, []int{0}},
		{MessageFilter{Subject: norm.NFD.String("CAFÉ")}, []int{0}},
		{MessageFilter{Subject: "istanbul"}, []int{0}},
		{MessageFilter{Subject: "ISTANBUL"}, []int{0}},
		{MessageFilter{Subject: "ıstanbul"}, []int{0}},
		{MessageFilter{Subject: norm.NFC.String("résumé")}, []int{1}},
		{MessageFilter{Subject: "resume fur ayse"}, []int{1}},
		{MessageFilter{Subject: "Re: [CI] build #12"}, []int{2}},
		{MessageFilter{Subject: "re [ci]"}, nil}, // punctuation is kept: a substring, not words
		{MessageFilter{Subject: "#13"}, nil},
		{MessageFilter{From: "strasse"}, []int{0}},
		{MessageFilter{From: "STRAẞE"}, []int{0}},
		{MessageFilter{From: "zoë"}, []int{0}},
		{MessageFilter{From: "ørjan"}, []int{1}},
		{MessageFilter{From: "orjan@"}, []int{1}},
		{MessageFilter{To: "ipek@example"}, []int{0}},
		{MessageFilter{To: "İPEK"}, []int{0}},
		{MessageFilter{To: "@example.com"}, []int{0, 1, 2}},
		{MessageFilter{To: "@example.org"}, nil},
	} {
		l, err := s.Messages(t.Context(), inboxID, c.f, Page{Limit: 100})
		if err != nil {
			t.Fatalf("%+v: %v", c.f, err)
		}
		var found []string
		for _, m := range l.Items {
			found = append(found, m.ID)
		}
		if got, want, ok := picked(found, ids, c.want); !ok {
			t.Errorf("%+v found %v, want %v", c.f, got, want)
		}
	}
}

func TestMessageFiltersFoldAsSearch(t *testing.T) {
	s := newStore(t)
	p := mustProject(t, s, "p", "free")
	in, err := s.CreateInbox(t.Context(), p.ID, "in")
	if err != nil {
		t.Fatal(err)
	}
	checkMessageFilters(t, s, in.ID, insertFilterMessages(t, s, in.ID))
}

// filterPaths are request paths as senders spell them.
var filterPaths = []string{
	"/ci/%C4%B0stanbul/1", // upper-case escapes
	"/ci/%c4%b0stanbul/2", // lower-case escapes
	"/ci/İstanbul/3",      // raw UTF-8 in the request line
	"/ci/a%2Fb",           // an escaped slash: one segment
	"/ci/a/b",
	"/ci/100%25/done",
	"/other",
}

// checkPathFilters checks that each path prefix finds the requests
// (indexes into filterPaths) it should, and that the paths read back as
// stored.
func checkPathFilters(t *testing.T, s *Store, projectID, endpointID string, ids []string) {
	t.Helper()
	for _, c := range []struct {
		prefix string
		want   []int
	}{
		{"/ci/İstanbul", []int{0, 1, 2}},
		{"/ci/İstanbul/3", []int{2}},
		{"/ci/%C4%B0stanbul", []int{0, 1, 2}},
		{"/ci/%c4%b0stanbul/1", []int{0}},
		{"/ci/%C4%b0", []int{0, 1, 2}},
		{"/ci/%C4", []int{0}},     // the literal prefix of what was received
		{"/ci/istanbul", nil},     // a path is not folded: only its escapes are read
		{"/ci/a/", []int{4}},      // an escaped slash is not a separator
		{"/ci/a%2F", []int{3}},    // and is found by its escape
		{"/ci/a%2fb", []int{3}},   // in either case
		{"/ci/%61/b", []int{4}},   // an escaped letter is the letter
		{"/ci/100%/", []int{5}},   // a stray % is a %
		{"/ci/100%25/", []int{5}}, //
		{"/ci/1%", nil},           // a prefix, not a pattern
		{"/ci/_", nil},            //
		{"/", []int{0, 1, 2, 3, 4, 5, 6}},
	} {
		l, err := s.Requests(t.Context(), endpointID, RequestFilter{PathPrefix: c.prefix}, Page{Limit: 100})
		if err != nil {
			t.Fatalf("%q: %v", c.prefix, err)
		}
		var found []string
		for _, r := range l.Items {
			found = append(found, r.ID)
		}
		if got, want, ok := picked(found, ids, c.want); !ok {
			t.Errorf("path %q found %v, want %v", c.prefix, got, want)
		}
	}
	for i, id := range ids {
		r, err := s.Request(t.Context(), projectID, id)
		if err != nil || r.Path != filterPaths[i] {
			t.Errorf("request %d path %q, %v; stored as %q", i, r.Path, err, filterPaths[i])
		}
	}
}

func TestRequestPathFilterReadsEscapes(t *testing.T) {
	s := newStore(t)
	p := mustProject(t, s, "p", "free")
	e, err := s.CreateEndpoint(t.Context(), p.ID, "e", nil)
	if err != nil {
		t.Fatal(err)
	}
	checkPathFilters(t, s, p.ID, e.ID, insertRequests(t, s, e.ID, filterPaths...))
}

func TestPathKey(t *testing.T) {
	for path, want := range map[string]string{
		"/plain/path":       "/plain/path",
		"/ci/%C4%B0stanbul": "/ci/İstanbul",
		"/ci/%c4%b0stanbul": "/ci/İstanbul",
		"/ci/İstanbul":      "/ci/İstanbul",
		"/a%2fb%2F":         "/a%2Fb%2F",
		"/a%25b":            "/a%25b",
		"/a%b":              "/a%25b",
		"/a%":               "/a%25",
		"/a%4":              "/a%254",
		"/%7e%41":           "/~A",
		"/%ff%C4":           "/%FF%C4", // not UTF-8: spelled as escapes
		"/%00%0a":           "/%00%0A",
		"/\xff":             "/%FF",
	} {
		if got := pathKey(path); got != want {
			t.Errorf("pathKey(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestFilterMigration opens a database whose rows an earlier build wrote:
// message filter columns lower-cased, not folded, and no path keys. The
// migration computes them, and the filters find the old rows as new ones.
func TestFilterMigration(t *testing.T) {
	path := newDatabase(t)
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	p := mustProject(t, s, "p", "free")
	in, err := s.CreateInbox(t.Context(), p.ID, "in")
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.CreateEndpoint(t.Context(), p.ID, "e", nil)
	if err != nil {
		t.Fatal(err)
	}
	msgIDs := insertFilterMessages(t, s, in.ID)
	reqIDs := insertRequests(t, s, e.ID, filterPaths...)
	before := 10
	if s.Shared() {
		before = 2
	}
	err = s.write(t.Context(), func(t2 *wtx) error {
		for i, m := range filterMessages {
			if _, err := t2.exec(`UPDATE messages SET search_from = ?, search_to = ?, search_subject = ? WHERE id = ?`,
				strings.ToLower(m.from+"\n"+m.fromName+"\n"+m.from), strings.ToLower(m.to+"\n"+m.to),
				strings.ToLower(m.subject), msgIDs[i]); err != nil {
				return err
			}
		}
		if _, err := t2.exec(`DROP TABLE request_path_keys`); err != nil {
			return err
		}
		_, err := t2.exec(`UPDATE schema_version SET version = ?`, before-1)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = Open(context.WithoutCancel(t.Context()), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var version int
	if err := s.queryRow(t.Context(), `SELECT version FROM schema_version`).Scan(&version); err != nil || version != before {
		t.Fatalf("schema version %d, %v; want %d", version, err, before)
	}
	checkMessageFilters(t, s, in.ID, msgIDs)
	checkPathFilters(t, s, p.ID, e.ID, reqIDs)
}

// picked says whether found holds ids[i] for each i of pick and nothing
// else, in any order; got and want are both sides, sorted, for the message.
func picked(found, ids []string, pick []int) (got, want []string, ok bool) {
	got = slices.Sorted(slices.Values(found))
	for _, i := range pick {
		want = append(want, ids[i])
	}
	slices.Sort(want)
	return got, want, slices.Equal(got, want)
}
