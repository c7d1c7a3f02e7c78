package store

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/capturedev/capture/store/pgtest"
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
	if l, _, err := s.MessageLinks(t.Context(), "prj_1", "msg_rich", LinkFilter{Kind: LinkOther}); err != nil || len(l) != 2 {
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
// packed large values: SQLite reads a column stored after a large value by
// walking that value's overflow pages.
func TestLargeColumnsLast(t *testing.T) {
	sqliteOnly(t, "SQLite's row layout; PostgreSQL moves large values out of the row (TOAST)")
	s := newStore(t)
	for _, table := range []string{"messages", "requests"} {
		rows, err := s.rdb.Query(`SELECT name FROM pragma_table_info(?) ORDER BY cid`, table)
		if err != nil {
			t.Fatal(err)
		}
		var cols []string
		for rows.Next() {
			var c string
			rows.Scan(&c)
			cols = append(cols, c)
		}
		rows.Close()
		if cols[len(cols)-1] != "content" {
			t.Errorf("%s columns %v: content is not last", table, cols)
		}
	}
}

// TestMigratePackedContent opens a database of version 8, whose large
// values were columns of their own, and reads every one of them back byte
// for byte from the packs the migration made of them.
func TestMigratePackedContent(t *testing.T) {
	s, _ := openFromVersion(t, 8,
		`INSERT INTO projects VALUES ('prj_1', 'p', 'team', 0)`,
		`INSERT INTO inboxes (id, project_id, name, smtp_password, message_count, created_at)
			VALUES ('inb_1', 'prj_1', 'i', 'pw', 2, 0)`,
		`INSERT INTO endpoints (id, project_id, name, request_count, created_at) VALUES ('whe_1', 'prj_1', 'ep', 2, 0)`,
		fmt.Sprintf(`INSERT INTO messages (seq, id, inbox_id, received_at, envelope_from, subject, size, attachment_count, snippet,
			search_from, search_to, search_subject, recipients, warnings, links, headers, text_body, html_body, raw)
			VALUES (1, 'msg_full', 'inb_1', 1000, 'a@x', 's', %d, 1, '', '', '', '',
				'{"envelope":["e@x"],"to":[],"cc":[],"reply_to":[]}', '[]',
				'[{"url":"https://a.example/","text":"A","origin":"html","kind":"other"}]',
				'[["Subject",["s"]],["X-Two",["1","2"]]]', 'text ✓', '<p>html</p>', x'%x'),
			(2, 'msg_bare', 'inb_1', 2000, 'a@x', 's', 0, 0, '', '', '', '',
				'{"envelope":[],"to":[],"cc":[],"reply_to":[]}', '[]', '[]', '[]', NULL, NULL, x'')`, len(rawMessage), rawMessage),
		`INSERT INTO attachments VALUES ('att_1', 1, 0, 'a.bin', 'application/octet-stream', NULL, 0, 3, x'00ff10')`,
		`INSERT INTO requests (seq, id, endpoint_id, received_at, method, path, query, size, remote_addr, headers, body)
			VALUES (1, 'req_1', 'whe_1', 1000, 'POST', '/p', '', 3, '127.0.0.1:1', '[["X-A",["b"]]]', x'010203'),
			(2, 'req_empty', 'whe_1', 2000, 'GET', '/', '', 0, '127.0.0.1:1', '[]', x'')`,
	)
	ctx := t.Context()
	m, err := s.Message(ctx, "prj_1", "msg_full")
	if err != nil {
		t.Fatal(err)
	}
	if m.Text == nil || *m.Text != "text ✓" || m.HTML == nil || *m.HTML != "<p>html</p>" ||
		len(m.Headers) != 2 || !slices.Equal(m.Headers[1].Values, []string{"1", "2"}) ||
		len(m.Links) != 1 || m.Links[0].URL != "https://a.example/" || *m.Links[0].Text != "A" {
		t.Errorf("message after migration: %+v", m)
	}
	if got, err := s.MessageRaw(ctx, "prj_1", "msg_full"); err != nil || string(got) != rawMessage {
		t.Errorf("raw after migration: %q, %v", got, err)
	}
	if _, data, err := s.AttachmentData(ctx, "prj_1", "msg_full", "att_1"); err != nil || string(data) != "\x00\xff\x10" {
		t.Errorf("attachment after migration: %q, %v", data, err)
	}
	bare, err := s.Message(ctx, "prj_1", "msg_bare")
	if err != nil || bare.Text != nil || bare.HTML != nil || len(bare.Links) != 0 || len(bare.Headers) != 0 {
		t.Errorf("bare message after migration: %+v, %v", bare, err)
	}
	if got, err := s.MessageRaw(ctx, "prj_1", "msg_bare"); err != nil || len(got) != 0 {
		t.Errorf("empty raw after migration: %q, %v", got, err)
	}
	r, err := s.Request(ctx, "prj_1", "req_1")
	if err != nil || string(r.Body) != "\x01\x02\x03" || len(r.Headers) != 1 || r.Headers[0].Name != "X-A" {
		t.Errorf("request after migration: %+v, %v", r, err)
	}
	if r, err := s.Request(ctx, "prj_1", "req_empty"); err != nil || r.Body == nil || len(r.Body) != 0 || r.Headers == nil {
		t.Errorf("empty request after migration: %+v, %v", r, err)
	}
	// The search triggers of the rebuilt tables are back.
	var triggers int
	s.rdb.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'trigger'
		AND name IN ('messages_search_delete', 'requests_search_delete')`).Scan(&triggers)
	if triggers != 2 {
		t.Errorf("%d of the 2 search triggers after the rebuild", triggers)
	}
}

// rawMessage is the raw message TestMigratePackedContent stores.
const rawMessage = "Subject: s\r\n\r\nbody \xff\r\n"

// A database at a schema version past what this build knows was written by
// a newer capture: opening it is refused, with a way out, and leaves it as
// it was.
func TestNewerSchemaRefused(t *testing.T) {
	where := newDatabase(t)
	s, err := Open(t.Context(), where)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.write(t.Context(), func(w *wtx) error {
		_, err := w.exec(`UPDATE schema_version SET version = 9999`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for range 2 {
		s, err := Open(t.Context(), where)
		if err == nil {
			s.Close()
			t.Fatal("a database of schema version 9999 was opened")
		}
		if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), "version 9999") || !strings.Contains(err.Error(), "upgrade capture") {
			t.Errorf("error %q, want ErrSchemaTooNew naming the version and the way out", err)
		}
	}
}

// Databases written by the builds that numbered three migrations
// differently (testdata/legacy, each written by such a build and stopped
// cleanly): one at version 7 without codes or settings, one at version 8
// without search. Opening them runs what they lack, and every capture
// they hold is read, searched and joined by new ones.
func TestMigrateDatabasesOfEarlierNumbering(t *testing.T) {
	sqliteOnly(t, "SQLite's upgrade path from older schemas; a PostgreSQL database starts at today's")
	for _, name := range []string{"v7-before-codes.db", "v8-before-search.db"} {
		t.Run(name, func(t *testing.T) {
			old, err := os.ReadFile(filepath.Join("testdata", "legacy", name))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), DBFile)
			if err := os.WriteFile(path, old, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := OpenSQLite(t.Context(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := t.Context()
			var inboxID, endpointID string
			s.rdb.QueryRow(`SELECT inbox_id FROM messages WHERE subject LIKE 'Your verification code%'`).Scan(&inboxID)
			s.rdb.QueryRow(`SELECT endpoint_id FROM requests LIMIT 1`).Scan(&endpointID)
			if inboxID == "" || endpointID == "" {
				t.Fatalf("fixture without its captures: inbox %q endpoint %q", inboxID, endpointID)
			}
			// Old captures are found by search; new ones are stored and
			// found too.
			if l, err := s.Messages(ctx, inboxID, MessageFilter{Q: "zebraquux"}, Page{Limit: 10}); err != nil || len(l.Items) != 1 {
				t.Errorf("search of an old message: %v, %v", l.Items, err)
			}
			if _, err := s.InsertMessage(ctx, &NewMessage{InboxID: inboxID, EnvelopeFrom: "a@x", Subject: "fresh quokkaword",
				Raw: []byte("Subject: fresh quokkaword\r\n\r\nhi\r\n")}); err != nil {
				t.Fatalf("a new message: %v", err)
			}
			if _, err := s.InsertRequest(ctx, &NewRequest{EndpointID: endpointID, Method: "POST", Path: "/fresh-wombatword",
				Body: []byte("{}")}); err != nil {
				t.Fatalf("a new request: %v", err)
			}
			if l, err := s.Messages(ctx, inboxID, MessageFilter{Q: "quokkaword"}, Page{Limit: 10}); err != nil || len(l.Items) != 1 {
				t.Errorf("search of a new message: %v, %v", l.Items, err)
			}
			if l, err := s.Requests(ctx, endpointID, RequestFilter{Q: "wombatword"}, Page{Limit: 10}); err != nil || len(l.Items) != 1 {
				t.Errorf("search of a new request: %v, %v", l.Items, err)
			}
			var projectID, messageID string
			s.rdb.QueryRow(`SELECT project_id FROM inboxes WHERE id = ?`, inboxID).Scan(&projectID)
			s.rdb.QueryRow(`SELECT id FROM messages WHERE subject LIKE 'Your verification code%'`).Scan(&messageID)
			if m, err := s.Message(ctx, projectID, messageID); err != nil || !strings.Contains(m.Subject, "483921") {
				t.Errorf("an old message: %+v, %v", m, err)
			}
			for _, table := range []string{"settings", "settings_version", "search_terms"} {
				if _, err := s.rdb.Exec(`SELECT count(*) FROM ` + table); err != nil {
					t.Errorf("table %s: %v", table, err)
				}
			}
			var version int
			s.rdb.QueryRow(`SELECT version FROM schema_version`).Scan(&version)
			if version != 10 {
				t.Errorf("schema version %d after the migration, want 10", version)
			}
		})
	}
}

// A PostgreSQL database written before packs (version 1 without the
// content columns) is refused with what to do, not opened to fail every
// capture.
func TestPostgresRefusesTheSchemaBeforePacks(t *testing.T) {
	if !pgtest.Requested() {
		t.Skip("PostgreSQL only: the SQLite path is TestMigrateDatabasesOfEarlierNumbering")
	}
	url := pgDatabase(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`ALTER TABLE requests DROP COLUMN content`); err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.Context(), url)
	if err == nil {
		s.Close()
		t.Fatal("opened a database without packed content")
	}
	if !strings.Contains(err.Error(), "point capture at a new database") {
		t.Errorf("refusal: %v", err)
	}
}
