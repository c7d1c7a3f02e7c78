package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/datadir"
)

func dataDir(c *cobra.Command) (string, error) {
	flag, _ := c.Flags().GetString("data-dir")
	return datadir.Resolve(flag)
}

// databaseEnv names a PostgreSQL database when --database does not.
const databaseEnv = "CAPTURE_DATABASE_URL"

// database is the PostgreSQL URL that --database or $CAPTURE_DATABASE_URL
// give, or "" for the data dir's SQLite database.
func database(c *cobra.Command) (string, error) {
	url, _ := c.Flags().GetString("database")
	from := "--database"
	if url == "" {
		url, from = os.Getenv(databaseEnv), "$"+databaseEnv
	}
	if url != "" && !store.IsPostgresURL(url) {
		return "", usagef("%s: want a postgres:// URL (or none for the data dir's SQLite database)", from)
	}
	if url != "" && !store.ValidPostgresURL(url) {
		// Not the URL itself: it may hold a password.
		return "", usagef("%s: not a valid postgres:// URL", from)
	}
	if url != "" {
		// The one setting of the URL whose mistake would otherwise be
		// found only when connecting, and reported as a failed start.
		u, _ := neturl.Parse(url)
		if mode := u.Query().Get("sslmode"); mode != "" && !slices.Contains(sslModes, mode) {
			return "", usagef("%s: sslmode %q: want one of %s", from, mode, strings.Join(sslModes, ", "))
		}
	}
	return url, nil
}

// sslModes are the values of sslmode in a postgres:// URL (libpq's).
var sslModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

// openStore opens the database for an administration command: the one
// --database names, else the data dir's. A data dir without one is
// refused, not created: a mistyped --data-dir must not leave an empty
// database behind (SPEC §2a).
func openStore(c *cobra.Command) (*store.Store, error) {
	url, err := database(c)
	if err != nil {
		return nil, err
	}
	if url != "" {
		has, err := store.PostgresHasData(c.Context(), url)
		if err != nil {
			return nil, err
		}
		if !has {
			return nil, errors.New("no capture data in the --database: run `capture serve --database …` first")
		}
		return store.OpenPostgres(c.Context(), url)
	}
	dir, err := dataDir(c)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, store.DBFile)); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no capture data in %s: run `capture serve` first (or pass --data-dir)", dir)
	}
	if err := checkWritable(filepath.Join(dir, store.DBFile)); err != nil {
		return nil, err
	}
	if store.NeedsUpgrade(c.Context(), filepath.Join(dir, store.DBFile)) {
		// A serve that holds the data dir while its database still lacks
		// this build's migrations is an older build (or this build's,
		// upgrading it right now): upgrading under the older one would
		// leave what it stores next in the old shape.
		release, err := datadir.Lock(dir)
		if errors.Is(err, datadir.ErrInUse) {
			return nil, fmt.Errorf("the database in %s needs an upgrade, and the `capture serve` using it is an older version "+
				"(or is upgrading it now): stop it and start this version's `capture serve`, which upgrades it, then run this again", dir)
		}
		if err == nil {
			release()
		}
		// A serve of a build that predates the data dir's lock takes none;
		// its connections still hold SQLite's own lock on the database.
		if err := store.CheckNotHeldOpen(dir); err != nil {
			return nil, fmt.Errorf("%w: stop it and start this version's `capture serve`, which upgrades it, then run this again", err)
		}
	}
	// OpenDir would log the warning through slog's default logger, with
	// a time stamp and a level; a command's messages are lines like its
	// errors.
	warning, err := store.PrepareDir(dir)
	if err != nil {
		return nil, err
	}
	if warning != "" {
		fmt.Fprintf(c.ErrOrStderr(), "capture: %s\n", warning)
	}
	return store.OpenDir(c.Context(), dir)
}

// withStore runs fn with the data dir's database open, and maps the store's
// errors to messages that name their code.
func withStore(c *cobra.Command, fn func(st *store.Store) error) error {
	st, err := openStore(c)
	if err != nil {
		return explainPostgres(explainReadOnly(sqlitePath(c), err))
	}
	err = fn(st)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	return explainReadOnly(sqlitePath(c), err)
}

