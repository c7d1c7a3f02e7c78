package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/capturedev/capture/store/pgtest"
)

// The store's tests are the conformance suite of both backends: they run
// on SQLite, and with CAPTURE_TEST_DATABASE=postgres on a PostgreSQL
// server of their own. A test of what only one of them has says so and
// skips on the other.
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// newStore opens a fresh, empty store on the backend under test.
func newStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(t.Context(), newDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newDatabase names a fresh database on the backend under test: a SQLite
// file, or a PostgreSQL URL. Open takes either.
func newDatabase(t testing.TB) string {
	t.Helper()
	if pgtest.Requested() {
		return pgDatabase(t)
	}
	return filepath.Join(t.TempDir(), DBFile)
}

// pgDatabase is a fresh PostgreSQL database at today's schema.
func pgDatabase(t testing.TB) string {
	return pgtest.Database(t, "store", func(ctx context.Context, url string) error {
		s, err := OpenPostgres(ctx, url)
		if err != nil {
			return err
		}
		return s.Close()
	})
}

// openAgain opens a second store on s's database, as another process
// would (an admin command, another replica).
func openAgain(t testing.TB, s *Store) *Store {
	t.Helper()
	where := s.Path()
	if b, ok := s.b.(*postgresDB); ok {
		where = b.url
	}
	other, err := Open(t.Context(), where)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	return other
}

// sqliteOnly skips a test of what only SQLite has.
func sqliteOnly(t testing.TB, why string) {
	t.Helper()
	if pgtest.Requested() {
		t.Skip("SQLite only: " + why)
	}
}
