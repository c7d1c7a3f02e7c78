package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

const inboxCols = `inboxes.project_id, inboxes.name, inboxes.smtp_password, inboxes.message_count, inboxes.created_at`

func scanInbox(r interface{ Scan(...any) error }, base *row) (Inbox, error) {
	var in Inbox
	var created int64
	if err := r.Scan(&base.seq, &base.id, &in.ProjectID, &in.Name, &in.SMTPPassword, &in.MessageCount, &created); err != nil {
		return Inbox{}, err
	}
	in.ID = base.id
	in.CreatedAt = fromMS(created)
	return in, nil
}

// CreateInbox adds an inbox with a fresh SMTP password.
func (s *Store) CreateInbox(ctx context.Context, projectID, name string) (Inbox, error) {
	if err := validName("inbox", name); err != nil {
		return Inbox{}, err
	}
	in := Inbox{ID: NewID("inb_"), ProjectID: projectID, Name: name, SMTPPassword: newSMTPPassword(), CreatedAt: now()}
	err := s.write(ctx, func(t *wtx) error {
		err := checkQuota(t, projectID, quotaInboxes)
		if err != nil {
			return err
		}
		_, err = t.exec(`INSERT INTO inboxes (id, project_id, name, smtp_password, smtp_password_hash, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`,
			in.ID, in.ProjectID, in.Name, in.SMTPPassword, hashKey(in.SMTPPassword), ms(in.CreatedAt))
		return err
	})
	if err != nil {
		return Inbox{}, err
	}
	return in, nil
}

// Inboxes pages through a project's inboxes, newest first.
func (s *Store) Inboxes(ctx context.Context, projectID string, p Page) (List[Inbox], error) {
	return page(ctx, s, keyset{table: "inboxes", ownerCol: "project_id", owner: projectID, columns: inboxCols}, p,
		func(r *sql.Rows, base *row) (Inbox, error) { return scanInbox(r, base) })
}

// Inbox finds an inbox of the project; projectID "" means any project
// (for SMTP authentication and administration).
func (s *Store) Inbox(ctx context.Context, projectID, id string) (Inbox, error) {
	var base row
	in, err := scanInbox(s.queryRow(ctx,
		`SELECT inboxes.seq, inboxes.id, `+inboxCols+` FROM inboxes WHERE id = ? AND (?2 = '' OR project_id = ?2)`,
		id, projectID), &base)
	if errors.Is(err, sql.ErrNoRows) {
		return Inbox{}, fmt.Errorf("%w: no inbox %q", ErrNotFound, id)
	}
	return in, err
}

// RotateInboxPassword replaces an inbox's SMTP password. New SMTP sessions
// and provider API requests see it at once: both read it from the database.
func (s *Store) RotateInboxPassword(ctx context.Context, id string) (Inbox, error) {
	password := newSMTPPassword()
	err := s.write(ctx, func(t *wtx) error {
		res, err := t.exec(`UPDATE inboxes SET smtp_password = ?, smtp_password_hash = ? WHERE id = ?`,
			password, hashKey(password), id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: no inbox %q", ErrNotFound, id)
		}
		return nil
	})
	if err != nil {
		return Inbox{}, err
	}
	return s.Inbox(ctx, "", id)
}

const endpointCols = `endpoints.project_id, endpoints.name, endpoints.target_url, endpoints.response_status,
	endpoints.response_headers, endpoints.response_body, endpoints.response_delay_ms, endpoints.request_count, endpoints.created_at`

func scanEndpoint(r interface{ Scan(...any) error }, base *row) (Endpoint, error) {
	var e Endpoint
	var target sql.NullString
	var headers string
	var delay, created int64
	if err := r.Scan(&base.seq, &base.id, &e.ProjectID, &e.Name, &target, &e.Response.Status,
		&headers, &e.Response.Body, &delay, &e.RequestCount, &created); err != nil {
		return Endpoint{}, err
	}
	e.ID = base.id
	e.TargetURL = strPtr(target)
	if err := json.Unmarshal([]byte(headers), &e.Response.Headers); err != nil {
		return Endpoint{}, fmt.Errorf("endpoint %s: response headers: %w", e.ID, err)
	}
	e.Response.Delay = time.Duration(delay) * time.Millisecond
	e.CreatedAt = fromMS(created)
	return e, nil
}

// ValidateTarget checks a saved replay target: an absolute http(s) URL.
func ValidateTarget(target string) error {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: target %q must be an absolute http:// or https:// URL", ErrInvalid, target)
	}
	// url.Parse takes any digits as a port; every replay to such a
	// target would fail, so it is refused when saved.
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%w: target %q: port %s is not 1–65535", ErrInvalid, target, port)
		}
	}
	return nil
}

// CreateEndpoint adds a webhook endpoint; target may be nil.
func (s *Store) CreateEndpoint(ctx context.Context, projectID, name string, target *string) (Endpoint, error) {
	if err := validName("endpoint", name); err != nil {
		return Endpoint{}, err
	}
	if target != nil {
		if err := ValidateTarget(*target); err != nil {
			return Endpoint{}, err
		}
	}
	e := Endpoint{ID: NewID("whe_"), ProjectID: projectID, Name: name, TargetURL: target,
		Response: DefaultResponse(), CreatedAt: now()}
	err := s.write(ctx, func(t *wtx) error {
		err := checkQuota(t, projectID, quotaEndpoints)
		if err != nil {
			return err
		}
		_, err = t.exec(`INSERT INTO endpoints (id, project_id, name, target_url, created_at) VALUES (?, ?, ?, ?, ?)`,
			e.ID, e.ProjectID, e.Name, nullStringPtr(target), ms(e.CreatedAt))
		return err
	})
	if err != nil {
		return Endpoint{}, err
	}
	return e, nil
}

