package apiclient

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/capturedev/capture/store/datadir"
)

// Environment variables that carry the API key, in the order they are read.
// Both names are in use in guides, so both are honoured.
const (
	EnvAPIKey = "CAPTURE_API_KEY"
	EnvKey    = "CAPTURE_KEY"
)

// ErrNoKey means neither the environment nor credentials.json gave a key.
var ErrNoKey = errors.New("no API key")

// Resolve finds the API base URL and key the way every client of a local
// capture does. The key comes from $CAPTURE_API_KEY, else $CAPTURE_KEY,
// else credentials.json in the data dir; the URL from apiFlag, else
// credentials.json, else DefaultAPI. The URL comes back as BaseURLOf makes
// it: the server's root means /api/v1 under it, and no trailing slash.
func Resolve(apiFlag, dataDirFlag string) (datadir.Credentials, error) {
	var c datadir.Credentials
	c.Key = strings.TrimSpace(os.Getenv(EnvAPIKey))
	if c.Key == "" {
		c.Key = strings.TrimSpace(os.Getenv(EnvKey))
	}
	c.API = strings.TrimSpace(apiFlag)

	if c.Key == "" || c.API == "" {
		dir, err := datadir.Resolve(dataDirFlag)
		if err != nil {
			return datadir.Credentials{}, err
		}
		saved, err := datadir.ReadCredentials(dir)
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
			// serve writes the file on a first start only: once lost,
			// a new key saved there replaces it.
			return datadir.Credentials{}, fmt.Errorf("%w: set %s (or %s), or save one in %s with `capture key create --save` (a first `capture serve` writes it too)",
				ErrNoKey, EnvAPIKey, EnvKey, filepath.Join(dir, datadir.CredentialsFile))
		default:
			return datadir.Credentials{}, err
		}
		if c.Key == "" {
			return datadir.Credentials{}, fmt.Errorf("%w: set %s (or %s); %s holds none",
				ErrNoKey, EnvAPIKey, EnvKey, filepath.Join(dir, datadir.CredentialsFile))
		}
	}
	if c.API == "" {
		c.API = DefaultAPI
	}
	c.API = BaseURLOf(c.API)
	u, err := url.Parse(c.API)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return datadir.Credentials{}, fmt.Errorf("API URL %q: want an absolute http:// or https:// URL ending in /api/v1", c.API)
	}
	return c, nil
}
