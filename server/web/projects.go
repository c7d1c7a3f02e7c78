package web

import (
	"net/http"
	"strconv"
	"strings"
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
	Usage                                    []quotaRow
	// Limits sums up the plan's other quotas in one line.
	Limits string
}

type quotaRow struct {
	Label, Used, Limit string
	Full               bool
}

func (h *Handler) projectsPage(w http.ResponseWriter, r *http.Request, s *session) {
	h.renderProjects(w, r, s, http.StatusOK, projectsView{Plan: "free"}, "")
}

func (h *Handler) renderProjects(w http.ResponseWriter, r *http.Request, s *session, status int, v projectsView, errMsg string) {
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
			URL: projectHome(p.ID), SetPlanURL: projectURL(p.ID, "plan"), Usage: usageOf(p.Plan, u), Limits: limitsOf(p.Plan),
		})
	}
	h.show(w, r, s, nil, status, page{template: "projects", title: "Projects", section: "projects", err: errMsg, view: v})
}

func usageOf(p store.Plan, u store.Usage) []quotaRow {
	return []quotaRow{
		{Label: "API keys", Used: thousands(u.APIKeys), Limit: thousands(p.APIKeys), Full: u.APIKeys >= p.APIKeys},
		{Label: "Inboxes", Used: thousands(u.Inboxes), Limit: thousands(p.Inboxes), Full: u.Inboxes >= p.Inboxes},
		{Label: "Endpoints", Used: thousands(u.Endpoints), Limit: thousands(p.Endpoints), Full: u.Endpoints >= p.Endpoints},
		{Label: "Messages", Used: thousands(u.Messages)},
		{Label: "Requests", Used: thousands(u.Requests)},
	}
}

func limitsOf(p store.Plan) string {
	return strings.Join([]string{
		days(p.Retention) + " retention",
		thousands(p.CapturesPerCollection) + " captures per inbox or endpoint",
		size(p.MessageBytes) + " per message",
		size(p.RequestBodyBytes) + " per webhook body",
		strconv.Itoa(p.RequestsPerSecond) + " API requests/s per key",
		strconv.Itoa(p.ConcurrentWaits) + " concurrent waits",
	}, " · ")
}

// thousands writes 10000 as 10,000.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
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
