package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/store"
)

// pageLimit is how many captures a browser page lists.
const pageLimit = 50

// captureList is what the list of an inbox's messages and the list of an
// endpoint's requests show around their rows.
type captureList struct {
	ID, Name, Count, SettingsURL, PurgeURL string
	// Noun and Nouns name one capture of the list and many.
	Noun, Nouns string
	// Search is the search box's words.
	Search string
	// SearchError says why the search cannot run; the list is empty then.
	SearchError string
	// Since is the "Received after" filter as typed; SinceError says why
	// it cannot be read, and the list is empty then too.
	Since, SinceError string
	// Found says, to a screen reader, what the search or filters found.
	Found    string
	Filtered bool
	// LiveURL streams new captures; set on the newest page only.
	LiveURL string
	Pager   pager
}

// around fills in what surrounds a list's rows, given the page pg taken
// of the store, its next cursor and the ids of its rows (newest first):
// the links to the other pages, what a search found, and on the newest
// page the address of the live stream at events, which continues from
// the newest row shown.
func (c *captureList) around(r *http.Request, pg store.Page, next string, ids []string, events string) {
	c.Pager = pagerFor(r, pg, next, ids)
	if c.Filtered {
		c.Found = found(len(ids), c.Pager, c.Noun, c.Nouns)
	}
	if pg.Before == "" && pg.After == "" {
		c.LiveURL = liveURL(events, r.URL.Query(), ids)
	}
}

type messagesView struct {
	captureList
	To, From, Subject string
	Rows              []messageRow
}

type messageRow struct {
	ID, URL, From, FromTitle, To, Subject, Snippet, AttachmentLabel string
	Attachments                                                     int
	Received                                                        timeView
	// FromEnvelope says From is the envelope sender, the message having
	// no From header.
	FromEnvelope bool
}

func messageFilter(q url.Values) store.MessageFilter {
	since, _ := sinceOf(q)
	return store.MessageFilter{Q: searchWords(q), To: q.Get("to"), From: q.Get("from"), Subject: q.Get("subject"), Since: since}
}

// sinceOf reads the "Received after" filter (since=, as the read API takes
// it: RFC 3339 with a zone, SPEC §8), and says why when it cannot.
func sinceOf(q url.Values) (time.Time, string) {
	s := strings.TrimSpace(q.Get("since"))
	if s == "" {
		return time.Time{}, ""
	}
	t, err := contract.ParseTime(s)
	if err != nil {
		return time.Time{}, "Received after must be a time with its zone, like " +
			time.Now().UTC().Truncate(time.Hour).Format(time.RFC3339) + "."
	}
	return t, ""
}

// ListError is why the list cannot be shown: a search or a filter that
// cannot be read.
func (c captureList) ListError() string {
	if c.SearchError != "" {
		return c.SearchError
	}
	return c.SinceError
}

// filtersOf fills in the filters every capture list has and whether any
// filter, of them or of the list's own (others), is set; it reports
// whether the list can be read.
func (c *captureList) filtersOf(q url.Values, searchError string, others ...string) bool {
	c.Search, c.SearchError = searchWords(q), searchError
	_, c.SinceError = sinceOf(q)
	c.Since = strings.TrimSpace(q.Get("since"))
	c.Filtered = c.Search != "" || c.Since != "" || slices.ContainsFunc(others, func(v string) bool { return v != "" })
	return c.ListError() == ""
}

