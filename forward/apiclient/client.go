package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultAPI is where a local `capture serve` answers with its default flags.
const DefaultAPI = "http://127.0.0.1:7780/api/v1"

// MaxLimit is the largest page the API serves.
const MaxLimit = 100

// callTimeout bounds a call whose context has no deadline, on top of any
// wait it asks for, so that a hung server shows up as unreachable instead of
// hanging the caller.
const callTimeout = 30 * time.Second

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 1 << 20

// Client calls the read API with one key. It is safe for concurrent use.
type Client struct {
	base string
	key  string
	http *http.Client
}

// New returns a client of the API at baseURL (…/api/v1, a trailing slash
// is fine). A nil hc means http.DefaultClient.
func New(baseURL, key string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), key: key, http: hc}
}

// BaseURL is the API base URL, without a trailing slash.
func (c *Client) BaseURL() string { return c.base }

// Me checks the key and returns its project, plan and usage.
func (c *Client) Me(ctx context.Context) (Me, error) {
	var out Me
	err := c.do(ctx, http.MethodGet, "/me", nil, nil, &out, 0)
	return out, err
}

// Inboxes lists one page of the project's inboxes.
func (c *Client) Inboxes(ctx context.Context, p Page) (List[Inbox], error) {
	var out List[Inbox]
	err := c.do(ctx, http.MethodGet, "/inboxes", p.values(), nil, &out, 0)
	return out, err
}

// Endpoints lists one page of the project's webhook endpoints.
func (c *Client) Endpoints(ctx context.Context, p Page) (List[Endpoint], error) {
	var out List[Endpoint]
	err := c.do(ctx, http.MethodGet, "/endpoints", p.values(), nil, &out, 0)
	return out, err
}

// Endpoint finds one endpoint by id. The API has no route for a single
// endpoint, so it reads the list; an unknown id gives an *APIError with
// code not_found, as a route would.
func (c *Client) Endpoint(ctx context.Context, id string) (Endpoint, error) {
	all, err := All(ctx, c.Endpoints)
	if err != nil {
		return Endpoint{}, err
	}
	for _, e := range all {
		if e.ID == id {
			return e, nil
		}
	}
	return Endpoint{}, &APIError{Status: http.StatusNotFound, Code: CodeNotFound,
		Message: "no endpoint " + strconv.Quote(id) + " in this key's project", Fields: map[string]string{}}
}

// All reads every page of a list (Client.Inboxes, Client.Endpoints), in
// the list's order.
func All[T any](ctx context.Context, list func(context.Context, Page) (List[T], error)) ([]T, error) {
	var out []T
	p := Page{Limit: MaxLimit}
	for {
		l, err := list(ctx, p)
		if err != nil {
			return nil, err
		}
		out = append(out, l.Items...)
		if l.Next == "" {
			return out, nil
		}
		p.Before = l.Next
	}
}

// MessageQuery filters and pages GET /inboxes/{id}/messages. Zero fields
// are left out.
type MessageQuery struct {
	To, From, Subject string
	// Since keeps captures received strictly after it.
	Since time.Time
	// Wait holds an empty answer open until a match arrives, up to 30 s;
	// it is rounded up to whole seconds.
	Wait          time.Duration
	Before, After string
	Limit         int
}

// Messages lists captured messages of an inbox, newest first.
func (c *Client) Messages(ctx context.Context, inboxID string, q MessageQuery) (List[MessageSummary], error) {
	v := Page{Before: q.Before, After: q.After, Limit: q.Limit}.values()
	setNonEmpty(v, "to", q.To)
	setNonEmpty(v, "from", q.From)
	setNonEmpty(v, "subject", q.Subject)
	setTime(v, q.Since)
	setWait(v, q.Wait)
	var out List[MessageSummary]
	err := c.do(ctx, http.MethodGet, "/inboxes/"+url.PathEscape(inboxID)+"/messages", v, nil, &out, q.Wait)
	return out, err
}

// Message fetches one message: headers, bodies, links, attachments.
func (c *Client) Message(ctx context.Context, id string) (Message, error) {
	var out Message
	err := c.do(ctx, http.MethodGet, "/messages/"+url.PathEscape(id), nil, nil, &out, 0)
	return out, err
}

// MessageLinks lists the links of a message whose URL contains match
// ("" for all).
func (c *Client) MessageLinks(ctx context.Context, id, match string) ([]Link, error) {
	v := url.Values{}
	setNonEmpty(v, "match", match)
	var out List[Link]
	err := c.do(ctx, http.MethodGet, "/messages/"+url.PathEscape(id)+"/links", v, nil, &out, 0)
	return out.Items, err
}

