package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Bootstrap is what a first start creates: the default project with one
// inbox, one endpoint and one API key.
type Bootstrap struct {
	Project  Project
	Inbox    Inbox
	Endpoint Endpoint
	Key      Key
	// Secret is the API key; set only when Created.
	Secret  string
	Created bool
}

// DefaultName names the objects a first start creates.
const DefaultName = "default"

// EnsureBootstrap creates the default project, inbox, endpoint and key in
// one transaction when the database holds no project yet, and otherwise
// returns the default project with its oldest inbox and endpoint.
func (s *Store) EnsureBootstrap(ctx context.Context) (Bootstrap, error) {
	plan, _ := LookupPlan("free")
	at := now()
	b := Bootstrap{
		Project:  Project{ID: NewID("proj_"), Name: DefaultName, Plan: plan, CreatedAt: at},
		Secret:   newKeySecret(),
		Inbox:    Inbox{ID: NewID("inb_"), Name: DefaultName, SMTPPassword: newSMTPPassword(), CreatedAt: at},
		Endpoint: Endpoint{ID: NewID("whe_"), Name: DefaultName, Response: DefaultResponse(), CreatedAt: at},
		Key:      Key{ID: NewID("key_"), CreatedAt: at},
	}
	b.Inbox.ProjectID, b.Endpoint.ProjectID, b.Key.ProjectID = b.Project.ID, b.Project.ID, b.Project.ID
	err := s.write(ctx, func(t *wtx) error {
		// Replicas starting together bootstrap once: the others wait here
		// and then find the project.
		if err := t.lock("bootstrap"); err != nil {
			return err
		}
		var n int
		if err := t.queryRow(`SELECT count(*) FROM projects`).Scan(&n); err != nil {
			return err
		}
		b.Created = n == 0
		if !b.Created {
			return nil
		}
		for _, st := range []struct {
			q    string
			args []any
		}{
			{`INSERT INTO projects (id, name, plan, created_at) VALUES (?, ?, ?, ?)`,
				[]any{b.Project.ID, b.Project.Name, plan.Name, ms(at)}},
			{`INSERT INTO api_keys (id, project_id, hash, created_at) VALUES (?, ?, ?, ?)`,
				[]any{b.Key.ID, b.Project.ID, hashKey(b.Secret), ms(at)}},
			{`INSERT INTO inboxes (id, project_id, name, smtp_password, smtp_password_hash, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
				[]any{b.Inbox.ID, b.Project.ID, b.Inbox.Name, b.Inbox.SMTPPassword, hashKey(b.Inbox.SMTPPassword), ms(at)}},
			{`INSERT INTO endpoints (id, project_id, name, created_at) VALUES (?, ?, ?, ?)`,
				[]any{b.Endpoint.ID, b.Project.ID, b.Endpoint.Name, ms(at)}},
		} {
			if _, err := t.exec(st.q, st.args...); err != nil {
				return fmt.Errorf("bootstrap: %w", err)
			}
		}
		return nil
	})
	if err != nil || b.Created {
		return b, err
	}
	return s.existingBootstrap(ctx)
}

func (s *Store) existingBootstrap(ctx context.Context) (Bootstrap, error) {
	var b Bootstrap
	p, err := s.Project(ctx, DefaultName)
	if errors.Is(err, ErrNotFound) {
		// The default project was renamed or never existed: show the oldest.
		all, err := s.Projects(ctx)
		if err != nil || len(all) == 0 {
			return b, err
		}
		p = all[0]
	} else if err != nil {
		return b, err
	}
	b.Project = p
	var base row
	b.Inbox, err = scanInbox(s.queryRow(ctx, `SELECT inboxes.seq, inboxes.id, `+inboxCols+`
		FROM inboxes WHERE project_id = ? ORDER BY seq LIMIT 1`, p.ID), &base)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return b, err
	}
	b.Endpoint, err = scanEndpoint(s.queryRow(ctx, `SELECT endpoints.seq, endpoints.id, `+endpointCols+`
		FROM endpoints WHERE project_id = ? ORDER BY seq LIMIT 1`, p.ID), &base)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return b, err
	}
	return b, nil
}
