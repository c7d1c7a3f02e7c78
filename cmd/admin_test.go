package cmd

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/datadir"
)

// Without --name a new inbox or endpoint takes the first free name of
// default, default-2, …: a second "default" would pass for the bootstrap
// one, which `capture wait` watches when --inbox or --endpoint is not given.
func TestCreateWithoutNameTakesAFreeName(t *testing.T) {
	dir := withDatabase(t, t.TempDir())
	d := "--data-dir=" + dir
	create := func(kind string, flags ...string) string {
		t.Helper()
		r := capture(t, append([]string{kind, "create", "--json", d}, flags...)...)
		var created struct{ Name string }
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &created) != nil {
			t.Fatalf("%s create %v: %+v", kind, flags, r)
		}
		return created.Name
	}
	for _, kind := range []string{"inbox", "endpoint"} {
		for _, want := range []string{"default-2", "default-3"} {
			if got := create(kind); got != want {
				t.Errorf("%s create: named %q, want %q", kind, got, want)
			}
		}
		// A name given is taken as it is; the next free one skips it.
		if got := create(kind, "--name", "default-4"); got != "default-4" {
			t.Errorf("%s create --name default-4: named %q", kind, got)
		}
		if got := create(kind); got != "default-5" {
			t.Errorf("%s create after default-4: named %q, want default-5", kind, got)
		}
		if r := capture(t, "project", "create", "other-"+kind, d); r.code != 0 {
			t.Fatalf("project create: %+v", r)
		}
		if got := create(kind, "--project", "other-"+kind); got != "default" {
			t.Errorf("%s create in a project without one: named %q, want default", kind, got)
		}
	}
}

// A value the store refuses (a name too long or empty) is a usage error,
// as a bad flag is: one line pointing to --help, exit 2, nothing made.
func TestRefusedValuesAreUsageErrors(t *testing.T) {
	dir := withDatabase(t, t.TempDir())
	d := "--data-dir=" + dir
	for _, args := range [][]string{
		{"inbox", "create", "--name", "", d},
		{"inbox", "create", "--name", strings.Repeat("a", 300), d},
		{"endpoint", "create", "--name", "", d},
		{"project", "create", "", d},
	} {
		r := capture(t, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "invalid: ") || !strings.HasSuffix(strings.TrimSpace(r.stderr), "--help')") ||
			strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%q: exit %d, stderr %q, want exit 2 and one line pointing to --help", args[:3], r.code, r.stderr)
		}
	}
	r := capture(t, "inbox", "list", "--json", d)
	if r.code != 0 || strings.Count(r.stdout, `"name"`) != 1 {
		t.Errorf("inboxes after the refusals: %+v", r)
	}
}

// A PostgreSQL server that cannot be reached is one line on stderr, as
// every error is (pgx lists each connection attempt on a line of its own),
// without the URL's password.
func TestUnreachablePostgresIsOneLine(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	url := "postgres://bob:s3cretpw@" + addr + "/capture"
	for _, args := range [][]string{
		{"inbox", "list"},
		{"serve", "--data-dir", t.TempDir(), "--http", "127.0.0.1:0", "--capture", "127.0.0.1:0",
			"--smtp-starttls", "127.0.0.1:0", "--smtp-tls", "127.0.0.1:0", "--email-api", "127.0.0.1:0"},
	} {
		r := capture(t, append(args, "--database", url)...)
		if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "capture: ") ||
			!strings.Contains(r.stderr, addr) || !strings.Contains(r.stderr, "connection refused") ||
			strings.Contains(r.stderr, "s3cretpw") {
			t.Errorf("%s: exit %d, stderr %q", args[0], r.code, r.stderr)
		}
	}
}

