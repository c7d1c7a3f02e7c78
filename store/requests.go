package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// InsertRequest stores a captured webhook request and returns its id once
// the transaction holding it has committed.
func (s *Store) InsertRequest(ctx context.Context, r *NewRequest) (string, error) {
	id, row := newRequestRow(r)
	if err := s.enqueue(ctx, &writeOp{request: row, ids: []string{id}, done: make(chan error, 1)}); err != nil {
		return "", err
	}
	return id, nil
}

// newRequestRow prepares a captured request for the writer.
func newRequestRow(r *NewRequest) (string, *requestRow) {
	id := NewID("req_")
	path := r.Path
	if path == "" {
		path = "/"
	}
	body := r.Body
	if body == nil {
		body = []byte{}
	}
	// Encoding, compressing and tokenizing happen here, on the caller's
	// goroutine: the writer, which every capture waits for, only inserts.
	content := pack(bytesSection(appendHeaders(nil, r.Headers)), bytesSection(body))
	row := &requestRow{endpointID: r.EndpointID, args: []any{nil, id, r.EndpointID, ms(r.ReceivedAt), r.Method, path, r.Query,
		nullString(r.ContentType), len(body), r.RemoteAddr, content},
		tokens: requestTokens(path, r.Query, r.Headers, body), pathKey: pathKey(path)}
	if row.pathKey == path {
		row.pathKey = "" // nearly every path: no key row
	}
	return id, row
}

// requestColumns are the columns of a requestRow's args after seq, in order.
const requestColumns = "id, endpoint_id, received_at, method, path, query, content_type, size, remote_addr, content"

// The sections of a request's pack.
const (
	requestHeaders = iota // JSON array of [name, [values]] in order
	requestBody
)

// requestRow is a captured request ready for the writer, which inserts the
// rows of a whole batch with one statement: captures are the hottest write
// and one statement per row costs more than the row.
type requestRow struct {
	endpointID string
	args       []any  // seq, left for the writer to set, then requestColumns
	tokens     string // searchTokens
	pathKey    string // pathKey, when it is not the path itself
}

// insertRequests inserts a batch's captured requests and indexes them
// (search.go). Each row's seq is drawn first (nextSeqs), so that the index
// rows can name them.
func (t *wtx) insertRequests(rows []*requestRow) error {
	if len(rows) == 0 {
		return nil
	}
	seqs, err := t.b.nextSeqs(t, "requests", len(rows))
	if err != nil {
		return fmt.Errorf("insert into requests: %w", err)
	}
	values := make([][]any, len(rows))
	index := make([][]any, len(rows))
	indexArgs := make([]any, 0, 2*len(rows))
	for i, r := range rows {
		r.args[0] = seqs[i]
		values[i] = r.args
		indexArgs = append(indexArgs, seqs[i], r.tokens)
		index[i] = indexArgs[2*i : 2*i+2]
	}
	if err := t.insertRows("requests", "seq, "+requestColumns, values); err != nil {
		return err
	}
	var keys [][]any
	for i, r := range rows {
		if r.pathKey != "" {
			keys = append(keys, []any{seqs[i], r.pathKey})
		}
	}
	if len(keys) > 0 {
		if err := t.insertRows("request_path_keys", "seq, path_key", keys); err != nil {
			return err
		}
	}
	return t.insertRows(t.b.indexTable("requests_search"), "seq, tokens", index)
}

// unpackRequest reads a request's headers and body from its pack.
func unpackRequest(content []byte) ([]Header, []byte, error) {
	sections, err := unpackSections(content, requestHeaders, requestBody)
	if err != nil {
		return nil, nil, err
	}
	headers, err := decodeHeaders(sections[0])
	if err != nil {
		return nil, nil, fmt.Errorf("headers: %w", err)
	}
	body := sections[1]
	if body == nil {
		body = []byte{}
	}
	return headers, body, nil
}

// requestSummaryCols are a request's list columns, its newest delivery's
// included (joined with lastDeliveryJoin).
const requestSummaryCols = `requests.endpoint_id, requests.method, requests.path, requests.query,
	requests.content_type, requests.size, requests.received_at, requests.remote_addr,
	ld.kind, ld.status, ld.response_status, ld.created_at`

// lastDeliveryJoin finds each listed request's newest delivery through the
// deliveries_request index: one index probe and one row per request shown,
// whatever the number of requests stored, and no column to keep in step on
// every delivery.
const lastDeliveryJoin = `LEFT JOIN deliveries ld ON ld.seq =
	(SELECT max(d.seq) FROM deliveries d WHERE d.request_seq = requests.seq)`

