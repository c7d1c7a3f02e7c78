package web

import (
	"bytes"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/store"
)

// layout is what every page's frame shows; Page holds the page's own view.
type layout struct {
	Title string
	CSRF  string
	// Section marks the current item of the navigation.
	Section  string
	Project  *projectLink
	Projects []projectLink
	Sidebar  *sidebar
	Flash    string
	Error    string
	Page     any
	// Refresh, when set, is a same-site path the page moves on to at once.
	Refresh string
}

type projectLink struct {
	Name, Plan, URL                   string
	InboxesURL, EndpointsURL, KeysURL string
	Current                           bool
}

// sidebar lists the current project's inboxes and endpoints.
type sidebar struct {
	Inboxes   []sideItem
	Endpoints []sideItem
	// More says that the project has more than the sidebar shows.
	MoreInboxes, MoreEndpoints bool
	InboxesURL, EndpointsURL   string
}

type sideItem struct {
	Name, URL string
	Count     string
	Current   bool
}

// sidebarLimit is how many inboxes and endpoints the sidebar lists.
const sidebarLimit = 50

// frame builds the layout of a signed-in page: the project switcher, and
// the sidebar when the page belongs to a project. current is the id of the
// inbox or endpoint being shown, if any.
func (h *Handler) frame(w http.ResponseWriter, r *http.Request, s *session, pc *projectCtx, title, section, current string) (layout, error) {
	l := layout{Title: title, CSRF: s.csrf, Section: section, Flash: takeFlash(w, r)}
	projects, err := h.store.Projects(r.Context())
	if err != nil {
		return l, err
	}
	for _, p := range projects {
		link := projectLink{Name: p.Name, Plan: p.Plan.Name, URL: projectHome(p.ID),
			InboxesURL: projectURL(p.ID, "inboxes"), EndpointsURL: projectURL(p.ID, "endpoints"), KeysURL: projectURL(p.ID, "keys")}
		if pc != nil && p.ID == pc.project.ID {
			link.Current = true
			l.Project = &link
		}
		l.Projects = append(l.Projects, link)
	}
	if pc == nil {
		return l, nil
	}
	sb := &sidebar{InboxesURL: projectURL(pc.project.ID, "inboxes"), EndpointsURL: projectURL(pc.project.ID, "endpoints")}
	inboxes, err := h.store.Inboxes(r.Context(), pc.project.ID, store.Page{Limit: sidebarLimit})
	if err != nil {
		return l, err
	}
	// Oldest first, so that the list stays put as new ones are added.
	for _, in := range slices.Backward(inboxes.Items) {
		sb.Inboxes = append(sb.Inboxes, sideItem{Name: in.Name, URL: inboxURL(pc.project.ID, in.ID),
			Count: count(in.MessageCount), Current: in.ID == current})
	}
	sb.MoreInboxes = inboxes.Next != ""
	endpoints, err := h.store.Endpoints(r.Context(), pc.project.ID, store.Page{Limit: sidebarLimit})
	if err != nil {
		return l, err
	}
	for _, e := range slices.Backward(endpoints.Items) {
		sb.Endpoints = append(sb.Endpoints, sideItem{Name: e.Name, URL: endpointURL(pc.project.ID, e.ID),
			Count: count(e.RequestCount), Current: e.ID == current})
	}
	sb.MoreEndpoints = endpoints.Next != ""
	l.Sidebar = sb
	return l, nil
}

// page is a signed-in page to show: its template and view, its title,
// where it sits in the navigation, and the message of a form it refused.
type page struct {
	template, title, section string
	// current is the id of the inbox or endpoint shown, if any.
	current string
	err     string
	view    any
}

// show renders a signed-in page in its frame; pc is nil for a page that
// belongs to no project.
func (h *Handler) show(w http.ResponseWriter, r *http.Request, s *session, pc *projectCtx, status int, p page) {
	l, err := h.frame(w, r, s, pc, p.title, p.section, p.current)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	l.Error = p.err
	l.Page = p.view
	h.render(w, r, status, p.template, l)
}

