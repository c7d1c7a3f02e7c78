package store

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInboxBySMTPPassword(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	boot, err := s.EnsureBootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.CreateInbox(ctx, boot.Project.ID, "other")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []Inbox{boot.Inbox, other} {
		got, err := s.InboxBySMTPPassword(ctx, in.SMTPPassword)
		if err != nil || got.ID != in.ID || got.ProjectID != in.ProjectID {
			t.Errorf("lookup of %s: %+v, %v", in.ID, got, err)
		}
	}
	for _, bad := range []string{"", "nope", boot.Inbox.SMTPPassword + "x", strings.ToLower(boot.Inbox.SMTPPassword)} {
		if _, err := s.InboxBySMTPPassword(ctx, bad); !errors.Is(err, ErrNotFound) {
			t.Errorf("lookup of %q: %v, want not found", bad, err)
		}
	}

	// Rotation takes effect at once: the old password finds nothing.
	rotated, err := s.RotateInboxPassword(ctx, other.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.InboxBySMTPPassword(ctx, other.SMTPPassword); !errors.Is(err, ErrNotFound) {
		t.Errorf("old password after rotation: %v", err)
	}
	if got, err := s.InboxBySMTPPassword(ctx, rotated.SMTPPassword); err != nil || got.ID != other.ID {
		t.Errorf("new password after rotation: %+v, %v", got, err)
	}
}

// TestMigrateInboxLookup opens a database of schema version 2, whose
// inboxes have no password digest, and finds them by password.
func TestMigrateInboxLookup(t *testing.T) {
	sqliteOnly(t, "SQLite's upgrade path from older schemas; a PostgreSQL database starts at today's")
	path := filepath.Join(t.TempDir(), DBFile)
	db, err := sql.Open("sqlite", "file:"+path+"?"+pragmas)
	if err != nil {
		t.Fatal(err)
	}
	stmts := []string{`CREATE TABLE schema_version (version INTEGER NOT NULL)`, `INSERT INTO schema_version (version) VALUES (2)`}
	for _, name := range []string{"0001_init.sql", "0002_message_rows.sql"} {
		b, err := os.ReadFile("migrations/" + name)
		if err != nil {
			t.Fatal(err)
		}
		stmts = append(stmts, string(b))
	}
	stmts = append(stmts,
		`INSERT INTO projects VALUES ('prj_1', 'p', 'team', 0)`,
		`INSERT INTO inboxes (id, project_id, name, smtp_password, created_at) VALUES
			('inb_1', 'prj_1', 'one', 'first-password', 0), ('inb_2', 'prj_1', 'two', 'second-password', 0)`)
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	db.Close()

	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for pw, id := range map[string]string{"first-password": "inb_1", "second-password": "inb_2"} {
		if in, err := s.InboxBySMTPPassword(t.Context(), pw); err != nil || in.ID != id {
			t.Errorf("%s after migration: %+v, %v", pw, in, err)
		}
	}
}

func TestInsertMessagesAllOrNone(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	p := mustProject(t, s, "p", "free")
	in, err := s.CreateInbox(ctx, p.ID, "in")
	if err != nil {
		t.Fatal(err)
	}
	msg := func(inbox, subject string) *NewMessage {
		return &NewMessage{InboxID: inbox, ReceivedAt: now(), EnvelopeFrom: "a@x", Subject: subject, Raw: []byte("Subject: " + subject + "\r\n\r\n")}
	}
	ids, err := s.InsertMessages(ctx, []*NewMessage{msg(in.ID, "one"), msg(in.ID, "two")})
	if err != nil || len(ids) != 2 || ids[0] == ids[1] {
		t.Fatalf("InsertMessages: %v, %v", ids, err)
	}
	for i, subject := range []string{"one", "two"} {
		if m, err := s.Message(ctx, p.ID, ids[i]); err != nil || m.Subject != subject {
			t.Errorf("message %d: %+v, %v", i, m.Subject, err)
		}
	}
	// The second message names no inbox that exists: neither is stored.
	if _, err := s.InsertMessages(ctx, []*NewMessage{msg(in.ID, "three"), msg("inb_nope", "four")}); err == nil {
		t.Fatal("a batch with a bad message was stored")
	}
	list, err := s.Messages(ctx, in.ID, MessageFilter{}, Page{})
	if err != nil || len(list.Items) != 2 {
		t.Errorf("after the failed batch the inbox holds %d messages, %v; want 2", len(list.Items), err)
	}
	if got, _ := s.Inbox(ctx, "", in.ID); got.MessageCount != 2 {
		t.Errorf("message count %d, want 2", got.MessageCount)
	}
}