func scanRequestSummary(r interface{ Scan(...any) error }, base *row, extra ...any) (RequestSummary, error) {
	var q RequestSummary
	var ct sql.NullString
	var received int64
	var ldKind, ldStatus sql.NullString
	var ldResponse, ldCreated sql.NullInt64
	dest := append([]any{&base.seq, &base.id, &q.EndpointID, &q.Method, &q.Path, &q.Query, &ct, &q.Size,
		&received, &q.RemoteAddr, &ldKind, &ldStatus, &ldResponse, &ldCreated}, extra...)
	if err := r.Scan(dest...); err != nil {
		return RequestSummary{}, err
	}
	q.ID = base.id
	q.ContentType = strPtr(ct)
	q.ReceivedAt = fromMS(received)
	if ldKind.Valid {
		q.LastDelivery = &DeliverySummary{Kind: ldKind.String, Status: ldStatus.String,
			ResponseStatus: intPtr(ldResponse), CreatedAt: fromMS(ldCreated.Int64)}
	}
	return q, nil
}

func intPtr(n sql.NullInt64) *int {
	if !n.Valid {
		return nil
	}
	v := int(n.Int64)
	return &v
}

// Requests pages through an endpoint's captured requests, newest first.
func (s *Store) Requests(ctx context.Context, endpointID string, f RequestFilter, p Page) (List[RequestSummary], error) {
	k := keyset{table: "requests", ownerCol: "endpoint_id", owner: endpointID, columns: requestSummaryCols,
		joins: lastDeliveryJoin}
	if f.Method != "" {
		// Methods are ASCII tokens, where upper() agrees on both databases.
		k.where = append(k.where, "upper(requests.method) = upper(?)")
		k.whereArgs = append(k.whereArgs, f.Method)
	}
	if f.PathPrefix != "" {
		// A prefix of the path as received, or of its key (filters.go),
		// which reads every spelling of an escape alike: "/ci/İstanbul"
		// finds "/ci/%C4%B0stanbul". A path without a key row is its own
		// key. substr and length both count characters, so the test holds
		// for any UTF-8 path; it also avoids LIKE's wildcards in paths.
		k.where = append(k.where, `(substr(requests.path, 1, length(CAST(? AS TEXT))) = ?
			OR substr(coalesce((SELECT pk.path_key FROM request_path_keys pk WHERE pk.seq = requests.seq), requests.path),
				1, length(CAST(? AS TEXT))) = ?)`)
		key := pathKey(f.PathPrefix)
		k.whereArgs = append(k.whereArgs, f.PathPrefix, f.PathPrefix, key, key)
	}
	if !f.Since.IsZero() {
		k.where = append(k.where, "requests.received_at > ?")
		k.whereArgs = append(k.whereArgs, ms(f.Since))
	}
	return searchPage(ctx, s, k, p, f.Q, scanRequestRow, s.searchRequests)
}

func scanRequestRow(r *sql.Rows, base *row) (RequestSummary, error) {
	return scanRequestSummary(r, base)
}

// Request returns one captured request of the project with its
// deliveries, its body read whole (RequestDetail leaves it to be read).
func (s *Store) Request(ctx context.Context, projectID, id string) (Request, error) {
	d, err := s.RequestDetail(ctx, projectID, id, func(int64) (func(), error) { return func() {}, nil })
	if err != nil {
		return Request{}, err
	}
	r := d.Request
	if r.Body, err = io.ReadAll(d.Body()); err != nil {
		return Request{}, fmt.Errorf("request %s: %w", id, err)
	}
	return r, nil
}

// RequestDetail is a captured request with its body left in the database,
// to be written out slice by slice: 60 clients that never read a 25 MiB
// request must not hold 60 copies of it (SPEC §13).
type RequestDetail struct {
	Request // Body is nil
	v       *packedValue
}

// Body returns the body to be read from its start; each call a new reader.
func (d RequestDetail) Body() *Part {
	if p := d.v.part(requestBody); p != nil {
		return p
	}
	return &Part{v: d.v} // an empty body
}

// RequestDetail returns one request of the project, its body to be read.
// Reading the start of a large pack makes the database load the whole of
// it, so admit is told the pack's size first and may hold the read back
// (until it calls the release it returns) to bound how many such loads run
// at once.
func (s *Store) RequestDetail(ctx context.Context, projectID, id string, admit func(size int64) (release func(), err error)) (RequestDetail, error) {
	var base row
	var packSize int64
	summary, err := scanRequestSummary(s.queryRow(ctx, `SELECT requests.seq, requests.id, `+requestSummaryCols+`,
		octet_length(requests.content) FROM requests JOIN endpoints ON endpoints.id = requests.endpoint_id
		`+lastDeliveryJoin+` WHERE requests.id = ? AND endpoints.project_id = ?`, id, projectID), &base, &packSize)
	if errors.Is(err, sql.ErrNoRows) {
		return RequestDetail{}, fmt.Errorf("%w: no request %q", ErrNotFound, id)
	}
	if err != nil {
		return RequestDetail{}, err
	}
	release, err := admit(packSize)
	if err != nil {
		return RequestDetail{}, err
	}
	defer release()
	var head []byte
	err = s.queryRow(ctx, `SELECT substr(content, 1, `+strconv.Itoa(packWith)+`) FROM requests WHERE seq = ?`, base.seq).Scan(&head)
	if errors.Is(err, sql.ErrNoRows) {
		return RequestDetail{}, fmt.Errorf("%w: request %q was deleted while it was read", ErrNotFound, id)
	}
	if err != nil {
		return RequestDetail{}, err
	}
	v, err := s.openPacked(ctx, "requests", "content", "seq", base.seq, head, packSize, "request "+id)
	if err != nil {
		return RequestDetail{}, err
	}
	d := RequestDetail{Request: Request{RequestSummary: summary}, v: v}
	headers, err := v.section(requestHeaders)
	if err != nil {
		return RequestDetail{}, err
	}
	if d.Headers, err = decodeHeaders(headers); err != nil {
		return RequestDetail{}, fmt.Errorf("request %s headers: %w", id, err)
	}
	d.Deliveries, err = s.deliveries(ctx, base.seq)
	return d, err
}

