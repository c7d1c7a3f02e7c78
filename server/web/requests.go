package web

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/capturedev/capture/store"
)

type requestsView struct {
	captureList
	CaptureURL   string
	Method, Path string
	Methods      []string
	Rows         []requestRow
}

type requestRow struct {
	ID, URL, Method, Path, Query, ContentType, Size string
	Received                                        timeView
	// Delivery is the request's last delivery; nil when there was none.
	Delivery *deliveryMark
}

// deliveryMark shows a last delivery in a list: the target's status, or
// "failed" when it did not answer, and in words what happened.
type deliveryMark struct {
	Label, Words string
	OK           bool
}

func deliveryMarkOf(d *store.DeliverySummary) *deliveryMark {
	if d == nil {
		return nil
	}
	m := &deliveryMark{Label: "failed", OK: d.Status == store.DeliveryDelivered}
	m.Words = "Last delivery: " + d.Kind + ", " + d.Status
	if d.ResponseStatus != nil {
		m.Label = strconv.Itoa(*d.ResponseStatus)
		m.Words += " with status " + m.Label
	}
	m.Words += ", " + timeOf(d.CreatedAt).Short
	return m
}

func requestFilter(q url.Values) store.RequestFilter {
	since, _ := sinceOf(q)
	return store.RequestFilter{Q: searchWords(q), Method: methodOf(q), PathPrefix: q.Get("path"), Since: since}
}

// methodOf is the method filter as the store matches it, ignoring case
// (methods are ASCII tokens), so it is shown in capitals: ?method=post
// filters, and reads, as POST.
func methodOf(q url.Values) string {
	m := strings.TrimSpace(q.Get("method"))
	for i := range len(m) {
		if m[i] >= utf8.RuneSelf {
			return m
		}
	}
	return strings.ToUpper(m)
}

// commonMethods are the methods the method filter always suggests.
var commonMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}

// methodChoices are the method filter's suggestions: the common methods,
// then any other of the filter applied and of the requests shown.
func methodChoices(applied string, rows []requestRow) []string {
	var more []string
	add := func(m string) {
		if m != "" && !slices.Contains(commonMethods, m) && !slices.Contains(more, m) {
			more = append(more, m)
		}
	}
	add(applied)
	for _, r := range rows {
		add(r.Method)
	}
	slices.Sort(more)
	return append(slices.Clip(commonMethods), more...)
}

func (h *Handler) requestsPage(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	e, err := h.store.Endpoint(r.Context(), pc.project.ID, r.PathValue("eid"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	pg := pageOf(q, pageLimit)
	list, err := h.store.Requests(r.Context(), e.ID, requestFilter(q), pg)
	searchError, badSearch := searchProblem(err)
	if err != nil && !badSearch {
		h.listFailed(w, r, err)
		return
	}
	pid := pc.project.ID
	v := requestsView{captureList: captureList{
		ID: e.ID, Name: e.Name, Noun: "request", Nouns: "requests", Count: plural(e.RequestCount, "request", "requests"),
		SettingsURL: endpointURL(pid, e.ID) + "/settings", PurgeURL: endpointURL(pid, e.ID) + "/purge",
	}, CaptureURL: h.captureURL(e.ID), Method: methodOf(q), Path: q.Get("path")}
	readable := v.filtersOf(q, searchError, v.Method, v.Path)
	status := http.StatusBadRequest
	if readable {
		status = http.StatusOK
		for _, rq := range list.Items {
			v.Rows = append(v.Rows, requestRowOf(pid, rq))
		}
		v.around(r, pg, list.Next, ids(list.Items, func(rq store.RequestSummary) string { return rq.ID }),
			endpointURL(pid, e.ID)+"/events")
	}
	v.Methods = methodChoices(v.Method, v.Rows)
	h.show(w, r, pc.session, pc, status, page{template: "requests", title: e.Name, section: "captures", current: e.ID, view: v})
}

func requestRowOf(pid string, rq store.RequestSummary) requestRow {
	row := requestRow{ID: rq.ID, URL: requestURL(pid, rq.ID), Method: rq.Method, Path: rq.Path, Query: rq.Query,
		Size: size(rq.Size), Received: timeOf(rq.ReceivedAt), Delivery: deliveryMarkOf(rq.LastDelivery)}
	if rq.ContentType != nil {
		row.ContentType = *rq.ContentType
	}
	return row
}

func (h *Handler) requestEvents(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	e, err := h.store.Endpoint(r.Context(), pc.project.ID, r.PathValue("eid"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	f := requestFilter(r.URL.Query())
	pid := pc.project.ID
	// read reads a page of requests as live rows, rendered with the named
	// templates.
	read := func(ctx context.Context, pg store.Page, rowName string) ([]liveRow, string, error) {
		list, err := h.store.Requests(ctx, e.ID, f, pg)
		if err != nil {
			return nil, "", err
		}
		rows, err := renderRows(h.pages["requests"], rowName, "delivery_mark", list.Items,
			func(rq store.RequestSummary) string { return rq.ID },
			func(rq store.RequestSummary) any { return requestRowOf(pid, rq) })
		return rows, list.Next, err
	}
	h.stream(w, r, pc.session, liveList{collection: e.ID, one: "request", many: "requests",
		total: func(ctx context.Context) (int64, error) {
			now, err := h.store.Endpoint(ctx, pid, e.ID)
			return now.RequestCount, err
		},
		rows: func(ctx context.Context, pg store.Page) ([]liveRow, string, error) {
			return read(ctx, pg, "request_row")
		},
		// A request's last delivery changes as deliveries are recorded.
		marks: func(ctx context.Context, n int) ([]liveRow, error) {
			var marks []liveRow
			pg := store.Page{Limit: min(n, store.MaxLimit)}
			for len(marks) < n {
				rows, next, err := read(ctx, pg, "")
				if err != nil {
					return nil, err
				}
				marks = append(marks, rows...)
				if next == "" {
					break
				}
				pg = store.Page{Limit: min(n-len(marks), store.MaxLimit), Before: next}
			}
			return marks, nil
		}})
}

func (h *Handler) purgeEndpoint(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	e, err := h.store.Endpoint(r.Context(), pc.project.ID, r.PathValue("eid"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.store.PurgeEndpoint(r.Context(), pc.project.ID, e.ID); err != nil {
		h.fail(w, r, err)
		return
	}
	redirect(w, r, endpointURL(pc.project.ID, e.ID), "Deleted every request of endpoint "+e.Name+".")
}
