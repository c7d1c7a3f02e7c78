// Package pgtest runs a throwaway PostgreSQL server for a package's tests:
// initdb in a temporary directory (as an unprivileged user when the tests
// run as root, which initdb refuses), a free loopback port, and a fresh
// database per test copied from a template, torn down when the tests end.
//
// The server starts at the first test that asks for a database and is
// shared by the package's tests; Run stops it. Where no PostgreSQL server
// binaries exist, tests that need one skip with a message saying so, or
// fail when CI is set: there, a skip would hide a missing install step.
package pgtest

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// EnvBackend is the variable that runs a package's store-backed tests on
// PostgreSQL: CAPTURE_TEST_DATABASE=postgres.
const EnvBackend = "CAPTURE_TEST_DATABASE"

// Requested says whether the tests were asked to run on PostgreSQL.
func Requested() bool { return os.Getenv(EnvBackend) == "postgres" }

// Run runs the package's tests and stops the server if one was started:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }
func Run(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	if running != nil {
		running.stop()
	}
	return code
}

var (
	mu       sync.Mutex
	running  *server
	startErr error
	started  bool
	// templates are the template databases made so far, by name.
	templates = map[string]bool{}
	dbCount   atomic.Int64
)

type server struct {
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// URL returns the URL of database name on the test server.
func (s *server) url(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, name)
}

// Database returns the URL of a new, empty database of its own. When
// prepare is given, the database is a copy of a template that prepare set
// up once (all tests of the package that name the same template share
// it), which costs far less than preparing every database anew.
func Database(t testing.TB, template string, prepare func(ctx context.Context, url string) error) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	s := need(t)
	ctx := context.Background()
	admin, err := sql.Open("pgx", s.url("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	from := "template0"
	if prepare != nil {
		from = "tmpl_" + template
		if !templates[from] {
			if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+from+` TEMPLATE template0`); err != nil {
				t.Fatal(err)
			}
			if err := prepare(ctx, s.url(from)); err != nil {
				t.Fatalf("prepare template %s: %v", template, err)
			}
			// Nothing may stay connected to a template while it is copied.
			if _, err := admin.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE datname = $1 AND pid <> pg_backend_pid()`, from); err != nil {
				t.Fatal(err)
			}
			templates[from] = true
		}
	}
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbCount.Add(1))
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+name+` TEMPLATE `+from+` STRATEGY FILE_COPY`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if admin, err := sql.Open("pgx", s.url("postgres")); err == nil {
			admin.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`)
			admin.Close()
		}
	})
	return s.url(name)
}

// need returns the running server, starting it on first use; without
// binaries the test skips (fails under CI).
func need(t testing.TB) *server {
	t.Helper()
	if !started {
		started = true
		running, startErr = start()
	}
	if startErr != nil {
		if errors.Is(startErr, errNoBinaries) && os.Getenv("CI") == "" {
			t.Skipf("PostgreSQL tests skipped: %v (install the postgresql package; CI fails instead)", startErr)
		}
		t.Fatalf("PostgreSQL test server: %v", startErr)
	}
	return running
}

var errNoBinaries = errors.New("no PostgreSQL server binaries (initdb, postgres) on PATH or in /usr/lib/postgresql/*/bin")

// binDir finds initdb and postgres: on PATH, else Debian's versioned
// directory, newest first.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errNoBinaries
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func start() (*server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "capture-pgtest-")
	if err != nil {
		return nil, err
	}
	cred, err := unprivileged(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	// A port taken between asking and binding makes postgres fail to
	// start: then another one is tried.
	for range 5 {
		port, err := freePort()
		if err != nil {
			break
		}
		s, err := launch(bin, dir, data, port, cred)
		if err == nil {
			return s, nil
		}
		if !strings.Contains(err.Error(), "could not bind") && !strings.Contains(err.Error(), "in use") {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	os.RemoveAll(dir)
	return nil, errors.New("no free port for PostgreSQL")
}

// launch starts postgres and returns once it accepts connections, as its
// log says.
func launch(bin, dir, data string, port int, cred *syscall.Credential) (*server, error) {
	// Tests want speed, not crash safety of the test server itself: the
	// replicas' durability rests on commits being acknowledged after
	// synchronous_commit, which stays on.
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data,
		"-c", "listen_addresses=127.0.0.1", "-c", "port="+strconv.Itoa(port), "-c", "unix_socket_directories=",
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=400",
		"-c", "shared_buffers=64MB", "-c", "logging_collector=off")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{dir: dir, port: port, cmd: cmd, done: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var log []string
		announced := false
		for sc.Scan() {
			line := sc.Text()
			if !announced {
				log = append(log, line)
				if strings.Contains(line, "ready to accept connections") {
					announced = true
					ready <- nil
				}
			}
		}
		if !announced {
			ready <- fmt.Errorf("postgres exited: %s", strings.Join(log, "\n"))
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(s.done)
	}()
	select {
	case err := <-ready:
		if err != nil {
			return nil, err
		}
	case <-time.After(30 * time.Second):
		s.stop()
		return nil, errors.New("postgres did not start within 30s")
	}
	return s, nil
}

func (s *server) stop() {
	// SIGQUIT: immediate shutdown; the data is thrown away anyway.
	s.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
	os.RemoveAll(s.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// unprivileged is who runs initdb and postgres: nobody when the tests run
// as root (both refuse root), else the current user. dir is handed over.
func unprivileged(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("running as root and no user nobody to run PostgreSQL as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// Own is a PostgreSQL server a test has to itself, which it may freeze as
// a hung server or a network partition leaves it: every process of that
// server stopped, its connections open and unanswered.
type Own struct {
	// URL is the server's postgres database.
	URL string
	s   *server
}

// Private starts a server for t alone, stopped when t ends: freezing the
// package's shared server would stall every other test.
func Private(t testing.TB) *Own {
	t.Helper()
	if _, err := binDir(); errors.Is(err, errNoBinaries) && os.Getenv("CI") == "" {
		t.Skipf("PostgreSQL tests skipped: %v (install the postgresql package; CI fails instead)", err)
	}
	s, err := start()
	if err != nil {
		t.Fatalf("PostgreSQL test server: %v", err)
	}
	t.Cleanup(s.stop)
	return &Own{URL: s.url("postgres"), s: s}
}

// Freeze stops every process of the server, until Thaw or the end of the
// test: the postmaster first, so that it forks no more, then each process
// it forked (each is the leader of a process group of its own, so no
// signal to a group reaches them all). Only this server's processes.
func (o *Own) Freeze(t testing.TB) {
	t.Helper()
	t.Cleanup(func() { o.signal(syscall.SIGCONT) })
	if err := o.signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("freeze PostgreSQL: %v", err)
	}
}

// Thaw lets the server's processes run again.
func (o *Own) Thaw(t testing.TB) {
	t.Helper()
	if err := o.signal(syscall.SIGCONT); err != nil {
		t.Fatalf("thaw PostgreSQL: %v", err)
	}
}

// signal sends sig to the postmaster and then to each of its children. A
// test binary killed while the server is frozen (its -timeout) leaves the
// children stopped: the postmaster dies with the binary, they cannot
// notice. Their data dir names them (capture-pgtest-*).
func (o *Own) signal(sig syscall.Signal) error {
	pm := o.s.cmd.Process.Pid
	if err := syscall.Kill(pm, sig); err != nil {
		return err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		i := strings.LastIndex(string(stat), ") ")
		if i < 0 {
			continue
		}
		if fields := strings.Fields(string(stat[i+2:])); len(fields) < 2 || fields[1] != strconv.Itoa(pm) {
			continue
		}
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
	}
	return nil
}
