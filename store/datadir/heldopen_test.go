//go:build unix

package datadir

import (
	"bufio"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"
)

// holdEnv makes the test binary a helper that holds the SQLite database it
// names open, in WAL mode, until its stdin closes.
const holdEnv = "CAPTURE_TEST_HOLD_DATABASE"

func TestMain(m *testing.M) {
	if path := os.Getenv(holdEnv); path != "" {
		if err := holdDatabase(path); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func holdDatabase(path string) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode = WAL`).Scan(&mode); err != nil || mode != "wal" {
		return fmt.Errorf("journal mode %q: %v", mode, err)
	}
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS t (x)`); err != nil {
		return err
	}
	fmt.Println("open")
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}

// holdElsewhere has a child process hold the database at path open and
// returns it, with how to let it go.
func holdElsewhere(t *testing.T, path string) (*exec.Cmd, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+path)
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
	stop := func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("the process holding the database: %v", err)
		}
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "open\n" {
		stop()
		t.Fatalf("the process holding the database said %q, %v", line, err)
	}
	return cmd, stop
}

// HeldOpen finds another process that has a database open in WAL mode,
// though it takes no lock on the data dir, and names it; none once it has
// closed it.
func TestHeldOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "capture.db")
	if pid, held, err := HeldOpen(path); err != nil || held || pid != 0 {
		t.Fatalf("no database: %d, %v, %v", pid, held, err)
	}
	cmd, stop := holdElsewhere(t, path)
	pid, held, err := HeldOpen(path)
	if err != nil || !held || pid != cmd.Process.Pid {
		t.Errorf("held open by pid %d: %d, %v, %v", cmd.Process.Pid, pid, held, err)
	}
	stop()
	if pid, held, err := HeldOpen(path); err != nil || held {
		t.Errorf("once closed: %d, %v, %v", pid, held, err)
	}
	// The database as it is left closed, its -shm file there or not.
	f, err := os.OpenFile(path+"-shm", os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if pid, held, err := HeldOpen(path); err != nil || held {
		t.Errorf("a -shm file nobody holds: %d, %v, %v", pid, held, err)
	}
}