func (s *Store) deliveries(ctx context.Context, requestSeq int64) ([]Delivery, error) {
	rows, err := s.query(ctx, `SELECT id, kind, target_url, status, response_status, error, duration_ms, created_at
		FROM deliveries WHERE request_seq = ? ORDER BY seq`, requestSeq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Delivery{}
	for rows.Next() {
		var d Delivery
		var status sql.NullInt64
		var errText sql.NullString
		var created int64
		if err := rows.Scan(&d.ID, &d.Kind, &d.TargetURL, &d.Status, &status, &errText, &d.DurationMS, &created); err != nil {
			return nil, err
		}
		d.ResponseStatus = intPtr(status)
		d.Error = strPtr(errText)
		d.CreatedAt = fromMS(created)
		out = append(out, d)
	}
	return out, rows.Err()
}

// DeliveriesKept is how many deliveries a request keeps, the newest: a
// client that records without end must not grow one request without end.
const DeliveriesKept = 100

// AddDelivery records the outcome of sending a captured request somewhere,
// dropping the request's oldest beyond DeliveriesKept. A delivery is
// "delivered" when the target answered 2xx.
func (s *Store) AddDelivery(ctx context.Context, projectID, requestID string, nd NewDelivery) (Delivery, error) {
	if nd.Kind != DeliveryReplay && nd.Kind != DeliveryForward {
		return Delivery{}, fmt.Errorf("%w: delivery kind %q", ErrInvalid, nd.Kind)
	}
	d := Delivery{
		ID:             NewID("dlv_"),
		Kind:           nd.Kind,
		TargetURL:      nd.TargetURL,
		Status:         DeliveryFailed,
		ResponseStatus: nd.ResponseStatus,
		Error:          nd.Error,
		DurationMS:     nd.Duration.Milliseconds(),
		CreatedAt:      now(),
	}
	if nd.ResponseStatus != nil && *nd.ResponseStatus >= 200 && *nd.ResponseStatus <= 299 {
		d.Status = DeliveryDelivered
	}
	var status any
	if d.ResponseStatus != nil {
		status = *d.ResponseStatus
	}
	err := s.write(ctx, func(t *wtx) error {
		var seq int64
		var endpointID string
		err := t.queryRow(`SELECT r.seq, r.endpoint_id FROM requests r JOIN endpoints e ON e.id = r.endpoint_id
			WHERE r.id = ? AND e.project_id = ?`, requestID, projectID).Scan(&seq, &endpointID)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: no request %q", ErrNotFound, requestID)
		}
		if err != nil {
			return err
		}
		_, err = t.exec(`INSERT INTO deliveries (id, request_seq, kind, target_url, status, response_status, error, duration_ms, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			d.ID, seq, d.Kind, d.TargetURL, d.Status, status, nullStringPtr(d.Error), d.DurationMS, ms(d.CreatedAt))
		if err != nil {
			return err
		}
		_, err = t.exec(`DELETE FROM deliveries WHERE request_seq = ?1 AND seq <=
			(SELECT seq FROM deliveries WHERE request_seq = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)`, seq, DeliveriesKept)
		// The endpoint's live lists show each request's last delivery, so
		// a delivery wakes them as a capture does; a wait for captures
		// reads again and keeps waiting.
		t.wakeAfterCommit(endpointID)
		return err
	})
	if err != nil {
		return Delivery{}, err
	}
	return d, nil
}

// DeleteRequest deletes one captured request of the project.
func (s *Store) DeleteRequest(ctx context.Context, projectID, id string) error {
	return s.deleteCapture(ctx, requestsTable, "request", projectID, id)
}

// PurgeEndpoint deletes every captured request of an endpoint of the project.
func (s *Store) PurgeEndpoint(ctx context.Context, projectID, endpointID string) error {
	if _, err := s.Endpoint(ctx, projectID, endpointID); err != nil {
		return err
	}
	return s.purge(ctx, requestsTable, endpointID)
}
