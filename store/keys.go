package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

func scanKey(row interface{ Scan(...any) error }) (Key, error) {
	var k Key
	var created int64
	var revoked sql.NullInt64
	if err := row.Scan(&k.ID, &k.ProjectID, &created, &revoked); err != nil {
		return Key{}, err
	}
	k.CreatedAt = fromMS(created)
	if revoked.Valid {
		t := fromMS(revoked.Int64)
		k.RevokedAt = &t
	}
	return k, nil
}

// CreateKey adds an API key to the project and returns it with its secret,
// which is not kept and cannot be shown again.
func (s *Store) CreateKey(ctx context.Context, projectID string) (Key, string, error) {
	secret := newKeySecret()
	k := Key{ID: NewID("key_"), ProjectID: projectID, CreatedAt: now()}
	err := s.write(ctx, func(t *wtx) error {
		err := checkQuota(t, projectID, quotaKeys)
		if err != nil {
			return err
		}
		_, err = t.exec(`INSERT INTO api_keys (id, project_id, hash, created_at) VALUES (?, ?, ?, ?)`,
			k.ID, k.ProjectID, hashKey(secret), ms(k.CreatedAt))
		return err
	})
	if err != nil {
		return Key{}, "", err
	}
	return k, secret, nil
}

// Keys lists a project's keys, revoked ones included, oldest first.
func (s *Store) Keys(ctx context.Context, projectID string) ([]Key, error) {
	rows, err := s.query(ctx,
		`SELECT id, project_id, created_at, revoked_at FROM api_keys WHERE project_id = ? ORDER BY created_at, id`, projectID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Key
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// RevokeKey revokes a key for good. Revoking a revoked key is an error so a
// typo is never reported as success.
func (s *Store) RevokeKey(ctx context.Context, keyID string) (Key, error) {
	var k Key
	err := s.write(ctx, func(t *wtx) error {
		var err error
		k, err = scanKey(t.queryRow(`SELECT id, project_id, created_at, revoked_at FROM api_keys WHERE id = ?`, keyID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: no key %q", ErrNotFound, keyID)
		}
		if err != nil {
			return err
		}
		if k.RevokedAt != nil {
			return fmt.Errorf("%w: key %s is already revoked", ErrInvalid, keyID)
		}
		at := now()
		k.RevokedAt = &at
		_, err = t.exec(`UPDATE api_keys SET revoked_at = ? WHERE id = ?`, ms(at), keyID)
		return err
	})
	return k, err
}

// Authenticate finds the active key with this secret and its project.
func (s *Store) Authenticate(ctx context.Context, secret string) (Key, Project, error) {
	if !strings.HasPrefix(secret, "cap_") {
		return Key{}, Project{}, fmt.Errorf("%w: malformed key", ErrNotFound)
	}
	row := s.queryRow(ctx, `SELECT k.id, k.project_id, k.created_at, k.revoked_at,
		p.id, p.name, p.plan, p.created_at
		FROM api_keys k JOIN projects p ON p.id = k.project_id WHERE k.hash = ?`, hashKey(secret))
	var k Key
	var p Project
	var kc, pc int64
	var revoked sql.NullInt64
	var plan string
	err := row.Scan(&k.ID, &k.ProjectID, &kc, &revoked, &p.ID, &p.Name, &plan, &pc)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && revoked.Valid) {
		return Key{}, Project{}, fmt.Errorf("%w: unknown or revoked key", ErrNotFound)
	}
	if err != nil {
		return Key{}, Project{}, err
	}
	if p.Plan, err = LookupPlan(plan); err != nil {
		return Key{}, Project{}, err
	}
	k.CreatedAt, p.CreatedAt = fromMS(kc), fromMS(pc)
	return k, p, nil
}
