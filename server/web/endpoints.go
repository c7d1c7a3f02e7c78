package web

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/capturedev/capture/store"
)

type endpointsView struct {
	Endpoints    []endpointCard
	CreateURL    string
	Name, Target string
	Pager        pager
}

type endpointCard struct {
	ID, Name, URL, CaptureURL, Target, Count, SettingsURL, Response string
}

func (h *Handler) endpointsPage(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	h.renderEndpoints(w, r, pc, http.StatusOK, endpointsView{}, "")
}

func (h *Handler) renderEndpoints(w http.ResponseWriter, r *http.Request, pc *projectCtx, status int, v endpointsView, errMsg string) {
	pid := pc.project.ID
	q := r.URL.Query()
	pg := pageOf(q, listLimit)
	list, err := h.store.Endpoints(r.Context(), pid, pg)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for _, e := range list.Items {
		c := endpointCard{ID: e.ID, Name: e.Name, URL: endpointURL(pid, e.ID), CaptureURL: h.captureURL(e.ID),
			Count: plural(e.RequestCount, "request", "requests"), SettingsURL: endpointURL(pid, e.ID) + "/settings",
			Response: responseSummary(e.Response)}
		if e.TargetURL != nil {
			c.Target = *e.TargetURL
		}
		v.Endpoints = append(v.Endpoints, c)
	}
	v.Pager = pagerFor(r, pg, list.Next, ids(list.Items, func(e store.Endpoint) string { return e.ID }))
	v.CreateURL = projectURL(pid, "endpoints")
	h.show(w, r, pc.session, pc, status, page{template: "endpoints", title: "Endpoints", section: "endpoints", err: errMsg, view: v})
}

// responseSummary says in a few words what senders get back.
func responseSummary(resp store.Response) string {
	if resp.Status == 200 && len(resp.Headers) == 0 && resp.Body == "" && resp.Delay == 0 {
		return `200 with {"id": "req_…"} (the default)`
	}
	s := strconv.Itoa(resp.Status)
	if n := len(resp.Headers); n > 0 {
		s += ", " + plural(int64(n), "header", "headers")
	}
	if resp.Body != "" {
		s += ", " + size(int64(len(resp.Body))) + " body"
	} else {
		s += ", empty body"
	}
	if resp.Delay > 0 {
		s += ", after " + resp.Delay.String()
	}
	return s
}

func (h *Handler) createEndpoint(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	name, target := r.PostFormValue("name"), strings.TrimSpace(r.PostFormValue("target"))
	var t *string
	if target != "" {
		t = &target
	}
	e, err := h.store.CreateEndpoint(r.Context(), pc.project.ID, name, t)
	if err != nil {
		h.formFailed(w, r, err, func(status int, msg string) {
			h.renderEndpoints(w, r, pc, status, endpointsView{Name: name, Target: target}, msg)
		})
		return
	}
	redirect(w, r, projectURL(pc.project.ID, "endpoints")+"#"+e.ID, "Created endpoint "+e.Name+".")
}

type endpointSettingsView struct {
	ID, Name, CaptureURL, RequestsURL, SaveURL string
	Target, Status, Headers, Body, Delay       string
}

func (h *Handler) endpointSettingsPage(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	e, err := h.store.Endpoint(r.Context(), pc.project.ID, r.PathValue("eid"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v := endpointSettingsView{
		Status: strconv.Itoa(e.Response.Status), Headers: headerLines(e.Response.Headers),
		Body: e.Response.Body, Delay: strconv.FormatInt(e.Response.Delay.Milliseconds(), 10),
	}
	if e.TargetURL != nil {
		v.Target = *e.TargetURL
	}
	h.renderEndpointSettings(w, r, pc, e, http.StatusOK, v, "")
}

func (h *Handler) renderEndpointSettings(w http.ResponseWriter, r *http.Request, pc *projectCtx, e store.Endpoint,
	status int, v endpointSettingsView, errMsg string) {
	pid := pc.project.ID
	v.ID, v.Name, v.CaptureURL = e.ID, e.Name, h.captureURL(e.ID)
	v.RequestsURL, v.SaveURL = endpointURL(pid, e.ID), endpointURL(pid, e.ID)+"/settings"
	h.show(w, r, pc.session, pc, status, page{template: "endpoint_settings", title: e.Name + " settings",
		section: "endpoints", current: e.ID, err: errMsg, view: v})
}

func headerLines(hs map[string]string) string {
	names := make([]string, 0, len(hs))
	for k := range hs {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		b.WriteString(k + ": " + hs[k] + "\n")
	}
	return b.String()
}

// saveEndpoint sets the saved target and the custom response at once,
// through the same store call as `capture endpoint set`.
func (h *Handler) saveEndpoint(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	e, err := h.store.Endpoint(r.Context(), pc.project.ID, r.PathValue("eid"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	// Browsers send a textarea's line breaks as CRLF; people mean LF.
	v := endpointSettingsView{
		Target: strings.TrimSpace(r.PostFormValue("target")), Status: strings.TrimSpace(r.PostFormValue("status")),
		Headers: newlines(r.PostFormValue("headers")), Body: newlines(r.PostFormValue("body")),
		Delay: strings.TrimSpace(r.PostFormValue("delay")),
	}
	u, err := parseEndpointForm(v)
	if err == nil {
		_, err = h.store.UpdateEndpoint(r.Context(), e.ID, u)
	}
	if err != nil {
		h.formFailed(w, r, err, func(status int, msg string) {
			h.renderEndpointSettings(w, r, pc, e, status, v, msg)
		})
		return
	}
	redirect(w, r, endpointURL(pc.project.ID, e.ID)+"/settings", "Saved. The next request to "+e.Name+" gets this response.")
}

func parseEndpointForm(v endpointSettingsView) (store.EndpointUpdate, error) {
	u := store.EndpointUpdate{Body: &v.Body, Headers: map[string]string{}}
	if v.Target == "" {
		u.ClearTarget = true
	} else {
		u.Target = &v.Target
	}
	status, err := strconv.Atoi(v.Status)
	if err != nil || status < 200 || status > 599 {
		return u, fmt.Errorf("%w: response status %q must be a number from 200 to 599", store.ErrInvalid, v.Status)
	}
	u.Status = &status
	delay := 0
	if v.Delay != "" {
		delay, err = strconv.Atoi(v.Delay)
		if err != nil || delay < 0 || time.Duration(delay)*time.Millisecond > store.MaxResponseDelay {
			return u, fmt.Errorf("%w: delay %q must be a number of milliseconds from 0 to %d", store.ErrInvalid,
				v.Delay, store.MaxResponseDelay.Milliseconds())
		}
	}
	d := time.Duration(delay) * time.Millisecond
	u.Delay = &d
	headers, err := headerLinesOf(v.Headers)
	if err != nil {
		return u, err
	}
	for _, h := range headers {
		u.Headers[h.Name] = h.Value
	}
	return u, nil
}

// headerLinesOf reads a textarea of "Name: value" lines, skipping blank
// ones; names come back canonical.
func headerLinesOf(text string) ([]fieldRow, error) {
	var out []fieldRow
	for i, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name = strings.TrimSpace(name)
		if !ok || !store.ValidHeaderName(name) {
			return nil, fmt.Errorf("%w: header line %d (%q) must look like Name: value", store.ErrInvalid, i+1, line)
		}
		out = append(out, fieldRow{Name: http.CanonicalHeaderKey(name), Value: strings.TrimSpace(value)})
	}
	return out, nil
}
