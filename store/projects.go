package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

const projectCols = `id, name, plan, created_at`

func scanProject(row interface{ Scan(...any) error }) (Project, error) {
	var p Project
	var plan string
	var created int64
	if err := row.Scan(&p.ID, &p.Name, &plan, &created); err != nil {
		return Project{}, err
	}
	var err error
	if p.Plan, err = LookupPlan(plan); err != nil {
		return Project{}, fmt.Errorf("project %s: %w", p.ID, err)
	}
	p.CreatedAt = fromMS(created)
	return p, nil
}

func validName(kind, name string) error {
	if strings.TrimSpace(name) == "" {
		return fmt.Errorf("%w: %s name must not be empty", ErrInvalid, kind)
	}
	// "staging " would pass for "staging" in every list while --project
	// staging found the other.
	if strings.TrimSpace(name) != name {
		return fmt.Errorf("%w: %s name %q must not begin or end with spaces", ErrInvalid, kind, name)
	}
	if utf8.RuneCountInString(name) > 100 || !utf8.ValidString(name) {
		return fmt.Errorf("%w: %s name must be valid UTF-8 of at most 100 characters", ErrInvalid, kind)
	}
	// Names are printed in tables, terminals and pages: a newline or an
	// escape sequence in one would break them or act on the terminal.
	if strings.ContainsFunc(name, unicode.IsControl) {
		return fmt.Errorf("%w: %s name must not contain control characters (newlines, tabs, escapes)", ErrInvalid, kind)
	}
	return nil
}

// CreateProject adds a project on the named plan.
func (s *Store) CreateProject(ctx context.Context, name, plan string) (Project, error) {
	if err := validName("project", name); err != nil {
		return Project{}, err
	}
	if strings.HasPrefix(name, "proj_") {
		return Project{}, fmt.Errorf("%w: project name must not start with proj_", ErrInvalid)
	}
	pl, err := LookupPlan(plan)
	if err != nil {
		return Project{}, err
	}
	p := Project{ID: NewID("proj_"), Name: name, Plan: pl, CreatedAt: now()}
	err = s.write(ctx, func(t *wtx) error {
		if err := t.lock("bootstrap"); err != nil {
			return err
		}
		var n int
		if err := t.queryRow(`SELECT count(*) FROM projects WHERE name = ?`, name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%w: a project named %q", ErrExists, name)
		}
		_, err := t.exec(`INSERT INTO projects (id, name, plan, created_at) VALUES (?, ?, ?, ?)`,
			p.ID, p.Name, pl.Name, ms(p.CreatedAt))
		return err
	})
	if err != nil {
		return Project{}, err
	}
	return p, nil
}