// A database file its user may read but not write: one line naming the
// file and why, and nothing changed.
func TestReadOnlyDatabaseIsNamed(t *testing.T) {
	home, run := asNobody(t)
	dir := withDatabase(t, filepath.Join(home, "data"))
	db := filepath.Join(dir, store.DBFile)
	err := filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, 65534, 65534)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(db, 0o400); err != nil {
		t.Fatal(err)
	}
	want := "capture: the database " + db + " is read-only: this user cannot write it (permission denied); nothing changed\n"
	for _, args := range [][]string{
		{"inbox", "create", "--name", "refused"},
		{"serve", "--http", "127.0.0.1:0", "--capture", "127.0.0.1:0",
			"--smtp-starttls", "127.0.0.1:0", "--smtp-tls", "127.0.0.1:0", "--email-api", "127.0.0.1:0"},
	} {
		cmd := run(append(args, "--data-dir", dir)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		if err == nil || !strings.HasSuffix(stderr.String(), want) || strings.Count(stderr.String(), "capture: ") != 1 {
			t.Errorf("%s on a read-only database: %v, stderr %q", args[0], err, stderr.String())
		}
	}
	// Nothing was left behind: making the named file writable is all the
	// fix the message asks for.
	if err := os.Chmod(db, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run("inbox", "create", "--name", "accepted", "--data-dir", dir).CombinedOutput(); err != nil {
		t.Errorf("after chmod 600 %s: %v %s", db, err, out)
	}
	if r := capture(t, "inbox", "list", "--data-dir", dir); r.code != 0 || strings.Contains(r.stdout, "refused") || !strings.Contains(r.stdout, "accepted") {
		t.Errorf("after the refused write: %+v", r)
	}
}

// Root may write any file, so a database made read-only by its mode is
// refused on the mode, before SQLite creates its -wal and -shm files.
func TestReadOnlyModeRefusedBeforeSQLiteOpens(t *testing.T) {
	dir := withDatabase(t, filepath.Join(t.TempDir(), "data"))
	db := filepath.Join(dir, store.DBFile)
	if err := os.Chmod(db, 0o400); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"inbox", "create", "--name", "refused"},
		{"serve", "--http", "127.0.0.1:0", "--capture", "127.0.0.1:0",
			"--smtp-starttls", "127.0.0.1:0", "--smtp-tls", "127.0.0.1:0", "--email-api", "127.0.0.1:0"},
	} {
		// Bounded: without the check, root's serve would start and run.
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		cmd := exec.CommandContext(ctx, binary, append(args, "--data-dir", dir)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		cmd.Run()
		cancel()
		r := result{code: cmd.ProcessState.ExitCode(), stderr: stderr.String()}
		if os.Geteuid() == 0 {
			want := "capture: the database " + db + " is read-only: its mode 0400 lets not even its owner write it (chmod u+w makes it writable); nothing changed\n"
			if r.code != 1 || r.stderr != want {
				t.Errorf("%s as root on a database of mode 0400: %+v", args[0], r)
			}
		} else if r.code != 1 || !strings.Contains(r.stderr, "this user cannot write it (permission denied); nothing changed") {
			t.Errorf("%s on a database of mode 0400: %+v", args[0], r)
		}
		for _, side := range []string{db + "-wal", db + "-shm"} {
			if _, err := os.Stat(side); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s on a read-only database left %s behind: %v", args[0], filepath.Base(side), err)
			}
		}
	}
	if err := os.Chmod(db, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := capture(t, "inbox", "create", "--name", "accepted", "--data-dir", dir); r.code != 0 {
		t.Errorf("after chmod 600: %+v", r)
	}
}