// sqlitePath is the SQLite database file a command works on, or "" on
// PostgreSQL.
func sqlitePath(c *cobra.Command) string {
	if url, err := database(c); err != nil || url != "" {
		return ""
	}
	dir, err := dataDir(c)
	if err != nil {
		return ""
	}
	return filepath.Join(dir, store.DBFile)
}

// explainPostgres turns the server's refusal of a database or role that
// does not exist (pgx: `server error: FATAL: database "x" does not exist
// (SQLSTATE 3D000)`) into what to do about it, the SQLSTATE at the end.
func explainPostgres(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	server := "PostgreSQL"
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Config != nil {
		server += " at " + net.JoinHostPort(ce.Config.Host, strconv.Itoa(int(ce.Config.Port)))
	}
	switch {
	case pe.Code == "3D000":
		return fmt.Errorf("%s has no such database (%s): create it (createdb NAME, owned by the URL's user) "+
			"or fix the database name in the URL (SQLSTATE %s)", server, pe.Message, pe.Code)
	case pe.Code == "28000" && strings.Contains(pe.Message, "does not exist"):
		return fmt.Errorf("%s has no such role (%s): create it (createuser NAME) "+
			"or fix the user name in the URL (SQLSTATE %s)", server, pe.Message, pe.Code)
	}
	return err
}

// explainReadOnly turns SQLite's errors about the database file itself
// into messages naming the file and what to do (SPEC §13): "attempt to
// write a readonly database" and "unable to open database file" say what
// keeps it from being written, "malformed" says it is damaged. Other
// errors pass as they are.
func explainReadOnly(path string, err error) error {
	var se *sqlite.Error
	if path == "" || !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_READONLY:
		return fmt.Errorf("the database %s is read-only: %s; nothing changed", path, readOnlyCause(path, se.Code()))
	case sqlite3.SQLITE_CANTOPEN:
		cause := readOnlyCause(path, se.Code())
		if strings.HasPrefix(cause, "SQLite cannot") {
			cause = "check that its directory exists and that this user can read and write it and its -wal and -shm files"
		}
		return fmt.Errorf("the database %s cannot be opened for writing: %s; nothing changed", path, cause)
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return fmt.Errorf("the database %s is damaged: SQLite finds it malformed; nothing changed. "+
			"Restore it from a backup, or move the data dir aside to start afresh", path)
	}
	return err
}

// readOnlyCause says which of the database's files, or its directory,
// cannot be written. SQLite writes the -wal and -shm files beside the
// database, and creates them with the database file's mode.
func readOnlyCause(path string, code int) string {
	if code == sqlite3.SQLITE_READONLY_DIRECTORY {
		return fmt.Sprintf("its directory cannot be written, and SQLite keeps its %s-wal and -shm files there", store.DBFile)
	}
	if cause := unwritable(path); cause != "" {
		return cause
	}
	return "SQLite cannot write it (" + sqlite.ErrorCodeString[code] + ")"
}

// unwritable says which of the database's files this user cannot write,
// or "" when it can write every one that exists.
func unwritable(path string) string {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		// Opened for writing without O_TRUNC, nothing in it changes.
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			cause := pathErrorCause(err)
			if p == path {
				return fmt.Sprintf("this user cannot write it (%v)", cause)
			}
			return fmt.Sprintf("this user cannot write %s (%v)", filepath.Base(p), cause)
		}
		f.Close()
	}
	return ""
}

// pathErrorCause drops fs.PathError's restatement of the path, which the
// caller already names.
func pathErrorCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// checkWritable refuses a SQLite database this user cannot write before
// SQLite opens it. SQLite would open it all the same, create its -wal and
// -shm files with the database's mode and fail only then, leaving behind
// files that still refuse writes once the database's own mode is fixed.
// Root may write any file: for root, a database its owner may not write
// was made read-only on purpose, and is refused as well.
func checkWritable(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return nil // Opening it says what is wrong.
	}
	// One this user cannot even read is not merely read-only.
	if f, err := os.Open(path); errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("the database %s cannot be read: this user cannot read it (%v); nothing changed", path, pathErrorCause(err))
	} else if err == nil {
		f.Close()
	}
	cause := unwritable(path)
	if perm := info.Mode().Perm(); cause == "" && os.Geteuid() == 0 && perm&0o200 == 0 {
		cause = fmt.Sprintf("its mode %04o lets not even its owner write it (chmod u+w makes it writable)", perm)
	}
	if cause == "" {
		return nil
	}
	return fmt.Errorf("the database %s is read-only: %s; nothing changed", path, cause)
}