// render writes a page. The page is rendered into a buffer first so that
// a template error becomes an error page rather than half a page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, l layout) {
	// A refused form or sign-in is an error like any other for a program:
	// the envelope, with the message the page would show.
	if status >= http.StatusBadRequest && !acceptsHTML(r) {
		contract.WriteError(w, apiError(status, l.message()))
		return
	}
	t, ok := h.pages[name]
	if !ok {
		h.log.Error("web: no template", "name", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", l); err != nil {
		h.log.Error("web: render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

type errorView struct {
	Status  int
	Heading string
	Message string
}

// message is what a refused page says went wrong.
func (l layout) message() string {
	switch v := l.Page.(type) {
	case errorView:
		return v.Message
	case loginView:
		return v.Error
	case interface{ ListError() string }:
		if msg := v.ListError(); msg != "" {
			return msg
		}
	}
	return l.Error
}

// errorPage shows a message in a page of its own to a browser. Anything
// else, the page's script included, gets the read API's error envelope,
// as every error on the listener is (SPEC §8).
func (h *Handler) errorPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if !acceptsHTML(r) {
		contract.WriteError(w, apiError(status, msg))
		return
	}
	l := layout{Title: http.StatusText(status)}
	// Signed in, the page keeps its navigation, so the way on is one click.
	if s, _ := h.currentSession(r); s != nil {
		if framed, err := h.frame(w, r, s, nil, l.Title, "", ""); err == nil {
			l = framed
		}
	}
	l.Page = errorView{Status: status, Heading: http.StatusText(status), Message: msg}
	h.render(w, r, status, "error", l)
}

// URLs of the pages, in one place.

func projectHome(pid string) string         { return "/projects/" + pid + "/inboxes" }
func projectURL(pid, section string) string { return "/projects/" + pid + "/" + section }
func inboxURL(pid, id string) string        { return "/projects/" + pid + "/inboxes/" + id }
func endpointURL(pid, id string) string     { return "/projects/" + pid + "/endpoints/" + id }
func messageURL(pid, id string) string      { return "/projects/" + pid + "/messages/" + id }
func requestURL(pid, id string) string      { return "/projects/" + pid + "/requests/" + id }

// captureURL is where senders post to an endpoint, as the read API reports it.
func (h *Handler) captureURL(endpointID string) string { return h.cfg.CaptureBase + "/" + endpointID }

// Formatting for the pages. Times are shown in UTC on the server; the
// script turns them into the reader's local time.

const timeLayout = "2006-01-02 15:04:05"

type timeView struct {
	ISO   string // for the datetime attribute
	Short string
}

func timeOf(t time.Time) timeView {
	t = t.UTC()
	return timeView{ISO: t.Format("2006-01-02T15:04:05.000Z"), Short: t.Format(timeLayout) + " UTC"}
}

func count(n int64) string {
	if n < 10_000 {
		return strconv.FormatInt(n, 10)
	}
	if n < 1_000_000 {
		return strconv.FormatInt(n/1000, 10) + "k"
	}
	return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + "M"
}

func size(n int64) string {
	unit := func(v float64, name string) string {
		if v == float64(int64(v)) {
			return strconv.FormatInt(int64(v), 10) + " " + name
		}
		return strconv.FormatFloat(v, 'f', 1, 64) + " " + name
	}
	switch {
	case n < 1024:
		return strconv.FormatInt(n, 10) + " B"
	case n < 1024*1024:
		return unit(float64(n)/1024, "KiB")
	default:
		return unit(float64(n)/(1024*1024), "MiB")
	}
}

// plural writes "1 key", "2 keys".
func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(n, 10) + " " + many
}

func addressString(a store.Address) string { return contract.FormatAddress(a.Name, a.Address) }

func addressList(as []store.Address) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = addressString(a)
	}
	return strings.Join(parts, ", ")
}

// rowAddresses is how many of a message's To addresses its row in a list
// names: the row's cell shows one or two, its title these.
const rowAddresses = 5

// someAddresses names the first n of a header's addresses as addressList
// does, and says how many more of the total it named there are: "a, b,
// c, +4,997 more". The store keeps the first store.ListedAddresses, so a
// header naming thousands costs a page no more than that.
func someAddresses(as []store.Address, total, n int) string {
	total = max(total, len(as))
	if len(as) > n {
		as = as[:n]
	}
	s := addressList(as)
	if more := total - len(as); more > 0 {
		s += ", +" + thousands(int64(more)) + " more"
	}
	return s
}

// PortList shows SMTP ports as people read them ("587, 2525", or "none"):
// on the inboxes page and in serve's startup lines.
func PortList(ports []int) string {
	if len(ports) == 0 {
		return "none"
	}
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ", ")
}

// origin is this interface's own scheme://host, as the browser reached it.
func origin(r *http.Request) string {
	if isHTTPS(r) {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// pager links to the newer and older pages of a keyset-paged list.
type pager struct {
	NewerURL, OlderURL string
}

// pagerFor builds the links around the page taken with pg, whose items
// have the given ids (newest first) and whose store cursor is next.
func pagerFor(r *http.Request, pg store.Page, next string, ids []string) pager {
	var p pager
	switch {
	case pg.Before == "" && pg.After == "":
		if next != "" {
			p.OlderURL = pageLink(r, "before", next)
		}
	case len(ids) == 0:
		p.NewerURL = pageLink(r, "", "")
	case pg.Before != "":
		p.NewerURL = pageLink(r, "after", ids[0])
		if next != "" {
			p.OlderURL = pageLink(r, "before", next)
		}
	default:
		p.OlderURL = pageLink(r, "before", ids[len(ids)-1])
		if next != "" {
			p.NewerURL = pageLink(r, "after", next)
		}
	}
	return p
}

// pageLink is the list page r shows with its filters, at the cursor
// key=id (the newest page when key is "").
func pageLink(r *http.Request, key, id string) string {
	q := r.URL.Query()
	q.Del("before")
	q.Del("after")
	q.Del("reveal")
	if key != "" {
		q.Set(key, id)
	}
	if len(q) == 0 {
		return r.URL.Path
	}
	return r.URL.Path + "?" + q.Encode()
}

func ids[T any](items []T, id func(T) string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = id(it)
	}
	return out
}

// pageOf is the page of a list that the query's cursor asks for.
func pageOf(q url.Values, limit int) store.Page {
	return store.Page{Limit: limit, Before: q.Get("before"), After: q.Get("after")}
}
