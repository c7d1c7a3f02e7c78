package store

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/capturedev/capture/store/pgtest"
)

// ioError is a real SQLITE_IOERR: a database "file" that is a directory
// opens read-only and fails its first read.
func ioError(t *testing.T) error {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+t.TempDir()+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Exec(`SELECT count(*) FROM sqlite_schema`)
	if err == nil {
		t.Fatal("reading a directory as a database worked")
	}
	return err
}

// corruptError is a real SQLITE_CORRUPT: a table whose root page was
// overwritten.
func corruptError(t *testing.T) error {
	t.Helper()
	path := filepath.Join(t.TempDir(), "damaged.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE x (a TEXT); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500) INSERT INTO x SELECT hex(randomblob(100)) FROM n`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 4096)
	for i := range junk {
		junk[i] = 0x5a
	}
	_, err = f.WriteAt(junk, 4096) // page 2, the table's root
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	db, err = sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM x`).Scan(&n); err == nil {
		t.Fatal("a damaged table was read")
	} else {
		return err
	}
	return nil
}

// An I/O error is the database unavailable (503 with Retry-After), saying
// the disk could not be read or written; so is a damaged page SQLite reads
// after one, until a commit shows that the disk works again. Before any
// I/O error, and after that commit, a damaged database is an error of its
// own.
func TestDiskIOErrorIsUnavailable(t *testing.T) {
	if pgtest.Requested() {
		t.Skip("SQLite's errors")
	}
	s := newStore(t)
	damaged := corruptError(t)
	if IsUnavailable(damaged) {
		t.Fatalf("a damaged database with a working disk is unavailable: %v", damaged)
	}
	ioErr := ioError(t)
	if !IsUnavailable(ioErr) || Why(ioErr) != "the disk could not be read or written" {
		t.Fatalf("I/O error %v: unavailable %v, why %q", ioErr, IsUnavailable(ioErr), Why(ioErr))
	}
	if err := s.unavailable(ioErr); !errors.Is(err, ErrUnavailable) || Why(err) != "the disk could not be read or written" {
		t.Fatalf("a write's I/O error = %v, why %q", err, Why(err))
	}
	damaged = corruptError(t)
	if !IsUnavailable(damaged) || Why(damaged) != "the disk could not be read or written" {
		t.Fatalf("damaged after an I/O error %v: unavailable %v, why %q", damaged, IsUnavailable(damaged), Why(damaged))
	}
	if err := s.unavailable(damaged); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a write's damaged page after an I/O error = %v, want unavailable", err)
	}
	// A commit goes through: the disk works.
	mustProject(t, s, "works", "team")
	if damaged := corruptError(t); IsUnavailable(damaged) {
		t.Fatalf("a damaged database once commits work again is unavailable: %v", damaged)
	}
}
