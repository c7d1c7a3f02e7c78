package web

import (
	"net/http"

	"github.com/capturedev/capture/store"
)

type keysView struct {
	Keys    []keyRow
	Plan    string
	Limit   int64
	Active  int64
	AtLimit bool
	// OneKey is a plan that allows a single key, such as free: the page
	// explains how to make room for another, or where to get more.
	OneKey bool
	// Upgrade is the next plan that allows more keys, if there is one.
	Upgrade   *store.Plan
	CreateURL string
	// NewKey is the secret of the key just created; it is shown this once.
	NewKey, NewKeyID string
	APIBase          string
}

type keyRow struct {
	ID, Revoked, RevokeURL string
	Created                timeView
	Active                 bool
}

func (h *Handler) keysPage(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	h.renderKeys(w, r, pc, http.StatusOK, keysView{}, "")
}

func (h *Handler) renderKeys(w http.ResponseWriter, r *http.Request, pc *projectCtx, status int, v keysView, errMsg string) {
	keys, err := h.store.Keys(r.Context(), pc.project.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	pid := pc.project.ID
	// Newest first, like every other list.
	for i := len(keys) - 1; i >= 0; i-- {
		k := keys[i]
		row := keyRow{ID: k.ID, Created: timeOf(k.CreatedAt), Active: k.RevokedAt == nil,
			RevokeURL: projectURL(pid, "keys/"+k.ID+"/revoke")}
		if k.RevokedAt != nil {
			row.Revoked = timeOf(*k.RevokedAt).Short
		} else {
			v.Active++
		}
		v.Keys = append(v.Keys, row)
	}
	plan := pc.project.Plan
	v.Plan, v.Limit, v.OneKey = plan.Name, plan.APIKeys, plan.APIKeys == 1
	v.AtLimit = v.Active >= plan.APIKeys
	v.Upgrade = moreKeys(plan)
	v.CreateURL = projectURL(pid, "keys")
	v.APIBase = origin(r) + "/api/v1"
	h.show(w, r, pc.session, pc, status, page{template: "keys", title: "API keys", section: "keys", err: errMsg, view: v})
}

// moreKeys is the first plan, in the plans' order, that allows more keys
// than p; nil when none does.
func moreKeys(p store.Plan) *store.Plan {
	for _, name := range store.PlanNames() {
		if next, err := store.LookupPlan(name); err == nil && next.APIKeys > p.APIKeys {
			return &next
		}
	}
	return nil
}

// createKey shows the new key on the page that answers the post, and
// nowhere else: only its hash is kept.
func (h *Handler) createKey(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	k, secret, err := h.store.CreateKey(r.Context(), pc.project.ID)
	if err != nil {
		h.formFailed(w, r, err, func(status int, msg string) { h.renderKeys(w, r, pc, status, keysView{}, msg) })
		return
	}
	h.renderKeys(w, r, pc, http.StatusOK, keysView{NewKey: secret, NewKeyID: k.ID}, "")
}

func (h *Handler) revokeKey(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	id := r.PathValue("kid")
	// RevokeKey takes any project's key; this page may only touch its own.
	keys, err := h.store.Keys(r.Context(), pc.project.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	found := false
	for _, k := range keys {
		found = found || k.ID == id
	}
	if !found {
		h.fail(w, r, store.ErrNotFound)
		return
	}
	if _, err := h.store.RevokeKey(r.Context(), id); err != nil {
		h.formFailed(w, r, err, func(status int, msg string) { h.renderKeys(w, r, pc, status, keysView{}, msg) })
		return
	}
	redirect(w, r, projectURL(pc.project.ID, "keys"), "Revoked key "+id+". API calls with it are refused from now on.")
}
