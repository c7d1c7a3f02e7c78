package store

import (
	"bufio"
	"database/sql"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/capturedev/capture/store/pgtest"
)

// schemaDump lists what the schema holds, table by table and object by
// object, with schema_version's rows: two databases whose migrations ran
// once each dump alike.
func schemaDump(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := queryLines(t, db, `SELECT type || ' ' || name || ': ' || coalesce(sql, '') FROM sqlite_schema ORDER BY type, name`)
	out = append(out, queryLines(t, db, `SELECT 'schema_version row ' || version FROM schema_version`)...)
	return strings.Join(out, "\n")
}

// wantSchema is the schema one lone Open leaves on a copy of the database
// at from ("" for a new one).
func wantSchema(t *testing.T, from string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), DBFile)
	copyDatabase(t, from, path)
	s, err := OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	return schemaDump(t, path)
}

// copyDatabase puts the fixture at from (none when "") at path.
func copyDatabase(t *testing.T, from, path string) {
	t.Helper()
	if from == "" {
		return
	}
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// concurrentFixtures are the databases opened at once: a new one, and the
// ones of the earlier numbering, whose repair reruns migrations below the
// version they record.
var concurrentFixtures = map[string]string{
	"new":                 "",
	"v7-before-codes.db":  filepath.Join("testdata", "legacy", "v7-before-codes.db"),
	"v8-before-search.db": filepath.Join("testdata", "legacy", "v8-before-search.db"),
}

// Stores opened on one database at the same moment (serves started
// together, an admin command beside a starting serve) all open, and the
// migrations run once: the schema is what one lone Open leaves.
func TestOpenTogetherMigratesOnce(t *testing.T) {
	sqliteOnly(t, "PostgreSQL's is TestPostgresReplicasMigrateOnce")
	const openers = 6
	for name, from := range concurrentFixtures {
		t.Run(name, func(t *testing.T) {
			want := wantSchema(t, from)
			for round := range 3 {
				path := filepath.Join(t.TempDir(), DBFile)
				copyDatabase(t, from, path)
				errs := openTogether(openers, func() (*Store, error) { return OpenSQLite(t.Context(), path) })
				for i, err := range errs {
					if err != nil {
						t.Errorf("round %d, opener %d: %v", round, i, err)
					}
				}
				if got := schemaDump(t, path); got != want {
					t.Fatalf("round %d: schema after opening together:\n%s\n\nwant, as one Open leaves it:\n%s", round, got, want)
				}
			}
		})
	}
}

// envOpenPath makes the test binary a process that opens the database it
// names (see TestOpenHelperProcess).
const envOpenPath = "CAPTURE_TEST_OPEN_PATH"

// TestOpenHelperProcess is not a test: run by TestProcessesOpenTogether
// with envOpenPath set, it says "ready", waits for its stdin to close, so
// that every process opens at the same moment, opens the database and
// prints the error, if any.
func TestOpenHelperProcess(t *testing.T) {
	path := os.Getenv(envOpenPath)
	if path == "" {
		t.Skip("a process of TestProcessesOpenTogether")
	}
	os.Stdout.WriteString("ready\n")
	io.Copy(io.Discard, os.Stdin)
	s, err := OpenSQLite(t.Context(), path)
	if err == nil {
		err = s.Close()
	}
	if err != nil {
		os.Stdout.WriteString("error: " + err.Error() + "\n")
		os.Exit(1)
	}
}

// Processes opening one database at once, as two serves or an admin
// command beside a starting serve do, all open it and migrate it once.
func TestProcessesOpenTogether(t *testing.T) {
	sqliteOnly(t, "PostgreSQL's is TestPostgresReplicasMigrateOnce")
	const processes = 4
	for name, from := range concurrentFixtures {
		t.Run(name, func(t *testing.T) {
			want := wantSchema(t, from)
			path := filepath.Join(t.TempDir(), DBFile)
			copyDatabase(t, from, path)
			type proc struct {
				cmd   *exec.Cmd
				stdin io.WriteCloser
				out   *bufio.Reader
			}
			var procs []proc
			for range processes {
				cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestOpenHelperProcess$", "-test.count=1")
				cmd.Env = append(os.Environ(), envOpenPath+"="+path)
				cmd.Stderr = os.Stderr
				stdin, err := cmd.StdinPipe()
				if err != nil {
					t.Fatal(err)
				}
				stdout, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				p := proc{cmd, stdin, bufio.NewReader(stdout)}
				procs = append(procs, p)
				t.Cleanup(func() { p.stdin.Close(); p.cmd.Wait() })
			}
			for i, p := range procs {
				if line, err := p.out.ReadString('\n'); line != "ready\n" {
					t.Fatalf("process %d before opening: %q, %v", i, line, err)
				}
			}
			for _, p := range procs {
				p.stdin.Close()
			}
			for i, p := range procs {
				out, _ := io.ReadAll(p.out)
				if err := p.cmd.Wait(); err != nil {
					t.Errorf("process %d: %v: %s", i, err, out)
				}
			}
			if got := schemaDump(t, path); got != want {
				t.Fatalf("schema after opening together:\n%s\n\nwant, as one Open leaves it:\n%s", got, want)
			}
		})
	}
}

// pgSchemaDump lists the columns and indexes of the database at url, with
// schema_version's rows.
func pgSchemaDump(t *testing.T, url string) string {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return strings.Join(queryLines(t, db, `SELECT table_name || '.' || column_name || ' ' || data_type FROM information_schema.columns
		WHERE table_schema = current_schema()
		UNION ALL SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema()
		UNION ALL SELECT 'schema_version row ' || version FROM schema_version
		ORDER BY 1`), "\n")
}

// Replicas started together on a new PostgreSQL database (SPEC §19) all
// open it, and the migrations run once.
func TestPostgresReplicasMigrateOnce(t *testing.T) {
	if !pgtest.Requested() {
		t.Skip("PostgreSQL only: SQLite's is TestOpenTogetherMigratesOnce")
	}
	alone := pgtest.Database(t, "", nil)
	s, err := OpenPostgres(t.Context(), alone)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	want := pgSchemaDump(t, alone)

	const replicas = 6
	url := pgtest.Database(t, "", nil)
	errs := openTogether(replicas, func() (*Store, error) { return OpenPostgres(t.Context(), url) })
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
	if got := pgSchemaDump(t, url); got != want {
		t.Fatalf("schema after opening together:\n%s\n\nwant, as one Open leaves it:\n%s", got, want)
	}
}

// openTogether opens and closes the store n times at once, released
// together, and returns what each open (or its close) gave.
func openTogether(n int, open func() (*Store, error)) []error {
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			s, err := open()
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// queryLines runs q, whose rows are one text column each, and returns them.
func queryLines(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		out = append(out, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
