package replay_test

import (
	"os"
	"testing"

	"github.com/capturedev/capture/store/pgtest"
)

// The tests run on SQLite, or with CAPTURE_TEST_DATABASE=postgres on a
// PostgreSQL server of the package's own (see servertest.Database).
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }
