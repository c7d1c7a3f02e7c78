package store

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"errors"
	"fmt"
)

// InboxBySMTPPassword finds the inbox whose SMTP password is password, for
// callers that are given the password alone (the provider email APIs). It
// looks up a digest of the password, so how long the lookup takes says
// nothing about how close a guess came, and it reads the database every
// time, so a rotated password takes effect at once.
func (s *Store) InboxBySMTPPassword(ctx context.Context, password string) (Inbox, error) {
	if password == "" {
		return Inbox{}, fmt.Errorf("%w: no inbox has an empty password", ErrNotFound)
	}
	var base row
	in, err := scanInbox(s.queryRow(ctx,
		`SELECT inboxes.seq, inboxes.id, `+inboxCols+` FROM inboxes WHERE smtp_password_hash = ?`,
		hashKey(password)), &base)
	if errors.Is(err, sql.ErrNoRows) {
		return Inbox{}, fmt.Errorf("%w: no inbox has that password", ErrNotFound)
	}
	if err != nil {
		return Inbox{}, err
	}
	// The digest matched; comparing the passwords too costs nothing and
	// keeps a digest collision from ever counting as a match.
	if subtle.ConstantTimeCompare([]byte(password), []byte(in.SMTPPassword)) != 1 {
		return Inbox{}, fmt.Errorf("%w: no inbox has that password", ErrNotFound)
	}
	return in, nil
}
