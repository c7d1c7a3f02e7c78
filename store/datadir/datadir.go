// Package datadir knows where a local capture keeps its files and the
// credentials.json that `capture serve` leaves there for its clients.
//
// It imports nothing of this module and no database driver: the server side
// (serve, the administration commands) and the client side (tui, forward,
// mcp) both find the data dir through it, and a client that reads
// credentials.json must not link SQLite to do so.
package datadir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Env names the environment variable that sets the data dir when no flag
// does.
const Env = "CAPTURE_DATA_DIR"

// Resolve picks the data dir: the flag, else $CAPTURE_DATA_DIR, else the
// platform's per-user data dir. It is always absolute, so that the paths
// serve prints (credentials.json, the CA) can be used from anywhere.
func Resolve(flag string) (string, error) {
	if flag != "" {
		return absolute(flag)
	}
	if env := os.Getenv(Env); env != "" {
		return absolute(env)
	}
	if runtime.GOOS == "darwin" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find data dir: %w", err)
		}
		return filepath.Join(home, "Library", "Application Support", "capture"), nil
	}
	// The XDG base directory spec: a relative $XDG_DATA_HOME is invalid
	// and ignored, as if it were unset.
	if xdg := os.Getenv("XDG_DATA_HOME"); xdg != "" && filepath.IsAbs(xdg) {
		return filepath.Join(xdg, "capture"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find data dir: %w", err)
	}
	return filepath.Join(home, ".local", "share", "capture"), nil
}

func absolute(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("data dir %s: %w", dir, err)
	}
	return abs, nil
}

// CredentialsFile is written into the data dir by the first `capture serve`.
const CredentialsFile = "credentials.json"

// Credentials are the API base URL and key that clients use when neither
// flags nor the environment give them.
type Credentials struct {
	API string `json:"api"`
	Key string `json:"key"`
}

// ReadCredentials reads dir/credentials.json.
func ReadCredentials(dir string) (Credentials, error) {
	path := filepath.Join(dir, CredentialsFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return Credentials{}, fmt.Errorf("read %s: %w", path, err)
	}
	var c Credentials
	if err := json.Unmarshal(b, &c); err != nil {
		return Credentials{}, fmt.Errorf("read %s: %w", path, err)
	}
	return c, nil
}

// WriteCredentials writes dir/credentials.json with mode 0600, replacing it
// atomically so a reader never sees half a file.
func WriteCredentials(dir string, c Credentials) error {
	path := filepath.Join(dir, CredentialsFile)
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".credentials-*.json")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