// Endpoints pages through a project's endpoints, newest first.
func (s *Store) Endpoints(ctx context.Context, projectID string, p Page) (List[Endpoint], error) {
	return page(ctx, s, keyset{table: "endpoints", ownerCol: "project_id", owner: projectID, columns: endpointCols}, p,
		func(r *sql.Rows, base *row) (Endpoint, error) { return scanEndpoint(r, base) })
}

// Endpoint finds an endpoint of the project; projectID "" means any project.
func (s *Store) Endpoint(ctx context.Context, projectID, id string) (Endpoint, error) {
	var base row
	e, err := scanEndpoint(s.queryRow(ctx,
		`SELECT endpoints.seq, endpoints.id, `+endpointCols+` FROM endpoints WHERE id = ? AND (?2 = '' OR project_id = ?2)`,
		id, projectID), &base)
	if errors.Is(err, sql.ErrNoRows) {
		return Endpoint{}, fmt.Errorf("%w: no endpoint %q", ErrNotFound, id)
	}
	return e, err
}

// EndpointUpdate changes the fields that are set.
type EndpointUpdate struct {
	Target      *string
	Status      *int
	Headers     map[string]string // replaces all custom headers when non-nil
	Body        *string
	Delay       *time.Duration
	ClearTarget bool
}

// MaxResponseDelay bounds an endpoint's custom response delay.
const MaxResponseDelay = 10 * time.Second

// Validate checks u as UpdateEndpoint does, for callers that refuse bad
// input before they open the database.
func (u EndpointUpdate) Validate() error {
	if u.Target != nil {
		if err := ValidateTarget(*u.Target); err != nil {
			return err
		}
	}
	// A 1xx is an interim answer: the sender would see it, then net/http's
	// own 200 (or a broken connection for 101).
	if u.Status != nil && (*u.Status < 200 || *u.Status > 599) {
		return fmt.Errorf("%w: response status %d: want a final status from 200 to 599", ErrInvalid, *u.Status)
	}
	if u.Delay != nil && (*u.Delay < 0 || *u.Delay > MaxResponseDelay) {
		return fmt.Errorf("%w: response delay %s must be 0–10s", ErrInvalid, *u.Delay)
	}
	for k, v := range u.Headers {
		if !ValidHeaderName(k) || strings.ContainsAny(v, "\r\n\x00") {
			return fmt.Errorf("%w: bad response header %q", ErrInvalid, k)
		}
		// The answer's framing follows its body; a stored value would be
		// dropped at every answer, so it is refused here instead.
		if strings.EqualFold(k, "Content-Length") || strings.EqualFold(k, "Transfer-Encoding") {
			return fmt.Errorf("%w: response header %s is set from the body: leave it out", ErrInvalid, k)
		}
	}
	return nil
}

// UpdateEndpoint applies u and returns the endpoint as it now is.
func (s *Store) UpdateEndpoint(ctx context.Context, id string, u EndpointUpdate) (Endpoint, error) {
	if err := u.Validate(); err != nil {
		return Endpoint{}, err
	}
	err := s.write(ctx, func(t *wtx) error {
		var n int
		if err := t.queryRow(`SELECT count(*) FROM endpoints WHERE id = ?`, id).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: no endpoint %q", ErrNotFound, id)
		}
		if u.ClearTarget {
			if _, err := t.exec(`UPDATE endpoints SET target_url = NULL WHERE id = ?`, id); err != nil {
				return err
			}
		}
		if u.Target != nil {
			if _, err := t.exec(`UPDATE endpoints SET target_url = ? WHERE id = ?`, *u.Target, id); err != nil {
				return err
			}
		}
		if u.Status != nil {
			if _, err := t.exec(`UPDATE endpoints SET response_status = ? WHERE id = ?`, *u.Status, id); err != nil {
				return err
			}
		}
		if u.Headers != nil {
			canon := make(map[string]string, len(u.Headers))
			for k, v := range u.Headers {
				canon[http.CanonicalHeaderKey(k)] = v
			}
			b, _ := json.Marshal(canon)
			if _, err := t.exec(`UPDATE endpoints SET response_headers = ? WHERE id = ?`, string(b), id); err != nil {
				return err
			}
		}
		if u.Body != nil {
			if _, err := t.exec(`UPDATE endpoints SET response_body = ? WHERE id = ?`, *u.Body, id); err != nil {
				return err
			}
		}
		if u.Delay != nil {
			if _, err := t.exec(`UPDATE endpoints SET response_delay_ms = ? WHERE id = ?`, u.Delay.Milliseconds(), id); err != nil {
				return err
			}
		}
		// Checked on the result, since status and body may be set apart:
		// HTTP sends no body with these, so a saved one would never reach
		// the sender.
		var status int
		var body string
		if err := t.queryRow(`SELECT response_status, response_body FROM endpoints WHERE id = ?`, id).Scan(&status, &body); err != nil {
			return err
		}
		if body != "" && (status == http.StatusNoContent || status == http.StatusNotModified) {
			return fmt.Errorf("%w: a %d response carries no body: clear the response body or choose another status", ErrInvalid, status)
		}
		return nil
	})
	if err != nil {
		return Endpoint{}, err
	}
	return s.Endpoint(ctx, "", id)
}

// ValidHeaderName reports whether name is an HTTP token (RFC 9110 §5.1).
func ValidHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}