// Projects lists every project, oldest first.
func (s *Store) Projects(ctx context.Context) ([]Project, error) {
	rows, err := s.query(ctx, `SELECT `+projectCols+` FROM projects ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Project
	for rows.Next() {
		p, err := scanProject(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// Project finds a project by id or by name.
func (s *Store) Project(ctx context.Context, idOrName string) (Project, error) {
	p, err := scanProject(s.queryRow(ctx,
		`SELECT `+projectCols+` FROM projects WHERE id = ? OR name = ? ORDER BY id = ? DESC LIMIT 1`,
		idOrName, idOrName, idOrName))
	if errors.Is(err, sql.ErrNoRows) {
		return Project{}, fmt.Errorf("%w: no project %q", ErrNotFound, idOrName)
	}
	return p, err
}

// SetPlan moves a project to another plan. A plan whose countable quotas
// the project already exceeds is refused with ErrQuotaExceeded naming each
// one, and the plan stays as it was.
func (s *Store) SetPlan(ctx context.Context, idOrName, plan string) (Project, error) {
	pl, err := LookupPlan(plan)
	if err != nil {
		return Project{}, err
	}
	p, err := s.Project(ctx, idOrName)
	if err != nil {
		return Project{}, err
	}
	err = s.write(ctx, func(t *wtx) error {
		if err := t.lock("project " + p.ID); err != nil {
			return err
		}
		var over []string
		for _, q := range countables {
			var n int64
			if err := t.queryRow(q.count, p.ID).Scan(&n); err != nil {
				return err
			}
			if limit := q.limit(pl); n > limit {
				over = append(over, fmt.Sprintf("%s (it allows %d)", q.of(n), limit))
			}
		}
		if len(over) > 0 {
			return fmt.Errorf("%w: project %s holds more than the %s plan allows: %s; it stays on plan %s",
				ErrQuotaExceeded, p.Name, pl.Name, strings.Join(over, ", "), p.Plan.Name)
		}
		_, err := t.exec(`UPDATE projects SET plan = ? WHERE id = ?`, pl.Name, p.ID)
		return err
	})
	if err != nil {
		return Project{}, err
	}
	p.Plan = pl
	return p, nil
}

// Usage counts what the project holds.
func (s *Store) Usage(ctx context.Context, projectID string) (Usage, error) {
	var u Usage
	err := s.queryRow(ctx, `SELECT
		(SELECT count(*) FROM api_keys WHERE project_id = ?1 AND revoked_at IS NULL),
		(SELECT count(*) FROM inboxes WHERE project_id = ?1),
		(SELECT count(*) FROM endpoints WHERE project_id = ?1),
		(SELECT CAST(coalesce(sum(message_count), 0) AS BIGINT) FROM inboxes WHERE project_id = ?1),
		(SELECT CAST(coalesce(sum(request_count), 0) AS BIGINT) FROM endpoints WHERE project_id = ?1)`, projectID).
		Scan(&u.APIKeys, &u.Inboxes, &u.Endpoints, &u.Messages, &u.Requests)
	return u, err
}

// countable is a quota on how many of something a project holds.
type countable struct {
	one, many string // what is counted, singular and plural
	// count counts the project's (its id the only argument).
	count string
	limit func(Plan) int64
}

var (
	quotaKeys = countable{"active API key", "active API keys",
		`SELECT count(*) FROM api_keys WHERE project_id = ? AND revoked_at IS NULL`, func(p Plan) int64 { return p.APIKeys }}
	quotaInboxes = countable{"inbox", "inboxes",
		`SELECT count(*) FROM inboxes WHERE project_id = ?`, func(p Plan) int64 { return p.Inboxes }}
	quotaEndpoints = countable{"endpoint", "endpoints",
		`SELECT count(*) FROM endpoints WHERE project_id = ?`, func(p Plan) int64 { return p.Endpoints }}
	countables = []countable{quotaKeys, quotaInboxes, quotaEndpoints}
)

// of says n of them: "1 active API key", "2 active API keys".
func (q countable) of(n int64) string {
	if n == 1 {
		return "1 " + q.one
	}
	return fmt.Sprintf("%d %s", n, q.many)
}

// checkQuota fails with ErrQuotaExceeded when the project already holds
// the plan's number of q. Replicas creating in one project take turns, so
// that two cannot both take the last one.
func checkQuota(t *wtx, projectID string, q countable) error {
	if err := t.lock("project " + projectID); err != nil {
		return err
	}
	var planName string
	if err := t.queryRow(`SELECT plan FROM projects WHERE id = ?`, projectID).Scan(&planName); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: no project %q", ErrNotFound, projectID)
		}
		return err
	}
	plan, err := LookupPlan(planName)
	if err != nil {
		return err
	}
	var n int64
	if err := t.queryRow(q.count, projectID).Scan(&n); err != nil {
		return err
	}
	if max := q.limit(plan); n >= max {
		return fmt.Errorf("%w: the %s plan allows %s", ErrQuotaExceeded, plan.Name, q.of(max))
	}
	return nil
}

// now is the capture clock, at the millisecond precision times are kept at.
func now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }
