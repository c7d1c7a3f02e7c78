// Package storetest opens stores for tests on the backend they run on:
// SQLite in a temporary directory, or with CAPTURE_TEST_DATABASE=postgres
// a database of their own on the package's PostgreSQL test server (the
// package's TestMain runs pgtest.Run). One suite, two backends.
package storetest

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/pgtest"
)

// Database names a fresh, empty database on the backend the tests run
// on: the data dir's SQLite file in a temporary directory, or with
// CAPTURE_TEST_DATABASE=postgres a database of its own on the package's
// PostgreSQL test server (the package's TestMain runs pgtest.Run).
func Database(t testing.TB) string {
	t.Helper()
	if pgtest.Requested() {
		return PostgresDatabase(t)
	}
	return filepath.Join(t.TempDir(), store.DBFile)
}

// PostgresDatabase is a fresh database at today's schema on the
// package's PostgreSQL test server, whichever backend the tests run on.
func PostgresDatabase(t testing.TB) string {
	t.Helper()
	return pgtest.Database(t, "store", func(ctx context.Context, url string) error {
		st, err := store.OpenPostgres(ctx, url)
		if err != nil {
			return err
		}
		return st.Close()
	})
}

// EmptyPostgresDatabase is a fresh database without even capture's schema,
// on the package's PostgreSQL test server.
func EmptyPostgresDatabase(t testing.TB) string {
	t.Helper()
	return pgtest.Database(t, "", nil)
}

// Store opens a fresh, empty store on the backend the tests run on (see
// Database). It closes when the test ends.
func Store(t testing.TB) *store.Store {
	t.Helper()
	where := Database(t)
	st, err := store.Open(context.Background(), where)
	if err != nil {
		t.Fatal(err)
	}
	opened.Store(st, where)
	t.Cleanup(func() {
		st.Close()
		opened.Delete(st)
	})
	return st
}

// opened maps the stores Store opened to their databases.
var opened sync.Map

// OpenAgain opens a second store on the database of st (from Store or
// Open), as another process would: an admin command, another replica.
func OpenAgain(t testing.TB, st *store.Store) *store.Store {
	t.Helper()
	where, ok := opened.Load(st)
	if !ok {
		t.Fatal("OpenAgain: the store was not opened by servertest")
	}
	other, err := store.Open(context.Background(), where.(string))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	return other
}