// DeleteMessage deletes one captured message.
func (c *Client) DeleteMessage(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/messages/"+url.PathEscape(id), nil, nil, nil, 0)
}

// RequestQuery filters and pages GET /endpoints/{id}/requests. Zero fields
// are left out.
type RequestQuery struct {
	Method string
	// Path keeps requests whose captured path starts with it.
	Path          string
	Since         time.Time
	Wait          time.Duration
	Before, After string
	Limit         int
}

// Requests lists captured requests of an endpoint, newest first.
func (c *Client) Requests(ctx context.Context, endpointID string, q RequestQuery) (List[RequestSummary], error) {
	v := Page{Before: q.Before, After: q.After, Limit: q.Limit}.values()
	setNonEmpty(v, "method", q.Method)
	setNonEmpty(v, "path", q.Path)
	setTime(v, q.Since)
	setWait(v, q.Wait)
	var out List[RequestSummary]
	err := c.do(ctx, http.MethodGet, "/endpoints/"+url.PathEscape(endpointID)+"/requests", v, nil, &out, q.Wait)
	return out, err
}

// Request fetches one captured request with its body and deliveries.
func (c *Client) Request(ctx context.Context, id string) (Request, error) {
	var out Request
	err := c.do(ctx, http.MethodGet, "/requests/"+url.PathEscape(id), nil, nil, &out, 0)
	return out, err
}

// Replay sends a captured request to its endpoint's saved target, changed
// by edits (nil: as captured).
func (c *Client) Replay(ctx context.Context, id string, edits *ReplayEdits) (Replay, error) {
	var body any
	if edits != nil {
		body = edits
	}
	var out Replay
	// The server waits up to 10 s for the target on top of its own work.
	err := c.do(ctx, http.MethodPost, "/requests/"+url.PathEscape(id)+"/replay", nil, body, &out, 10*time.Second)
	return out, err
}

// RecordDelivery adds a forward delivery to a request's history.
func (c *Client) RecordDelivery(ctx context.Context, id string, r DeliveryReport) (Delivery, error) {
	var out Delivery
	err := c.do(ctx, http.MethodPost, "/requests/"+url.PathEscape(id)+"/deliveries", nil, r, &out, 0)
	return out, err
}

// DeleteRequest deletes one captured request.
func (c *Client) DeleteRequest(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/requests/"+url.PathEscape(id), nil, nil, nil, 0)
}

func (p Page) values() url.Values {
	v := url.Values{}
	setNonEmpty(v, "before", p.Before)
	setNonEmpty(v, "after", p.After)
	if p.Limit > 0 {
		v.Set("limit", strconv.Itoa(p.Limit))
	}
	return v
}

// setNonEmpty leaves empty parameters out: the API reads a present but
// empty cursor as a mistake.
func setNonEmpty(v url.Values, name, value string) {
	if value != "" {
		v.Set(name, value)
	}
}

func setTime(v url.Values, t time.Time) {
	if !t.IsZero() {
		v.Set("since", t.UTC().Format(time.RFC3339Nano))
	}
}

func setWait(v url.Values, d time.Duration) {
	if d > 0 {
		v.Set("wait", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
	}
}

// do sends one call and decodes a 2xx answer into out (nil: ignore it).
// extra lengthens the default call timeout for calls that may hold.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any, extra time.Duration) error {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	callCtx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, callTimeout+extra)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(callCtx, method, u, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.transportError(ctx, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode >= 400 {
		return c.apiError(ctx, resp)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return c.transportError(ctx, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: answer is not the expected JSON: %w", method, path, err)
	}
	return nil
}

// transportError tells the caller's own cancellation apart from an API
// that did not answer.
func (c *Client) transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %s", callTimeout)
	}
	return &UnreachableError{URL: c.base, Err: err}
}

func (c *Client) apiError(ctx context.Context, resp *http.Response) error {
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		return c.transportError(ctx, err)
	}
	e := &APIError{Status: resp.StatusCode, RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
	var env struct {
		Error *struct {
			Code    string            `json:"code"`
			Message string            `json:"message"`
			Fields  map[string]string `json:"fields"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &env) == nil && env.Error != nil && env.Error.Code != "" {
		e.Code, e.Message, e.Fields = env.Error.Code, env.Error.Message, env.Error.Fields
	} else {
		// Not the API's envelope: something in between answered.
		e.Message = http.StatusText(resp.StatusCode)
		if s := strings.TrimSpace(string(b)); s != "" && len(s) <= 200 {
			e.Message += ": " + s
		}
	}
	if e.Fields == nil {
		e.Fields = map[string]string{}
	}
	return e
}
