package web

import (
	"net/http"
	"strconv"
	"time"

	"github.com/capturedev/capture/store"
)

// home opens the capture browser on the default project's oldest inbox
// (the one a first start created),
// or the projects page when there is none.
func (h *Handler) home(w http.ResponseWriter, r *http.Request, _ *session) {
	p, err := h.store.Project(r.Context(), store.DefaultName)
	if err != nil {
		projects, perr := h.store.Projects(r.Context())
		if perr != nil || len(projects) == 0 {
			http.Redirect(w, r, "/projects", http.StatusSeeOther)
			return
		}
		p = projects[0]
	}
	inboxes, err := h.store.Inboxes(r.Context(), p.ID, store.Page{Limit: sidebarLimit})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if len(inboxes.Items) == 0 {
		http.Redirect(w, r, projectHome(p.ID), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, inboxURL(p.ID, inboxes.Items[len(inboxes.Items)-1].ID), http.StatusSeeOther)
}

type projectsView struct {
	Projects []projectCard
	Plans    []string
	Name     string
	Plan     string
}

type projectCard struct {
	ID, Name, Plan, Created, URL, SetPlanURL string
	Quotas                                   []quotaRow
}

type quotaRow struct {
	Label, Used, Limit string
	Full               bool
}

func (h *Handler) projectsPage(w http.ResponseWriter, r *http.Request, s *session) {
	h.renderProjects(w, r, s, http.StatusOK, projectsView{Plan: "free"}, "")
}

func (h *Handler) renderProjects(w http.ResponseWriter, r *http.Request, s *session, status int, v projectsView, errMsg string) {
	l, err := h.frame(w, r, s, nil, "Projects", "projects", "")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	projects, err := h.store.Projects(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v.Plans = store.PlanNames()
	for _, p := range projects {
		u, err := h.store.Usage(r.Context(), p.ID)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		v.Projects = append(v.Projects, projectCard{
			ID: p.ID, Name: p.Name, Plan: p.Plan.Name, Created: timeOf(p.CreatedAt).Short,
			URL: projectHome(p.ID), SetPlanURL: projectURL(p.ID, "plan"), Quotas: quotasOf(p.Plan, u),
		})
	}
	l.Error = errMsg
	l.Page = v
	h.render(w, r, status, "projects", l)
}

func quotasOf(p store.Plan, u store.Usage) []quotaRow {
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	return []quotaRow{
		{Label: "Active API keys", Used: n(u.APIKeys), Limit: n(p.APIKeys), Full: u.APIKeys >= p.APIKeys},
		{Label: "Inboxes", Used: n(u.Inboxes), Limit: n(p.Inboxes), Full: u.Inboxes >= p.Inboxes},
		{Label: "Endpoints", Used: n(u.Endpoints), Limit: n(p.Endpoints), Full: u.Endpoints >= p.Endpoints},
		{Label: "Stored messages", Used: n(u.Messages), Limit: n(p.CapturesPerCollection) + " per inbox"},
		{Label: "Stored requests", Used: n(u.Requests), Limit: n(p.CapturesPerCollection) + " per endpoint"},
		{Label: "Retention", Limit: days(p.Retention)},
		{Label: "Message size", Limit: size(p.MessageBytes)},
		{Label: "Webhook body", Limit: size(p.RequestBodyBytes)},
		{Label: "API requests per second per key", Limit: strconv.Itoa(p.RequestsPerSecond)},
		{Label: "Concurrent waits", Limit: strconv.Itoa(p.ConcurrentWaits)},
	}
}

func days(d time.Duration) string {
	return plural(int64(d/(24*time.Hour)), "day", "days")
}

func (h *Handler) createProject(w http.ResponseWriter, r *http.Request, s *session) {
	name, plan := r.PostFormValue("name"), r.PostFormValue("plan")
	p, err := h.store.CreateProject(r.Context(), name, plan)
	if err != nil {
		h.formFailed(w, r, err, func(status int, msg string) {
			h.renderProjects(w, r, s, status, projectsView{Name: name, Plan: plan}, msg)
		})
		return
	}
	redirect(w, r, projectHome(p.ID), "Created project "+p.Name+" on plan "+p.Plan.Name+".")
}

func (h *Handler) setPlan(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	plan := r.PostFormValue("plan")
	p, err := h.store.SetPlan(r.Context(), pc.project.ID, plan)
	if err != nil {
		h.formFailed(w, r, err, func(status int, msg string) {
			h.renderProjects(w, r, pc.session, status, projectsView{Plan: "free"}, msg)
		})
		return
	}
	redirect(w, r, "/projects", "Project "+p.Name+" is now on plan "+p.Plan.Name+".")
}