// A damaged database file: one line naming it and what to do, for the
// admin commands and for serve alike.
func TestDamagedDatabaseIsNamed(t *testing.T) {
	dir := withDatabase(t, filepath.Join(t.TempDir(), "data"))
	db := filepath.Join(dir, store.DBFile)
	f, err := os.OpenFile(db, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	info, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	// Every page but the first (the schema) overwritten.
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xab}, int(info.Size())-4096), 4096); err != nil {
		t.Fatal(err)
	}
	f.Close()
	want := "capture: the database " + db + " is damaged: SQLite finds it malformed; nothing changed. " +
		"Restore it from a backup, or move the data dir aside to start afresh\n"
	for _, args := range [][]string{
		{"inbox", "list"},
		{"serve", "--http", "127.0.0.1:0", "--capture", "127.0.0.1:0",
			"--smtp-starttls", "127.0.0.1:0", "--smtp-tls", "127.0.0.1:0", "--email-api", "127.0.0.1:0"},
	} {
		r := capture(t, append(args, "--data-dir", dir)...)
		if r.code != 1 || !strings.HasSuffix(r.stderr, want) || strings.Count(r.stderr, "capture: ") != 1 {
			t.Errorf("%s on a damaged database: exit %d, stderr %q", args[0], r.code, r.stderr)
		}
	}
}

// A secret just created that cannot be printed is not lost in silence:
// the error says what was created and how to revoke it or read it again.
func TestCreatedSecretThatCannotBePrinted(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full to fail writes with:", err)
	}
	defer full.Close()
	dir := withDatabase(t, t.TempDir())
	// The free plan holds one key, the bootstrap's.
	if r := capture(t, "project", "set-plan", "default", "team", "--data-dir", dir); r.code != 0 {
		t.Fatal(r)
	}
	for _, tt := range []struct {
		args []string
		want *regexp.Regexp
	}{
		{[]string{"key", "create", "--json"}, regexp.MustCompile("^capture: created key (key_\\w+) in project default, but could not print it \\(write /dev/stdout: no space left on device\\): `capture key revoke (key_\\w+)` revokes it; then create another\n$")},
		{[]string{"key", "create"}, regexp.MustCompile("^capture: created key (key_\\w+) in project default, but could not print it .*`capture key revoke (key_\\w+)` revokes it")},
		{[]string{"inbox", "create", "--json"}, regexp.MustCompile("^capture: created inbox default-2 \\((inb_\\w+)\\), but could not print it \\(write /dev/stdout: no space left on device\\): `capture inbox password (inb_\\w+)` prints its SMTP password\n$")},
		{[]string{"inbox", "create"}, regexp.MustCompile("^capture: created inbox default-3 \\((inb_\\w+)\\), but could not print it .*`capture inbox password (inb_\\w+)`")},
	} {
		cmd := exec.CommandContext(t.Context(), binary, append(tt.args, "--data-dir", dir)...)
		var stderr strings.Builder
		cmd.Stdout, cmd.Stderr = full, &stderr
		err := cmd.Run()
		m := tt.want.FindStringSubmatch(stderr.String())
		if cmd.ProcessState.ExitCode() != 1 || m == nil || m[1] != m[2] {
			t.Errorf("%v to /dev/full: %v, stderr %q", tt.args, err, stderr.String())
			continue
		}
		// The id named is the one created.
		if r := capture(t, tt.args[0], "list", "--data-dir", dir); !strings.Contains(r.stdout, m[1]) {
			t.Errorf("%s list misses %s: %+v", tt.args[0], m[1], r)
		}
	}
}

// The warning that a data dir was open to others is one line in the
// style of the command's other messages, not a log record.
func TestOpenDataDirWarningIsOneLine(t *testing.T) {
	dir := withDatabase(t, filepath.Join(t.TempDir(), "data"))
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := capture(t, "project", "list", "--data-dir", dir)
	if want := "capture: data dir " + dir + " was open to other users (mode 0755); tightened to 0700\n"; r.code != 0 || r.stderr != want {
		t.Errorf("project list on a 0755 data dir: %+v, want stderr %q", r, want)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir after: %v %v", fi.Mode(), err)
	}
}

