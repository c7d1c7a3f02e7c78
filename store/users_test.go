package store

import (
	"errors"
	"strings"
	"testing"
)

func TestPassword(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	if has, err := s.HasPassword(ctx); err != nil || has {
		t.Fatalf("fresh store has a password: %v %v", has, err)
	}
	if err := s.CheckPassword(ctx, "anything at all"); !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("check without a password: %v", err)
	}
	for _, bad := range []string{"", "short", "sevenĉh", strings.Repeat("x", 73), "        ", "long enough\x00", "long\tenough", "\x1b[2Jlong enough"} {
		if err := s.SetPassword(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("SetPassword(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	if has, _ := s.HasPassword(ctx); has {
		t.Fatal("a refused password was stored")
	}

	sess, err := s.CreateSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetPassword(ctx, "correct horse"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CheckSession(ctx, sess.Token); !errors.Is(err, ErrNotFound) {
		t.Errorf("a session outlived a password change: %v", err)
	}
	if err := s.CheckPassword(ctx, "correct horse"); err != nil {
		t.Errorf("right password: %v", err)
	}
	if err := s.CheckPassword(ctx, "correct horsE"); !errors.Is(err, ErrWrongPassword) {
		t.Errorf("wrong password: %v", err)
	}
	var stored string
	if err := s.queryRow(ctx, `SELECT hash FROM web_password`).Scan(&stored); err != nil || !strings.HasPrefix(stored, "$2") {
		t.Errorf("stored %q, %v: want a bcrypt hash", stored, err)
	}
}

func TestLoginTokensAreSingleUse(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	token, err := s.CreateLoginToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(token) < 32 {
		t.Fatalf("token %q too short", token)
	}
	if err := s.UseLoginToken(ctx, token); err != nil {
		t.Fatal(err)
	}
	if err := s.UseLoginToken(ctx, token); !errors.Is(err, ErrNotFound) {
		t.Errorf("second use: %v", err)
	}
	if err := s.UseLoginToken(ctx, "bogus"); !errors.Is(err, ErrNotFound) {
		t.Errorf("bogus token: %v", err)
	}

	expired, _ := s.CreateLoginToken(ctx)
	expireAll(t, s, "web_login_tokens")
	if err := s.UseLoginToken(ctx, expired); !errors.Is(err, ErrNotFound) {
		t.Errorf("expired token: %v", err)
	}
	// The expired token's row is still there (a used one is gone), under
	// its hash alone.
	var rows, plain int
	if err := s.queryRow(ctx, `SELECT count(*), count(CASE WHEN hash = ? THEN 1 END) FROM web_login_tokens`,
		[]byte(expired)).Scan(&rows, &plain); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || plain != 0 {
		t.Errorf("%d token rows, %d of them the token in the clear; want 1 row, under its hash", rows, plain)
	}
}

func TestSessions(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	a, err := s.CreateSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.CreateSession(ctx)
	if a.Token == b.Token {
		t.Fatal("two sessions share a token")
	}
	if _, err := s.CheckSession(ctx, a.Token); err != nil {
		t.Fatal(err)
	}
	if err := s.EndSession(ctx, a.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CheckSession(ctx, a.Token); !errors.Is(err, ErrNotFound) {
		t.Errorf("ended session still valid: %v", err)
	}
	if _, err := s.CheckSession(ctx, b.Token); err != nil {
		t.Errorf("ending one session ended another: %v", err)
	}
	expireAll(t, s, "web_sessions")
	if _, err := s.CheckSession(ctx, b.Token); !errors.Is(err, ErrNotFound) {
		t.Errorf("expired session still valid: %v", err)
	}
}

// expireAll moves every row of table into the past.
func expireAll(t testing.TB, s *Store, table string) {
	t.Helper()
	err := s.write(t.Context(), func(w *wtx) error {
		_, err := w.exec(`UPDATE `+table+` SET expires_at = ?`, ms(now())-1)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
