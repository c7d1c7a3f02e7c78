package cmd

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capturedev/capture/store/storetest"
)

// The administration commands run on a PostgreSQL --database (or
// $CAPTURE_DATABASE_URL) as on the data dir, and refuse one no serve has
// set up, as they refuse a data dir without a database.
func TestAdminOnPostgres(t *testing.T) {
	empty := storetest.EmptyPostgresDatabase(t)
	if r := capture(t, "project", "list", "--database", empty); r.code != 1 || !strings.Contains(r.stderr, "no capture data") {
		t.Fatalf("an empty database: %+v", r)
	}
	if r := capture(t, "project", "list", "--database", "/tmp/capture.db"); r.code != 2 || !strings.Contains(r.stderr, "postgres://") {
		t.Fatalf("not a postgres:// URL: %+v", r)
	}

	url := storetest.PostgresDatabase(t)
	dir := t.TempDir() // not used by the commands: nothing may land in it
	r := capture(t, "project", "create", "staging", "--plan", "pro", "--json", "--database", url, "--data-dir", dir)
	var p struct{ ID, Plan string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &p) != nil || p.Plan != "pro" {
		t.Fatalf("project create: %+v", r)
	}
	t.Setenv(databaseEnv, url)
	if r := capture(t, "inbox", "create", "--project", "staging", "--name", "ci", "--data-dir", dir); r.code != 0 {
		t.Fatalf("inbox create from $%s: %+v", databaseEnv, r)
	}
	if r := capture(t, "inbox", "list", "--project", p.ID, "--data-dir", dir); r.code != 0 || !strings.Contains(r.stdout, "ci") {
		t.Fatalf("inbox list: %+v", r)
	}
	if r := capture(t, "ca", "--data-dir", dir); r.code != 1 || !strings.Contains(r.stderr, "no CA yet in the database") {
		t.Fatalf("ca before any serve: %+v", r)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the data dir got %v", entries)
	}
}

// A --database the driver cannot read is a usage error, as one of another
// scheme is, and its message does not repeat the URL (it may hold a
// password). Needs no PostgreSQL server.
func TestUnreadableDatabaseURLIsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"project", "list", "--database", "postgres://u:s3cret@%zz/db"},
		{"serve", "--database", "postgres://u:s3cret@%zz/db", "--data-dir", t.TempDir()},
	} {
		r := capture(t, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "--database: not a valid postgres:// URL") || strings.Contains(r.stderr, "s3cret") {
			t.Errorf("%s: %+v, want exit 2 naming --database without the URL", args[0], r)
		}
	}
	// So is an sslmode no client knows, which connecting would find only
	// after a failed start.
	for _, args := range [][]string{
		{"project", "list", "--database", "postgres://u:s3cret@127.0.0.1:1/db?sslmode=bogus"},
		{"serve", "--database", "postgres://u:s3cret@127.0.0.1:1/db?sslmode=bogus", "--data-dir", t.TempDir()},
	} {
		r := capture(t, args...)
		if r.code != 2 || !strings.Contains(r.stderr, `--database: sslmode "bogus": want one of disable, allow, prefer, require, verify-ca, verify-full`) || strings.Contains(r.stderr, "s3cret") {
			t.Errorf("%s with sslmode=bogus: %+v", args[0], r)
		}
	}
	// The environment's URL is named as such.
	t.Setenv("CAPTURE_DATABASE_URL", "postgres://u:s3cret@%zz/db")
	if r := capture(t, "project", "list"); r.code != 2 || !strings.Contains(r.stderr, "$CAPTURE_DATABASE_URL: not a valid postgres:// URL") {
		t.Errorf("from the environment: %+v", r)
	}
	// A well-formed URL naming a certificate file that is missing is not a
	// usage error: opening it says what is wrong.
	t.Setenv("CAPTURE_DATABASE_URL", "postgres://u:s3cret@127.0.0.1:1/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem")
	if r := capture(t, "project", "list"); r.code != 1 || !strings.Contains(r.stderr, "/nonexistent/ca.pem") || strings.Contains(r.stderr, "s3cret") {
		t.Errorf("a missing certificate file: %+v, want exit 1 naming it", r)
	}
}

// On PostgreSQL no credentials.json is written: --save would pair the
// database's key with the data dir's own serve, so it is refused before
// anything is opened or created.
func TestSaveRefusedOnPostgres(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d1")
	r := capture(t, "key", "create", "--save", "--data-dir", dir, "--database", "postgres://capture@127.0.0.1:1/capture")
	if r.code != 2 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "CAPTURE_API_KEY") {
		t.Errorf("key create --save --database: %+v", r)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("data dir created: %v", err)
	}
}

// A database or role the server does not have is said in words, with what
// to do, and the SQLSTATE last.
func TestMissingPostgresDatabaseOrRole(t *testing.T) {
	base, err := url.Parse(storetest.EmptyPostgresDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	noDB := *base
	noDB.Path = "/no_such_db"
	noRole := *base
	noRole.User = url.User("no_such_role")
	for _, tt := range []struct{ url, want string }{
		{noDB.String(), `capture: PostgreSQL at ` + base.Host + ` has no such database (database "no_such_db" does not exist): create it (createdb NAME, owned by the URL's user) or fix the database name in the URL (SQLSTATE 3D000)`},
		{noRole.String(), `capture: PostgreSQL at ` + base.Host + ` has no such role (role "no_such_role" does not exist): create it (createuser NAME) or fix the user name in the URL (SQLSTATE 28000)`},
	} {
		for _, args := range [][]string{
			{"project", "list"},
			{"serve", "--http", "127.0.0.1:0", "--capture", "127.0.0.1:0", "--smtp-starttls", "127.0.0.1:0",
				"--smtp-tls", "127.0.0.1:0", "--email-api", "127.0.0.1:0", "--data-dir", t.TempDir()},
		} {
			r := capture(t, append(args, "--database", tt.url)...)
			if r.code != 1 || !strings.HasSuffix(r.stderr, tt.want+"\n") {
				t.Errorf("%s on %s: %+v\nwant %s", args[0], tt.url, r, tt.want)
			}
		}
	}
}
