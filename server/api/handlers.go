package api

import (
	"context"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/capturedev/capture/store"
)

func (a *API) me(w http.ResponseWriter, r *http.Request, _ httprouter.Params, c caller) {
	if e := parseQuery(r).err(); e != nil {
		writeError(w, e)
		return
	}
	u, err := a.store.Usage(r.Context(), c.project.ID)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, renderMe(c, u))
}

func (a *API) listInboxes(w http.ResponseWriter, r *http.Request, _ httprouter.Params, c caller) {
	q := parseQuery(r, "limit", "before", "after")
	p := q.page()
	if e := q.err(); e != nil {
		writeError(w, e)
		return
	}
	l, err := a.store.Inboxes(r.Context(), c.project.ID, p)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, renderList(l, func(in store.Inbox) inboxJSON { return renderInbox(in, a.cfg) }))
}

func (a *API) listEndpoints(w http.ResponseWriter, r *http.Request, _ httprouter.Params, c caller) {
	q := parseQuery(r, "limit", "before", "after")
	p := q.page()
	if e := q.err(); e != nil {
		writeError(w, e)
		return
	}
	l, err := a.store.Endpoints(r.Context(), c.project.ID, p)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, renderList(l, func(e store.Endpoint) endpointJSON {
		return renderEndpoint(e, a.cfg.CaptureBase)
	}))
}

// waitList runs list and, while it finds nothing and wait allows, holds on
// the collection's commit notifications and runs it again. Holding takes one
// of the project's wait slots, given back when the call returns, also when
// the client disconnects.
func waitList[T any](ctx context.Context, a *API, c caller, collectionID string, wait time.Duration,
	list func(context.Context) (store.List[T], error)) (store.List[T], error) {

	var timeout <-chan time.Time
	holding := false
	defer func() {
		if holding {
			a.releaseWait(c.project.ID)
		}
	}()
	for {
		// Taken before the query so that a commit landing in between
		// still wakes us.
		changed := a.store.Watch(collectionID)
		l, err := list(ctx)
		if err != nil || len(l.Items) > 0 || wait <= 0 {
			return l, err
		}
		if !holding {
			if !a.acquireWait(c.project) {
				return l, &Error{Status: http.StatusTooManyRequests, Code: "too_many_waits",
					Message: "this project already has " + strconv.Itoa(c.project.Plan.ConcurrentWaits) +
						" waits in progress; retry after 1 s", RetryAfter: 1}
			}
			holding = true
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-changed:
		case <-timeout:
			return store.List[T]{Items: []T{}}, nil
		case <-ctx.Done():
			return l, ctx.Err()
		}
	}
}

func (a *API) listMessages(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller) {
	q := parseQuery(r, "to", "from", "subject", "since", "wait", "before", "after", "limit")
	f := store.MessageFilter{To: q.str("to"), From: q.str("from"), Subject: q.str("subject"), Since: q.since()}
	p, wait := q.page(), q.wait()
	if e := q.err(); e != nil {
		writeError(w, e)
		return
	}
	inbox, err := a.store.Inbox(r.Context(), c.project.ID, ps.ByName("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	l, err := waitList(r.Context(), a, c, inbox.ID, wait, func(ctx context.Context) (store.List[store.MessageSummary], error) {
		return a.store.Messages(ctx, inbox.ID, f, p)
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, renderList(l, renderMessageSummary))
}

func (a *API) getMessage(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller) {
	if e := parseQuery(r).err(); e != nil {
		writeError(w, e)
		return
	}
	m, err := a.store.Message(r.Context(), c.project.ID, ps.ByName("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, renderMessage(m))
}

func (a *API) messageLinks(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller) {
	q := parseQuery(r, "match")
	if e := q.err(); e != nil {
		writeError(w, e)
		return
	}
	links, err := a.store.MessageLinks(r.Context(), c.project.ID, ps.ByName("id"), store.LinkFilter{Match: q.str("match")})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, listJSON[linkJSON]{Items: renderLinks(links)})
}

func (a *API) messageRaw(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller) {
	if e := parseQuery(r).err(); e != nil {
		writeError(w, e)
		return
	}
	raw, err := a.store.MessageRaw(r.Context(), c.project.ID, ps.ByName("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "message/rfc822")
	w.Header().Set("Content-Length", strconv.Itoa(len(raw)))
	w.Write(raw)
}

func (a *API) messageAttachment(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller) {
	if e := parseQuery(r).err(); e != nil {
		writeError(w, e)
		return
	}
	att, data, err := a.store.AttachmentData(r.Context(), c.project.ID, ps.ByName("id"), ps.ByName("att"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ct := att.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if att.Filename != "" {
		w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": att.Filename}))
	}
	w.Write(data)
}

func (a *API) deleteMessage(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller) {
	if e := parseQuery(r).err(); e != nil {
		writeError(w, e)
		return
	}
	if err := a.store.DeleteMessage(r.Context(), c.project.ID, ps.ByName("id")); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) purgeInbox(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller) {
	if e := parseQuery(r).err(); e != nil {
		writeError(w, e)
		return
	}
	if err := a.store.PurgeInbox(r.Context(), c.project.ID, ps.ByName("id")); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) listRequests(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller) {
	q := parseQuery(r, "method", "path", "since", "wait", "before", "after", "limit")
	f := store.RequestFilter{Method: q.str("method"), PathPrefix: q.str("path"), Since: q.since()}
	p, wait := q.page(), q.wait()
	if e := q.err(); e != nil {
		writeError(w, e)
		return
	}
	endpoint, err := a.store.Endpoint(r.Context(), c.project.ID, ps.ByName("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	l, err := waitList(r.Context(), a, c, endpoint.ID, wait, func(ctx context.Context) (store.List[store.RequestSummary], error) {
		return a.store.Requests(ctx, endpoint.ID, f, p)
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, renderList(l, renderRequestSummary))
}

func (a *API) getRequest(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller) {
	if e := parseQuery(r).err(); e != nil {
		writeError(w, e)
		return
	}
	req, err := a.store.Request(r.Context(), c.project.ID, ps.ByName("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, renderRequest(req))
}

func (a *API) deleteRequest(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller) {
	if e := parseQuery(r).err(); e != nil {
		writeError(w, e)
		return
	}
	if err := a.store.DeleteRequest(r.Context(), c.project.ID, ps.ByName("id")); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) purgeEndpoint(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller) {
	if e := parseQuery(r).err(); e != nil {
		writeError(w, e)
		return
	}
	if err := a.store.PurgeEndpoint(r.Context(), c.project.ID, ps.ByName("id")); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