// apiFlag adds --api to a command that works over the read API.
func apiFlag(c *cobra.Command) {
	c.Flags().String("api", "", "read API base URL (default from credentials.json, else "+apiclient.DefaultAPI+")")
}

// apiClient is a client of the read API that --api, the environment and
// credentials.json name; without a key the command ends with exit code 2.
func apiClient(c *cobra.Command) (*apiclient.Client, error) {
	if c.Flags().Changed("database") {
		// It is a root flag, so cobra takes it here too; ignored, it
		// would let a script believe it was used.
		return nil, usagef("--database is for serve and the administration commands: %s reads captures "+
			"through the read API (--api, and the key from CAPTURE_API_KEY or credentials.json)", c.CommandPath())
	}
	api, _ := c.Flags().GetString("api")
	dir, _ := c.Flags().GetString("data-dir")
	creds, err := apiclient.Resolve(api, dir)
	if errors.Is(err, apiclient.ErrNoKey) && os.Getenv(databaseEnv) != "" {
		// PostgreSQL mode writes no credentials.json, and refuses --save.
		err = fmt.Errorf("%w: set %s; with $%s set, serve writes no credentials.json: `capture key create` prints a key",
			apiclient.ErrNoKey, apiclient.EnvAPIKey, databaseEnv)
	}
	if err != nil {
		return nil, exitError{code: 2, err: err}
	}
	// A key is cap_ and base62 (SPEC §4). Anything else in it could not
	// even be sent: a line break would end the Authorization header.
	if strings.ContainsFunc(creds.Key, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_')
	}) {
		return nil, exitError{code: 2, err: fmt.Errorf("the key in %s contains characters a key never has (a key is cap_ followed by letters and digits)", keySource(c))}
	}
	return apiclient.New(creds.API, creds.Key, nil), nil
}

// keySource names where the key a client uses comes from, in the order
// apiclient.Resolve reads them: $CAPTURE_API_KEY, $CAPTURE_KEY, or the
// data dir's credentials.json.
func keySource(c *cobra.Command) string {
	for _, env := range []string{apiclient.EnvAPIKey, apiclient.EnvKey} {
		if strings.TrimSpace(os.Getenv(env)) != "" {
			return "$" + env
		}
	}
	dir, err := dataDir(c)
	if err != nil {
		return datadir.CredentialsFile
	}
	return filepath.Join(dir, datadir.CredentialsFile)
}

// refusedKey says, for a key the API refuses, where it came from and how
// to get one that works (SPEC §2a: `capture key create --save`).
func refusedKey(c *cobra.Command) string {
	switch from := keySource(c); from {
	case "$" + apiclient.EnvAPIKey, "$" + apiclient.EnvKey:
		return fmt.Sprintf("the key in %s (unknown or revoked): set it to an active key (`capture key create` makes one), or unset it to use credentials.json", from)
	default:
		return fmt.Sprintf("the key in %s (unknown or revoked): `capture key create --save` replaces it (or set %s)", from, apiclient.EnvAPIKey)
	}
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// projectFlag adds --project to an administration command.
func projectFlag(c *cobra.Command) {
	c.Flags().String("project", store.DefaultName, "project id or name")
}

func resolveProject(c *cobra.Command, st *store.Store) (store.Project, error) {
	name, _ := c.Flags().GetString("project")
	return st.Project(c.Context(), name)
}

func jsonFlag(c *cobra.Command) {
	c.Flags().Bool("json", false, "print JSON in the read API's shape")
}

func wantJSON(c *cobra.Command) bool {
	v, _ := c.Flags().GetBool("json")
	return v
}

func fprintf(w io.Writer, format string, args ...any) { fmt.Fprintf(w, format, args...) }
