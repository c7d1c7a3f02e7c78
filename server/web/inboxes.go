package web

import (
	"net/http"

	"github.com/capturedev/capture/store"
)

type inboxesView struct {
	Inboxes                           []inboxCard
	SMTPHost, StartTLSPorts, TLSPorts string
	CreateURL                         string
	Name                              string
	Pager                             pager
}

type inboxCard struct {
	ID, Name, URL, Count              string
	PasswordURL, RotateURL, RevealURL string
	// Password is set when the reader asked to reveal it without the
	// script (which fetches it from PasswordURL instead).
	Password string
	Created  timeView
}

// listLimit is the page size of the administration lists.
const listLimit = 50

func (h *Handler) inboxesPage(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	h.renderInboxes(w, r, pc, http.StatusOK, inboxesView{}, "")
}

func (h *Handler) renderInboxes(w http.ResponseWriter, r *http.Request, pc *projectCtx, status int, v inboxesView, errMsg string) {
	pid := pc.project.ID
	q := r.URL.Query()
	pg := pageOf(q, listLimit)
	list, err := h.store.Inboxes(r.Context(), pid, pg)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	reveal := q.Get("reveal")
	for _, in := range list.Items {
		c := inboxCard{ID: in.ID, Name: in.Name, URL: inboxURL(pid, in.ID), Count: plural(in.MessageCount, "message", "messages"),
			PasswordURL: inboxURL(pid, in.ID) + "/password", RotateURL: inboxURL(pid, in.ID) + "/rotate",
			RevealURL: projectURL(pid, "inboxes"), Created: timeOf(in.CreatedAt)}
		if reveal == in.ID {
			c.Password = in.SMTPPassword
		}
		v.Inboxes = append(v.Inboxes, c)
	}
	v.Pager = pagerFor(r, pg, list.Next, ids(list.Items, func(in store.Inbox) string { return in.ID }))
	v.SMTPHost, v.StartTLSPorts, v.TLSPorts = h.cfg.SMTPHost, PortList(h.cfg.StartTLSPorts), PortList(h.cfg.TLSPorts)
	v.CreateURL = projectURL(pid, "inboxes")
	h.show(w, r, pc.session, pc, status, page{template: "inboxes", title: "Inboxes", section: "inboxes", err: errMsg, view: v})
}

func (h *Handler) createInbox(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	name := r.PostFormValue("name")
	in, err := h.store.CreateInbox(r.Context(), pc.project.ID, name)
	if err != nil {
		h.formFailed(w, r, err, func(status int, msg string) {
			h.renderInboxes(w, r, pc, status, inboxesView{Name: name}, msg)
		})
		return
	}
	redirect(w, r, projectURL(pc.project.ID, "inboxes")+"#"+in.ID,
		"Created inbox "+in.Name+". Its SMTP username is "+in.ID+".")
}

// inboxPassword answers the Reveal and Copy buttons' request for an
// inbox's SMTP password.
func (h *Handler) inboxPassword(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	in, err := h.store.Inbox(r.Context(), pc.project.ID, r.PathValue("iid"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte(in.SMTPPassword))
}

func (h *Handler) rotatePassword(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	// RotateInboxPassword takes any project's inbox; check it is this one's.
	in, err := h.store.Inbox(r.Context(), pc.project.ID, r.PathValue("iid"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if _, err := h.store.RotateInboxPassword(r.Context(), in.ID); err != nil {
		h.fail(w, r, err)
		return
	}
	redirect(w, r, projectURL(pc.project.ID, "inboxes")+"?reveal="+in.ID+"#"+in.ID,
		"New SMTP password for inbox "+in.Name+". Senders still using the old one are refused.")
}
