package api

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/store"
)

// query is a validated query string: every parameter known, given once,
// and the typed ones (limit, before, after, wait, since) parsed.
type query struct {
	values url.Values
	bad    map[string]string
	// cursor is an empty before= or after=: a cursor that is missing is
	// invalid_cursor (the interface document, §4), when nothing else is
	// wrong.
	cursor error

	page  store.Page
	wait  time.Duration
	since time.Time
	kind  string
}

// parseQuery reads the parameters a route allows and rejects unknown and
// repeated ones, so that a typo (?subjet=) is an error rather than a
// silently unfiltered list. Every mistake is collected for one answer.
func parseQuery(r *http.Request, allowed ...string) *query {
	q := readQuery(r, allowed)
	if slices.Contains(allowed, "limit") {
		q.page = q.parsePage()
	}
	if slices.Contains(allowed, "wait") {
		q.wait = q.parseWait()
	}
	if slices.Contains(allowed, "since") {
		q.since = q.parseSince()
	}
	if slices.Contains(allowed, "kind") {
		q.kind = q.parseKind()
	}
	return q
}

func readQuery(r *http.Request, allowed []string) *query {
	q := &query{bad: map[string]string{}}
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		q.bad["query"] = "malformed query string: " + err.Error()
		return q
	}
	q.values = values
	var unknown []string
	for name, vals := range values {
		switch {
		case !slices.Contains(allowed, name):
			unknown = append(unknown, name)
		case len(vals) > 1:
			q.bad[name] = "given more than once"
		}
	}
	// Each unknown name says what the route takes, but only the first few
	// (in order) repeat the list: thousands of them would otherwise be
	// answered at ten times the size of the URL.
	slices.Sort(unknown)
	why := "unknown parameter (this route takes none)"
	if len(allowed) > 0 {
		why = "unknown parameter (allowed: " + strings.Join(allowed, ", ") + ")"
	}
	for i, name := range unknown {
		if i == maxUnknownExplained {
			why = "unknown parameter"
		}
		q.bad[name] = why
	}
	return q
}

// maxUnknownExplained is how many unknown parameters of one request are
// answered with the list of those the route takes.
const maxUnknownExplained = 10

func (q *query) str(name string) string { return q.values.Get(name) }

func (q *query) has(name string) bool { _, ok := q.values[name]; return ok }

func (q *query) intIn(name string, lo, hi, def int) int {
	if !q.has(name) {
		return def
	}
	n, err := strconv.Atoi(q.str(name))
	if err != nil || n < lo || n > hi {
		q.bad[name] = "must be an integer from " + strconv.Itoa(lo) + " to " + strconv.Itoa(hi)
		return def
	}
	return n
}

// parseSince parses an RFC 3339 time that states its zone.
func (q *query) parseSince() time.Time {
	if !q.has("since") {
		return time.Time{}
	}
	t, err := contract.ParseTime(q.str("since"))
	if err != nil {
		q.bad["since"] = "must be an RFC 3339 time with Z or a zone offset from -23:59 to +23:59, e.g. 2026-01-02T15:04:05Z"
		return time.Time{}
	}
	return t
}

// parseKind reads a link kind (SPEC §15); none means any.
func (q *query) parseKind() string {
	if !q.has("kind") {
		return ""
	}
	k := q.str("kind")
	if !slices.Contains(contract.LinkKinds, k) {
		q.bad["kind"] = "must be one of " + strings.Join(contract.LinkKinds, ", ")
		return ""
	}
	return k
}

func (q *query) parsePage() store.Page {
	p := store.Page{Limit: q.intIn("limit", 1, contract.MaxLimit, contract.DefaultLimit)}
	for _, name := range []string{"before", "after"} {
		if q.has(name) && q.str(name) == "" && q.cursor == nil {
			q.cursor = fmt.Errorf("%w: %s= is empty, where the id of a capture goes", store.ErrInvalidCursor, name)
		}
	}
	p.Before, p.After = q.str("before"), q.str("after")
	if p.Before != "" && p.After != "" {
		q.bad["before"] = "cannot be combined with after"
		q.bad["after"] = "cannot be combined with before"
	}
	return p
}

func (q *query) parseWait() time.Duration {
	return time.Duration(q.intIn("wait", 0, int(contract.MaxWait/time.Second), 0)) * time.Second
}

// err returns the 400 for everything found wrong, or nil.
func (q *query) err() error {
	if len(q.bad) == 0 {
		return q.cursor
	}
	return contract.Invalid(q.bad)
}
