package api

import (
	"context"
	"mime"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/store"
)

func (a *API) me(w http.ResponseWriter, r *http.Request, _ httprouter.Params, c caller, _ *query) error {
	u, err := a.store.Usage(r.Context(), c.project.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderMe(c, u))
	return nil
}

func (a *API) listInboxes(w http.ResponseWriter, r *http.Request, _ httprouter.Params, c caller, q *query) error {
	l, err := a.store.Inboxes(r.Context(), c.project.ID, q.page)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderList(l, func(in store.Inbox) contract.Inbox { return RenderInbox(in, a.cfg) }))
	return nil
}

func (a *API) listEndpoints(w http.ResponseWriter, r *http.Request, _ httprouter.Params, c caller, q *query) error {
	l, err := a.store.Endpoints(r.Context(), c.project.ID, q.page)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderList(l, func(e store.Endpoint) contract.Endpoint {
		return RenderEndpoint(e, a.cfg.CaptureBase)
	}))
	return nil
}

// waitList runs list and, while it finds nothing and wait allows, holds on
// the collection's commit notifications and runs it again. Holding takes one
// of the project's wait slots, given back when the call returns, also when
// the client disconnects. A held wait answers only while its key holds: it
// checks the key whenever it wakes, and wakes too when a setting changes,
// so that a key revoked meanwhile ends it at once as unauthorized. Deletes,
// purges and prunes of the collection wake it as captures do: a wait whose
// cursor they took answers invalid_cursor at once, and the client starts
// again from what exists before the next capture comes, never with an
// empty page for a cursor that names nothing.
func waitList[T any](ctx context.Context, a *API, c caller, collectionID string, wait time.Duration,
	list func(context.Context) (store.List[T], error)) (store.List[T], error) {

	var timeout <-chan time.Time
	var settingsChanged <-chan struct{} // nil, which never fires, until the wait holds
	var release func()
	defer func() {
		if release != nil {
			release()
		}
	}()
	for {
		held := release != nil
		// Taken before the query and the key's check so that a commit
		// landing in between still wakes us.
		changed := a.store.Watch(collectionID)
		if held {
			settingsChanged = a.settings.current()
		}
		l, err := list(ctx)
		if err == nil && held {
			_, err = a.keyOf(ctx, c.secret)
		}
		if err != nil || len(l.Items) > 0 || wait <= 0 {
			return l, err
		}
		if !held {
			if release, settingsChanged, err = a.holdWait(ctx, c, wait); err != nil {
				return l, err
			}
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-changed:
		case <-settingsChanged:
		case <-timeout:
			// Read once more at the deadline rather than answer with
			// nothing: a capture committed in time is returned and a
			// cursor deleted in time refused even when select chose the
			// timer, or the notification never came (a PostgreSQL whose
			// connection for them broke), and a database that stopped
			// answering meanwhile is answered 503, never an empty 200.
			timeout, wait = nil, 0
			continue
		case <-ctx.Done():
			return l, ctx.Err()
		}
	}
}

func (a *API) listMessages(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller, q *query) error {
	f := store.MessageFilter{To: q.str("to"), From: q.str("from"), Subject: q.str("subject"), Q: q.str("q"), Since: q.since}
	inbox, err := a.store.Inbox(r.Context(), c.project.ID, ps.ByName("id"))
	if err != nil {
		return err
	}
	l, err := waitList(r.Context(), a, c, inbox.ID, q.wait, func(ctx context.Context) (store.List[store.MessageSummary], error) {
		return a.store.Messages(ctx, inbox.ID, f, q.page)
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderList(l, renderMessageSummary))
	return nil
}

func (a *API) getMessage(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller, _ *query) error {
	d, err := a.store.MessageDetail(r.Context(), c.project.ID, ps.ByName("id"))
	if err != nil {
		return err
	}
	a.writeMessage(w, r, d)
	return nil
}

func (a *API) messageLinks(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller, q *query) error {
	links, truncated, err := a.store.MessageLinks(r.Context(), c.project.ID, ps.ByName("id"),
		store.LinkFilter{Match: q.str("match"), Kind: q.kind})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, contract.LinkList{Items: renderLinks(links), LinksTruncated: truncated})
	return nil
}

func (a *API) messageRaw(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller, _ *query) error {
	raw, err := a.store.RawPart(r.Context(), c.project.ID, ps.ByName("id"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "message/rfc822")
	a.writePart(w, r, raw)
	return nil
}

func (a *API) messageAttachment(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller, _ *query) error {
	att, data, err := a.store.AttachmentPart(r.Context(), c.project.ID, ps.ByName("id"), ps.ByName("att"))
	if err != nil {
		return err
	}
	ct := att.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// A part the sender gave no name (an invite, a bounce's report) is
	// still a download, named by its id and type as the web names it.
	name := att.Filename
	if name == "" {
		name = att.ID + contract.FileExtension(ct)
	}
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	a.writePart(w, r, data)
	return nil
}

func (a *API) listRequests(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller, q *query) error {
	f := store.RequestFilter{Method: q.str("method"), PathPrefix: q.str("path"), Q: q.str("q"), Since: q.since}
	endpoint, err := a.store.Endpoint(r.Context(), c.project.ID, ps.ByName("id"))
	if err != nil {
		return err
	}
	l, err := waitList(r.Context(), a, c, endpoint.ID, q.wait, func(ctx context.Context) (store.List[store.RequestSummary], error) {
		return a.store.Requests(ctx, endpoint.ID, f, q.page)
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderList(l, renderRequestSummary))
	return nil
}

func (a *API) getRequest(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller, _ *query) error {
	d, err := a.store.RequestDetail(r.Context(), c.project.ID, ps.ByName("id"), func(size int64) (func(), error) {
		return a.admitSlice(r.Context(), size)
	})
	if err != nil {
		return err
	}
	valid, err := a.validUTF8(r.Context(), d.Body())
	if err != nil {
		return err
	}
	a.writeRequest(w, r, d, valid)
	return nil
}

// Deletes answer 204 once done; the id is in the route, the project in the
// caller.

func (a *API) deleteMessage(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller, _ *query) error {
	return noContent(w, a.store.DeleteMessage(r.Context(), c.project.ID, ps.ByName("id")))
}

func (a *API) purgeInbox(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller, _ *query) error {
	return noContent(w, a.store.PurgeInbox(r.Context(), c.project.ID, ps.ByName("id")))
}

func (a *API) deleteRequest(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller, _ *query) error {
	return noContent(w, a.store.DeleteRequest(r.Context(), c.project.ID, ps.ByName("id")))
}

func (a *API) purgeEndpoint(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller, _ *query) error {
	return noContent(w, a.store.PurgeEndpoint(r.Context(), c.project.ID, ps.ByName("id")))
}

func noContent(w http.ResponseWriter, err error) error {
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
