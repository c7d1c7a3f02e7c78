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

	"golang.org/x/crypto/bcrypt"
)

// The web interface has one user: whoever knows the password set with
// `capture user set-password`, or holds a one-time sign-in link.

const (
	// MinPasswordLength is the shortest web password, in characters.
	MinPasswordLength = 8
	// LoginLinkLifetime is how long a one-time sign-in link stays valid.
	LoginLinkLifetime = 15 * time.Minute
	// SessionLifetime is how long a web session lasts after sign-in.
	SessionLifetime = 14 * 24 * time.Hour
)

// ErrWrongPassword is a failed password check, also when none is set.
var ErrWrongPassword = errors.New("wrong password")

// bcrypt reads at most 72 bytes; a longer password would be cut silently.
const maxPasswordBytes = 72

// ValidNewPassword says why password cannot be the web password, or nil.
func ValidNewPassword(password string) error {
	if n := utf8.RuneCountInString(password); n < MinPasswordLength {
		return fmt.Errorf("%w: the password must be at least %d characters (got %d)", ErrInvalid, MinPasswordLength, n)
	}
	if len(password) > maxPasswordBytes {
		return fmt.Errorf("%w: the password must be at most %d bytes", ErrInvalid, maxPasswordBytes)
	}
	// Nobody could type either into the sign-in page's password field.
	if strings.TrimSpace(password) == "" {
		return fmt.Errorf("%w: the password must not be only spaces", ErrInvalid)
	}
	if i := strings.IndexFunc(password, unicode.IsControl); i >= 0 {
		return fmt.Errorf("%w: the password must not contain control characters (found %q)", ErrInvalid, []rune(password[i:])[0])
	}
	return nil
}

// SetPassword sets the web password, stored as a bcrypt hash, and ends
// every session: whoever signed in with the old one signs in again.
func (s *Store) SetPassword(ctx context.Context, password string) error {
	if err := ValidNewPassword(password); err != nil {
		return err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return fmt.Errorf("hash password: %w", err)
	}
	return s.write(ctx, func(t *wtx) error {
		if _, err := t.exec(`INSERT INTO web_password (id, hash, updated_at) VALUES (1, ?, ?)
			ON CONFLICT (id) DO UPDATE SET hash = excluded.hash, updated_at = excluded.updated_at`,
			string(hash), ms(now())); err != nil {
			return err
		}
		_, err := t.exec(`DELETE FROM web_sessions`)
		return err
	})
}

// HasPassword reports whether a web password was set.
func (s *Store) HasPassword(ctx context.Context) (bool, error) {
	var n int
	err := s.queryRow(ctx, `SELECT count(*) FROM web_password`).Scan(&n)
	return n > 0, err
}

// CheckPassword returns nil when password is the web password, and
// ErrWrongPassword when it is not or none is set.
func (s *Store) CheckPassword(ctx context.Context, password string) error {
	var hash string
	err := s.queryRow(ctx, `SELECT hash FROM web_password WHERE id = 1`).Scan(&hash)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrWrongPassword
	}
	if err != nil {
		return err
	}
	if bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) != nil {
		return ErrWrongPassword
	}
	return nil
}

// CreateLoginToken returns a new one-time sign-in token, valid for
// LoginLinkLifetime. Only its hash is kept.
func (s *Store) CreateLoginToken(ctx context.Context) (string, error) {
	token := randomBase62(32)
	at := now()
	err := s.write(ctx, func(t *wtx) error {
		if _, err := t.exec(`DELETE FROM web_login_tokens WHERE expires_at <= ?`, ms(at)); err != nil {
			return err
		}
		_, err := t.exec(`INSERT INTO web_login_tokens (hash, expires_at) VALUES (?, ?)`,
			hashKey(token), ms(at.Add(LoginLinkLifetime)))
		return err
	})
	if err != nil {
		return "", err
	}
	return token, nil
}

// UseLoginToken consumes a sign-in token: it succeeds once, before the
// token expires, and fails with ErrNotFound after that.
func (s *Store) UseLoginToken(ctx context.Context, token string) error {
	return s.write(ctx, func(t *wtx) error {
		res, err := t.exec(`DELETE FROM web_login_tokens WHERE hash = ? AND expires_at > ?`, hashKey(token), ms(now()))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: unknown, used or expired sign-in link", ErrNotFound)
		}
		return nil
	})
}

// Session is a signed-in browser.
type Session struct {
	// Token is the cookie value; only its hash is stored.
	Token     string
	ExpiresAt time.Time
}

// CreateSession starts a web session.
func (s *Store) CreateSession(ctx context.Context) (Session, error) {
	at := now()
	sess := Session{Token: randomBase62(43), ExpiresAt: at.Add(SessionLifetime)}
	err := s.write(ctx, func(t *wtx) error {
		if _, err := t.exec(`DELETE FROM web_sessions WHERE expires_at <= ?`, ms(at)); err != nil {
			return err
		}
		_, err := t.exec(`INSERT INTO web_sessions (hash, created_at, expires_at) VALUES (?, ?, ?)`,
			hashKey(sess.Token), ms(at), ms(sess.ExpiresAt))
		return err
	})
	if err != nil {
		return Session{}, err
	}
	return sess, nil
}

// CheckSession returns the live session with this token, or ErrNotFound.
func (s *Store) CheckSession(ctx context.Context, token string) (Session, error) {
	var expires int64
	err := s.queryRow(ctx, `SELECT expires_at FROM web_sessions WHERE hash = ? AND expires_at > ?`,
		hashKey(token), ms(now())).Scan(&expires)
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("%w: no such session", ErrNotFound)
	}
	if err != nil {
		return Session{}, err
	}
	return Session{Token: token, ExpiresAt: fromMS(expires)}, nil
}

// EndSession signs a session out; ending one that does not exist is not
// an error.
func (s *Store) EndSession(ctx context.Context, token string) error {
	return s.write(ctx, func(t *wtx) error {
		_, err := t.exec(`DELETE FROM web_sessions WHERE hash = ?`, hashKey(token))
		return err
	})
}