func (h *Handler) messagesPage(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	in, err := h.store.Inbox(r.Context(), pc.project.ID, r.PathValue("iid"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	pg := pageOf(q, pageLimit)
	list, err := h.store.Messages(r.Context(), in.ID, messageFilter(q), pg)
	searchError, badSearch := searchProblem(err)
	if err != nil && !badSearch {
		h.listFailed(w, r, err)
		return
	}
	pid := pc.project.ID
	v := messagesView{captureList: captureList{
		ID: in.ID, Name: in.Name, Noun: "message", Nouns: "messages", Count: plural(in.MessageCount, "message", "messages"),
		SettingsURL: projectURL(pid, "inboxes") + "#" + in.ID, PurgeURL: inboxURL(pid, in.ID) + "/purge",
	}, To: q.Get("to"), From: q.Get("from"), Subject: q.Get("subject")}
	readable := v.filtersOf(q, searchError, v.To, v.From, v.Subject)
	status := http.StatusBadRequest
	if readable {
		status = http.StatusOK
		for _, m := range list.Items {
			v.Rows = append(v.Rows, messageRowOf(pid, m))
		}
		v.around(r, pg, list.Next, ids(list.Items, func(m store.MessageSummary) string { return m.ID }),
			inboxURL(pid, in.ID)+"/events")
	}
	h.show(w, r, pc.session, pc, status, page{template: "messages", title: in.Name, section: "captures", current: in.ID, view: v})
}

// searchWords is the search box's query. Blank is no search: the box was
// left with spaces in it.
func searchWords(q url.Values) string { return strings.TrimSpace(q.Get("q")) }

// searchProblem reads a list's error as a search that cannot run, in words
// for the page; the page shows them beside the search box.
func searchProblem(err error) (string, bool) {
	var qe *store.QueryError
	if !errors.As(err, &qe) {
		return "", false
	}
	return "This search cannot run: " + qe.Reason + ".", true
}

// found says how many captures of a filtered list this page shows, and
// whether there are more on other pages. The page announces it, as the
// rows themselves are not; an empty list says so in its own words.
func found(n int, p pager, one, many string) string {
	if n == 0 {
		return ""
	}
	s := plural(int64(n), one+" matches", many+" match")
	if p.NewerURL != "" || p.OlderURL != "" {
		s += " on this page; there are more on other pages"
	}
	return s + "."
}

func messageRowOf(pid string, m store.MessageSummary) messageRow {
	row := messageRow{ID: m.ID, URL: messageURL(pid, m.ID), Subject: m.Subject, Snippet: m.Snippet,
		To: someAddresses(m.To, m.ToCount, rowAddresses), Attachments: m.AttachmentCount,
		Received: timeOf(m.ReceivedAt)}
	switch {
	case m.From != nil:
		row.From, row.FromTitle = m.From.Name, m.From.Address
		if row.From == "" {
			row.From = m.From.Address
		}
	case m.EnvelopeFrom != "":
		// No From: the SMTP sender says who sent it, and the title whose
		// word that is.
		row.From, row.FromTitle, row.FromEnvelope = m.EnvelopeFrom, "Envelope sender: the message has no From", true
	}
	if m.AttachmentCount > 0 {
		row.AttachmentLabel = plural(int64(m.AttachmentCount), "attachment", "attachments")
	}
	return row
}

// liveURL is the event stream of a list page: its filters, and the newest
// of the rows shown (ids, newest first) as the point to continue from.
func liveURL(base string, q url.Values, ids []string) string {
	lq := url.Values{}
	for k, v := range q {
		if k != "before" && k != "after" && len(v) > 0 && v[0] != "" {
			lq.Set(k, v[0])
		}
	}
	if len(ids) > 0 {
		lq.Set("after", ids[0])
	}
	if len(lq) == 0 {
		return base
	}
	return base + "?" + lq.Encode()
}

// messageEvents streams the inbox's new messages that match the page's
// filters, as rows ready to insert.
func (h *Handler) messageEvents(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	in, err := h.store.Inbox(r.Context(), pc.project.ID, r.PathValue("iid"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	f := messageFilter(r.URL.Query())
	pid := pc.project.ID
	h.stream(w, r, pc.session, liveList{collection: in.ID, one: "message", many: "messages",
		total: func(ctx context.Context) (int64, error) {
			now, err := h.store.Inbox(ctx, pid, in.ID)
			return now.MessageCount, err
		},
		rows: func(ctx context.Context, pg store.Page) ([]liveRow, string, error) {
			list, err := h.store.Messages(ctx, in.ID, f, pg)
			if err != nil {
				return nil, "", err
			}
			rows, err := renderRows(h.pages["messages"], "message_row", "", list.Items,
				func(m store.MessageSummary) string { return m.ID },
				func(m store.MessageSummary) any { return messageRowOf(pid, m) })
			return rows, list.Next, err
		}})
}

func (h *Handler) purgeInbox(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	in, err := h.store.Inbox(r.Context(), pc.project.ID, r.PathValue("iid"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.store.PurgeInbox(r.Context(), pc.project.ID, in.ID); err != nil {
		h.fail(w, r, err)
		return
	}
	redirect(w, r, inboxURL(pc.project.ID, in.ID), "Deleted every message of inbox "+in.Name+".")
}

// listFailed answers a list whose cursor names a capture that is gone
// (deleted or pruned) by starting again from the newest page.
func (h *Handler) listFailed(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, store.ErrInvalidCursor) {
		redirect(w, r, pageLink(r, "", ""),
			"That page no longer exists: its captures were deleted. This is the newest page.")
		return
	}
	h.fail(w, r, err)
}