// A name with spaces around it would pass for another in every list: it is
// refused, as the web interface and the read API refuse it (one store rule).
func TestNamesWithSurroundingSpacesAreRefused(t *testing.T) {
	dir := withDatabase(t, t.TempDir())
	for _, args := range [][]string{
		{"project", "create", "staging "},
		{"project", "create", " staging"},
		{"inbox", "create", "--name", "signup "},
		{"endpoint", "create", "--name", "\tstripe"},
	} {
		r := capture(t, append(args, "--data-dir", dir)...)
		if r.code != 2 || !strings.Contains(r.stderr, "must not begin or end with spaces") {
			t.Errorf("%v: %+v", args, r)
		}
	}
	if r := capture(t, "project", "list", "--data-dir", dir); strings.Contains(r.stdout, "staging") {
		t.Errorf("a refused project was created: %+v", r)
	}
}

// On the largest plan there is no larger one to suggest; what can be done
// first is still said.
func TestOverQuotaOnTheLargestPlan(t *testing.T) {
	refused := fmt.Errorf("%w: the team plan allows 50 active API keys", store.ErrQuotaExceeded)
	team := store.Project{ID: "proj_x", Plan: store.Plan{Name: "team"}}
	if got := overQuota(refused, team, "revoke one first, or ").Error(); got != "quota_exceeded: the team plan allows 50 active API keys; revoke one first" {
		t.Errorf("keys on team: %q", got)
	}
	if got := overQuota(refused, team, ""); got != refused {
		t.Errorf("inboxes on team: %v", got)
	}
	pro := store.Project{ID: "proj_x", Plan: store.Plan{Name: "pro"}}
	if got := overQuota(refused, pro, "").Error(); !strings.HasSuffix(got, "; move the project to a larger plan (`capture project set-plan proj_x team`)") {
		t.Errorf("on pro: %q", got)
	}
}

// An administration command of a newer build does not upgrade a database
// an older build's serve is using: what that serve stores next would keep
// the old shape. It says what to do instead, and changes nothing.
func TestAdminDoesNotUpgradeUnderAnOlderServe(t *testing.T) {
	dir := withDatabase(t, t.TempDir())
	// The older build: one migration behind, and serving the data dir.
	db, older := oneMigrationBehind(t, dir)
	release, err := datadir.Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	r := capture(t, "key", "list", "--data-dir", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "needs an upgrade, and the `capture serve` using it is an older version") {
		t.Errorf("key list beside an older serve: %+v", r)
	}
	checkSchemaLeftAt(t, db, older)
}

// Nor one a serve of a build that predates the data dir's lock is using:
// that serve takes no lock on the dir, but its connections hold SQLite's
// on the database, and the command names the process holding it.
func TestAdminDoesNotUpgradeUnderAnUnlockedServe(t *testing.T) {
	dir := withDatabase(t, t.TempDir())
	// This test's process stands in for the older serve: the database
	// open in WAL mode, no lock on the data dir.
	db, older := oneMigrationBehind(t, dir)
	r := capture(t, "key", "list", "--data-dir", dir)
	want := fmt.Sprintf("needs an upgrade, and another process (pid %d) has capture.db open", os.Getpid())
	if r.code != 1 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "start this version's `capture serve`") {
		t.Errorf("key list beside an unlocked older serve: %+v", r)
	}
	checkSchemaLeftAt(t, db, older)
}

// oneMigrationBehind opens dir's database, left open until the test ends,
// and sets it back one migration, as an older build left it; it returns
// that version.
func oneMigrationBehind(t *testing.T, dir string) (*sql.DB, int) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, store.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var current int
	if err := db.QueryRow(`SELECT version FROM schema_version`).Scan(&current); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE schema_version SET version = ?`, current-1); err != nil {
		t.Fatal(err)
	}
	return db, current - 1
}

func checkSchemaLeftAt(t *testing.T, db *sql.DB, want int) {
	t.Helper()
	var after int
	if err := db.QueryRow(`SELECT version FROM schema_version`).Scan(&after); err != nil || after != want {
		t.Errorf("schema version %d (%v), want it left at %d", after, err, want)
	}
}
