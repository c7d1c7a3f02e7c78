package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
)

// Addresses are where a running serve takes email, webhooks and API calls,
// as it announces them: what it bound, not what its flags defaulted to.
// serve records them at start, so that the administration commands print
// the live ones (SPEC §2a).
type Addresses struct {
	// HTTPBase is the --http listener's base URL (the web interface's);
	// APIBase is the read API's under it.
	HTTPBase string `json:"http_base"`
	APIBase  string `json:"api_base"`
	// CaptureBase is the base of capture URLs (--public-url, else the
	// capture listener), without a trailing slash.
	CaptureBase   string `json:"capture_base"`
	SMTPHost      string `json:"smtp_host"`
	StartTLSPorts []int  `json:"smtp_starttls_ports"`
	TLSPorts      []int  `json:"smtp_tls_ports"`
}

const addressesSetting = "addresses"

// SetAddresses records the addresses serve announces, replacing the last.
func (s *Store) SetAddresses(ctx context.Context, a Addresses) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return s.setSetting(ctx, addressesSetting, string(b))
}

// Addresses returns the addresses the last serve recorded; ok is false
// when no serve has run on this database.
func (s *Store) Addresses(ctx context.Context) (a Addresses, ok bool, err error) {
	v, err := s.setting(ctx, addressesSetting)
	if errors.Is(err, sql.ErrNoRows) {
		return Addresses{}, false, nil
	}
	if err != nil {
		return Addresses{}, false, err
	}
	if err := json.Unmarshal([]byte(v), &a); err != nil {
		return Addresses{}, false, fmt.Errorf("settings %s: %w", addressesSetting, err)
	}
	return a, true, nil
}

// tlsSetting is the settings name under which a file of the local CA is
// kept when replicas share the database (see Shared).
func tlsSetting(name string) string { return "tls/" + name }

// TLSFile returns a PEM file of the local CA and SMTP certificate kept in
// the database, ErrNotFound when it was never set.
func (s *Store) TLSFile(ctx context.Context, name string) ([]byte, error) {
	v, err := s.setting(ctx, tlsSetting(name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: no %s in the database", ErrNotFound, name)
	}
	return []byte(v), err
}

// SetTLSFile keeps a PEM file of the local CA and SMTP certificate in the
// database, replacing the last.
func (s *Store) SetTLSFile(ctx context.Context, name string, pem []byte) error {
	return s.setSetting(ctx, tlsSetting(name), string(pem))
}

// setting reads the value of the named row of settings, sql.ErrNoRows
// when there is none.
func (s *Store) setting(ctx context.Context, name string) (string, error) {
	var v string
	err := s.queryRow(ctx, `SELECT value FROM settings WHERE name = ?`, name).Scan(&v)
	return v, err
}

// setSetting stores value under name in settings, replacing the last.
func (s *Store) setSetting(ctx context.Context, name, value string) error {
	return s.write(ctx, func(t *wtx) error {
		_, err := t.exec(`INSERT INTO settings (name, value) VALUES (?, ?)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value`, name, value)
		return err
	})
}

// Exclusively runs fn while no other process sharing the database runs
// anything under name, waiting for one that does: for what must happen
// once, such as making the local CA on a first start.
func (s *Store) Exclusively(ctx context.Context, name string, fn func() error) error {
	_, err := s.b.exclusively(ctx, name, true, fn)
	return err
}
