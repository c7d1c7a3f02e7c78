package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
)

// secretSize is the length of a secret in bytes: a full HMAC-SHA256 key.
const secretSize = 32

// secretSetting is the settings name a secret is kept under.
func secretSetting(name string) string { return "secret/" + name }

// Secret returns the random secret kept in the database under name, made
// the first time any process sharing the database asks for it. Every
// replica, and every later run on the same database, gets the same bytes:
// what one signs with it, another accepts. The secret never changes once
// made; callers may keep it for the life of the process.
func (s *Store) Secret(ctx context.Context, name string) ([]byte, error) {
	key, err := s.secret(ctx, name)
	if !errors.Is(err, sql.ErrNoRows) {
		return key, err
	}
	fresh := make([]byte, secretSize)
	rand.Read(fresh)
	// Two processes asking at once both insert; the first to commit makes
	// the secret and the other's insert does nothing, so both read the
	// first's back.
	err = s.write(ctx, func(t *wtx) error {
		_, err := t.exec(`INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`,
			secretSetting(name), base64.StdEncoding.EncodeToString(fresh))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", name, err)
	}
	key, err = s.secret(ctx, name)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("secret %s: gone right after it was made", name)
	}
	return key, err
}

// secret reads the secret kept under name, sql.ErrNoRows when there is
// none yet.
func (s *Store) secret(ctx context.Context, name string) ([]byte, error) {
	v, err := s.setting(ctx, secretSetting(name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", name, err)
	}
	key, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(key) < secretSize {
		return nil, fmt.Errorf("secret %s: the database holds a damaged value", name)
	}
	return key, nil
}
