package apiclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/capturedev/capture/store"
)

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

// Environment variables that carry the API key, in the order they are read.
// Both names are in use in guides, so both are honoured.
const (
	EnvAPIKey = "CAPTURE_API_KEY"
	EnvKey    = "CAPTURE_KEY"
)

// Resolve finds the API base URL and key the way every client of a local
// capture does. The key comes from $CAPTURE_API_KEY, else $CAPTURE_KEY,
// else credentials.json in the data dir; the URL from apiFlag, else
// credentials.json, else DefaultAPI. The URL comes back without a trailing
// slash.
func Resolve(apiFlag, dataDirFlag string) (Credentials, error) {
	var c Credentials
	c.Key = strings.TrimSpace(os.Getenv(EnvAPIKey))
	if c.Key == "" {
		c.Key = strings.TrimSpace(os.Getenv(EnvKey))
	}
	c.API = strings.TrimSpace(apiFlag)

	if c.Key == "" || c.API == "" {
		dir, err := store.ResolveDir(dataDirFlag)
		if err != nil {
			return Credentials{}, err
		}
		saved, err := ReadCredentials(dir)
		switch {
		case err == nil:
			if c.Key == "" {
				c.Key = strings.TrimSpace(saved.Key)
			}
			if c.API == "" {
				c.API = strings.TrimSpace(saved.API)
			}
		case errors.Is(err, fs.ErrNotExist) && c.Key != "":
			// The environment gave the key; the URL falls back below.
		case errors.Is(err, fs.ErrNotExist):
			return Credentials{}, fmt.Errorf("no API key: set %s (or %s), or run `capture serve` once so that %s exists",
				EnvAPIKey, EnvKey, filepath.Join(dir, CredentialsFile))
		default:
			return Credentials{}, err
		}
		if c.Key == "" {
			return Credentials{}, fmt.Errorf("no API key: set %s (or %s); %s holds none",
				EnvAPIKey, EnvKey, filepath.Join(dir, CredentialsFile))
		}
	}
	if c.API == "" {
		c.API = DefaultAPI
	}
	c.API = strings.TrimRight(c.API, "/")
	u, err := url.Parse(c.API)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Credentials{}, fmt.Errorf("API URL %q: want an absolute http:// or https:// URL ending in /api/v1", c.API)
	}
	return c, nil
}
