package store

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// openFromVersion writes a database as the migrations up to version left
// it, runs stmts in it, and opens it, which migrates it the rest of the
// way. It returns the store and the database's path.
func openFromVersion(t *testing.T, version int, stmts ...string) (*Store, string) {
	t.Helper()
	sqliteOnly(t, "SQLite's upgrade path from older schemas; a PostgreSQL database starts at today's")
	path := filepath.Join(t.TempDir(), DBFile)
	db, err := sql.Open("sqlite", "file:"+path+"?"+pragmas)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := migrations.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	var setup []string
	for _, e := range entries {
		num, _, _ := strings.Cut(e.Name(), "_")
		if v, err := strconv.Atoi(num); err != nil || v > version {
			continue
		}
		body, err := migrations.ReadFile("migrations/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		setup = append(setup, string(body))
	}
	setup = append(setup, `CREATE TABLE schema_version (version INTEGER NOT NULL)`,
		fmt.Sprintf(`INSERT INTO schema_version (version) VALUES (%d)`, version))
	for _, q := range append(setup, stmts...) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	db.Close()
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

// TestMigrateMessageRowsFromVersion1 opens a database written by the first
// schema, where recipients and links were child tables, and reads its
// messages back through the current schema.
func TestMigrateMessageRowsFromVersion1(t *testing.T) {
	s, path := openFromVersion(t, 1,
		`INSERT INTO projects VALUES ('prj_1', 'p', 'team', 0)`,
		`INSERT INTO inboxes (id, project_id, name, smtp_password, message_count, created_at)
			VALUES ('inb_1', 'prj_1', 'i', 'pw', 2, 0)`,
		`INSERT INTO messages (seq, id, inbox_id, received_at, envelope_from, subject, size, attachment_count,
			snippet, headers, warnings, search_from, search_to, search_subject, raw)
			VALUES (1, 'msg_rich', 'inb_1', 1000, 'a@x', 's', 1, 0, '', '[]', '[]', '', '', '', x'00'),
			       (2, 'msg_bare', 'inb_1', 2000, 'a@x', 's', 1, 0, '', '[]', '[]', '', '', '', x'00')`,
		// Positions out of insertion order, to show the order survives.
		`INSERT INTO message_recipients VALUES
			(1, 5, 'reply_to', NULL, 'r@x'),
			(1, 2, 'envelope', NULL, 'e2@x'),
			(1, 1, 'envelope', NULL, 'e1@x'),
			(1, 4, 'cc', NULL, 'c@x'),
			(1, 3, 'to', 'Tee "Q"', 't@x')`,
		`INSERT INTO message_links VALUES
			(1, 1, 'https://b.example/2', NULL, 'text'),
			(1, 0, 'https://a.example/1?x=1&y=2', 'Confirm', 'html')`,
		`INSERT INTO attachments VALUES ('att_1', 1, 0, 'a.txt', 'text/plain', NULL, 0, 2, x'6869')`,
	)
	m, err := s.Message(t.Context(), "prj_1", "msg_rich")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.EnvelopeTo, []string{"e1@x", "e2@x"}) ||
		!slices.Equal(m.To, []Address{{`Tee "Q"`, "t@x"}}) || !slices.Equal(m.Cc, []Address{{"", "c@x"}}) ||
		!slices.Equal(m.ReplyTo, []Address{{"", "r@x"}}) {
		t.Errorf("recipients after migration: env %v to %v cc %v reply-to %v", m.EnvelopeTo, m.To, m.Cc, m.ReplyTo)
	}
	if len(m.Links) != 2 || m.Links[0].URL != "https://a.example/1?x=1&y=2" || m.Links[0].Text == nil ||
		*m.Links[0].Text != "Confirm" || m.Links[0].Origin != "html" ||
		m.Links[1].URL != "https://b.example/2" || m.Links[1].Text != nil || m.Links[1].Origin != "text" {
		t.Errorf("links after migration: %+v", m.Links)
	}
	// Links stored before kinds existed were never judged: "other".
	if m.Links[0].Kind != LinkOther || m.Links[1].Kind != LinkOther || len(m.Codes) != 0 || m.LinksTruncated {
		t.Errorf("kinds and codes after migration: %+v, %+v, %v", m.Links, m.Codes, m.LinksTruncated)
	}
	if l, err := s.MessageLinks(t.Context(), "prj_1", "msg_rich", LinkFilter{Kind: LinkOther}); err != nil || len(l) != 2 {
		t.Errorf("kind filter after migration: %+v, %v", l, err)
	}
	bare, err := s.Message(t.Context(), "prj_1", "msg_bare")
	if err != nil {
		t.Fatal(err)
	}
	if len(bare.EnvelopeTo) != 0 || len(bare.To) != 0 || len(bare.Links) != 0 || bare.EnvelopeTo == nil || bare.Links == nil {
		t.Errorf("message without recipients or links: %+v", bare)
	}
	list, err := s.Messages(t.Context(), "inb_1", MessageFilter{}, Page{})
	if err != nil || len(list.Items) != 2 || list.Items[1].To[0].Address != "t@x" {
		t.Fatalf("list after migration: %+v, %v", list, err)
	}
	var tables int
	s.rdb.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name IN ('message_recipients', 'message_links')`).Scan(&tables)
	if tables != 0 {
		t.Error("child tables left behind")
	}

	// Rebuilding the table must not have cascaded to the attachments, and
	// the reference must still work.
	if len(m.Attachments) != 1 || m.Attachments[0].ID != "att_1" {
		t.Fatalf("attachments after migration: %+v", m.Attachments)
	}
	if err := s.DeleteMessage(t.Context(), "prj_1", "msg_rich"); err != nil {
		t.Fatal(err)
	}
	var left int
	s.rdb.QueryRow(`SELECT count(*) FROM attachments`).Scan(&left)
	if left != 0 {
		t.Error("deleting the migrated message left its attachment")
	}
	if st, err := os.Stat(path + "-wal"); err == nil && st.Size() > 1<<20 {
		t.Errorf("WAL is %d bytes after migrating", st.Size())
	}
}

// TestMigrationKeepsTriggersOfRebuiltTable opens a database of version 3
// whose messages table carries a trigger and an index that another
// migration made: rebuilding the table in 0004 must not lose them.
func TestMigrationKeepsTriggersOfRebuiltTable(t *testing.T) {
	s, _ := openFromVersion(t, 3,
		`CREATE TABLE message_log (message_id TEXT NOT NULL)`,
		`CREATE TRIGGER messages_logged AFTER INSERT ON messages BEGIN INSERT INTO message_log VALUES (new.id); END`,
		`CREATE INDEX messages_by_subject ON messages(subject)`,
		`INSERT INTO projects VALUES ('prj_1', 'p', 'team', 0)`,
		`INSERT INTO inboxes (id, project_id, name, smtp_password, message_count, created_at)
			VALUES ('inb_1', 'prj_1', 'i', 'pw', 0, 0)`,
	)
	var n int
	s.rdb.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name IN ('messages_logged', 'messages_by_subject')`).Scan(&n)
	if n != 2 {
		t.Fatalf("%d of the trigger and index left after the rebuild", n)
	}
	id, err := s.InsertMessage(t.Context(), &NewMessage{InboxID: "inb_1", EnvelopeFrom: "a@x", Raw: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	var logged string
	if err := s.rdb.QueryRow(`SELECT message_id FROM message_log`).Scan(&logged); err != nil || logged != id {
		t.Errorf("trigger after the rebuild: %q, %v", logged, err)
	}
}

// TestLargeColumnsLast keeps what lists and filters read ahead of the
// bodies and the raw message: SQLite reads a column stored after a large
// value by walking that value's overflow pages.
func TestLargeColumnsLast(t *testing.T) {
	sqliteOnly(t, "SQLite's row layout; PostgreSQL moves large values out of the row (TOAST)")
	s := newStore(t)
	rows, err := s.rdb.Query(`SELECT name FROM pragma_table_info('messages') ORDER BY cid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		rows.Scan(&c)
		cols = append(cols, c)
	}
	if want := []string{"headers", "text_body", "html_body", "raw"}; !slices.Equal(cols[len(cols)-4:], want) {
		t.Errorf("messages columns end with %v, want %v", cols[len(cols)-4:], want)
	}
	// The small per-message columns come before the large JSON ones.
	if i, j := slices.Index(cols, "links_truncated"), slices.Index(cols, "links"); i < 0 || i > j ||
		slices.Index(cols, "codes") > j {
		t.Errorf("messages columns %v: codes and links_truncated after links", cols)
	}
}
