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

	"github.com/capturedev/capture/server/api/contract"
)

// DefaultAPI is where a local `capture serve` answers with its default flags.
const DefaultAPI = "http://127.0.0.1:7780" + contract.Prefix

// callTimeout bounds a call whose context has no deadline, on top of any
// wait it asks for, so that a hung server shows up as unreachable instead of
// hanging the caller.
const callTimeout = 30 * time.Second

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 1 << 20

// Client calls the read API with one key. It is safe for concurrent use.
// Every error answer comes back as a *contract.Error; an API that does not
// answer at all as an error that matches ErrUnreachable.
type Client struct {
	base string
	key  string
	http *http.Client
}

// New returns a client of the API at baseURL (…/api/v1, a trailing slash
// is fine; the server's root means the API under it, see BaseURLOf). A nil
// hc means http.DefaultClient.
func New(baseURL, key string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: BaseURLOf(baseURL), key: key, http: hc}
}

// BaseURLOf returns the API base URL that raw names, without a trailing
// slash. A URL of the server's root ("http://127.0.0.1:7780", with or
// without "/"), as other tools' documentation has one set it, names the
// API mounted under it at /api/v1, rather than routes that do not exist.
func BaseURLOf(raw string) string {
	base := strings.TrimRight(strings.TrimSpace(raw), "/")
	u, err := url.Parse(base)
	if err == nil && u.Host != "" && u.Path == "" && u.Opaque == "" && !u.ForceQuery && u.RawQuery == "" && u.Fragment == "" {
		base += contract.Prefix
	}
	return base
}

// BaseURL is the API base URL, without a trailing slash.
func (c *Client) BaseURL() string { return c.base }

// Page selects one page of a list route; the zero value is the newest page
// of the default size.
type Page struct {
	Before, After string
	Limit         int
}

// Me checks the key and returns its project, plan and usage.
func (c *Client) Me(ctx context.Context) (contract.Me, error) {
	var out contract.Me
	err := c.getJSON(ctx, "/me", nil, &out, 0)
	return out, err
}

// Inboxes lists one page of the project's inboxes.
func (c *Client) Inboxes(ctx context.Context, p Page) (contract.List[contract.Inbox], error) {
	var out contract.List[contract.Inbox]
	err := c.getJSON(ctx, "/inboxes", p.values(), &out, 0)
	return out, err
}

// Endpoints lists one page of the project's webhook endpoints.
func (c *Client) Endpoints(ctx context.Context, p Page) (contract.List[contract.Endpoint], error) {
	var out contract.List[contract.Endpoint]
	err := c.getJSON(ctx, "/endpoints", p.values(), &out, 0)
	return out, err
}

// Endpoint finds one endpoint by id. The API has no route for a single
// endpoint, so it reads the list; an unknown id gives a not_found error, as
// a route would.
func (c *Client) Endpoint(ctx context.Context, id string) (contract.Endpoint, error) {
	all, err := All(ctx, c.Endpoints)
	if err != nil {
		return contract.Endpoint{}, err
	}
	for _, e := range all {
		if e.ID == id {
			return e, nil
		}
	}
	return contract.Endpoint{}, &contract.Error{Status: http.StatusNotFound, Code: contract.CodeNotFound,
		Message: "no endpoint " + strconv.Quote(id) + " in this key's project", Fields: map[string]string{}}
}

// All reads every page of a list (Client.Inboxes, Client.Endpoints), in
// the list's order.
func All[T any](ctx context.Context, list func(context.Context, Page) (contract.List[T], error)) ([]T, error) {
	return contract.All(func(before string) ([]T, string, error) {
		l, err := list(ctx, Page{Before: before, Limit: contract.MaxLimit})
		return l.Items, l.Next, err
	})
}

// MessageQuery filters and pages GET /inboxes/{id}/messages. Zero fields
// are left out.
type MessageQuery struct {
	To, From, Subject string
	// Q is a full-text search (SPEC §16): words ANDed, "quoted phrases".
	Q string
	// Since keeps captures received strictly after it.
	Since time.Time
	// Wait holds an empty answer open until a match arrives, up to 30 s;
	// it is rounded up to whole seconds.
	Wait          time.Duration
	Before, After string
	Limit         int
}

// Messages lists captured messages of an inbox, newest first.
func (c *Client) Messages(ctx context.Context, inboxID string, q MessageQuery) (contract.List[contract.MessageSummary], error) {
	v := Page{Before: q.Before, After: q.After, Limit: q.Limit}.values()
	setNonEmpty(v, "to", q.To)
	setNonEmpty(v, "from", q.From)
	setNonEmpty(v, "subject", q.Subject)
	setNonEmpty(v, "q", q.Q)
	setTime(v, q.Since)
	setWait(v, q.Wait)
	var out contract.List[contract.MessageSummary]
	err := c.getJSON(ctx, "/inboxes/"+url.PathEscape(inboxID)+"/messages", v, &out, q.Wait)
	return out, err
}

// Message fetches one message: headers, bodies, links, attachments.
func (c *Client) Message(ctx context.Context, id string) (contract.Message, error) {
	var out contract.Message
	err := c.getJSON(ctx, "/messages/"+url.PathEscape(id), nil, &out, 0)
	return out, err
}

// MessageJSON fetches one message as the API wrote it, every field kept,
// for a caller that passes it on whole.
func (c *Client) MessageJSON(ctx context.Context, id string) (json.RawMessage, error) {
	var out json.RawMessage
	err := c.getJSON(ctx, "/messages/"+url.PathEscape(id), nil, &out, 0)
	return out, err
}

// LinkQuery filters GET /messages/{id}/links; zero fields are left out.
type LinkQuery struct {
	// Match keeps links whose URL contains it, case-insensitively.
	Match string
	// Kind keeps links of one kind (contract.LinkVerify, …).
	Kind string
}

// MessageLinks lists the links of a message that q keeps, in document
// order, and says whether the message had more links than it keeps.
func (c *Client) MessageLinks(ctx context.Context, id string, q LinkQuery) (contract.LinkList, error) {
	v := url.Values{}
	setNonEmpty(v, "match", q.Match)
	setNonEmpty(v, "kind", q.Kind)
	var out contract.LinkList
	err := c.getJSON(ctx, "/messages/"+url.PathEscape(id)+"/links", v, &out, 0)
	return out, err
}

// MessageRaw fetches a message byte for byte, as it was received.
func (c *Client) MessageRaw(ctx context.Context, id string) ([]byte, error) {
	b, _, err := c.getBytes(ctx, "/messages/"+url.PathEscape(id)+"/raw")
	return b, err
}

// AttachmentData fetches the bytes of one attachment of a message and the
// content type the server gives them.
func (c *Client) AttachmentData(ctx context.Context, messageID, attachmentID string) ([]byte, string, error) {
	b, h, err := c.getBytes(ctx, "/messages/"+url.PathEscape(messageID)+"/attachments/"+url.PathEscape(attachmentID))
	if err != nil {
		return nil, "", err
	}
	return b, h.Get("Content-Type"), nil
}

// DeleteMessage deletes one captured message.
func (c *Client) DeleteMessage(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/messages/"+url.PathEscape(id), nil, nil, nil, 0)
}

// RequestQuery filters and pages GET /endpoints/{id}/requests. Zero fields
// are left out.
type RequestQuery struct {
	Method string
	// Path keeps requests whose captured path starts with it.
	Path string
	// Q is a full-text search (SPEC §16) over path, query, header values
	// and UTF-8 body.
	Q             string
	Since         time.Time
	Wait          time.Duration
	Before, After string
	Limit         int
}

// Requests lists captured requests of an endpoint, newest first.
func (c *Client) Requests(ctx context.Context, endpointID string, q RequestQuery) (contract.List[contract.RequestSummary], error) {
	v := Page{Before: q.Before, After: q.After, Limit: q.Limit}.values()
	setNonEmpty(v, "method", q.Method)
	setNonEmpty(v, "path", q.Path)
	setNonEmpty(v, "q", q.Q)
	setTime(v, q.Since)
	setWait(v, q.Wait)
	var out contract.List[contract.RequestSummary]
	err := c.getJSON(ctx, "/endpoints/"+url.PathEscape(endpointID)+"/requests", v, &out, q.Wait)
	return out, err
}

// Request fetches one captured request with its body and deliveries.
func (c *Client) Request(ctx context.Context, id string) (contract.Request, error) {
	var out contract.Request
	err := c.getJSON(ctx, "/requests/"+url.PathEscape(id), nil, &out, 0)
	return out, err
}

// RequestJSON fetches one captured request as the API wrote it, every
// field kept.
func (c *Client) RequestJSON(ctx context.Context, id string) (json.RawMessage, error) {
	var out json.RawMessage
	err := c.getJSON(ctx, "/requests/"+url.PathEscape(id), nil, &out, 0)
	return out, err
}

// Replay sends a captured request to its endpoint's saved target, changed
// by edits (nil: as captured).
func (c *Client) Replay(ctx context.Context, id string, edits *contract.ReplayEdits) (contract.Replay, error) {
	var body any
	if edits != nil {
		body = edits
	}
	var out contract.Replay
	// The server waits up to 10 s for the target on top of its own work.
	err := c.call(ctx, http.MethodPost, "/requests/"+url.PathEscape(id)+"/replay", nil, body, &out, 10*time.Second)
	return out, err
}

// RecordDelivery adds a forward delivery to a request's history.
func (c *Client) RecordDelivery(ctx context.Context, id string, r contract.DeliveryReport) (contract.Delivery, error) {
	var out contract.Delivery
	err := c.call(ctx, http.MethodPost, "/requests/"+url.PathEscape(id)+"/deliveries", nil, r, &out, 0)
	return out, err
}

// DeleteRequest deletes one captured request.
func (c *Client) DeleteRequest(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/requests/"+url.PathEscape(id), nil, nil, nil, 0)
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

func (c *Client) getJSON(ctx context.Context, path string, q url.Values, out any, extra time.Duration) error {
	return c.call(ctx, http.MethodGet, path, q, nil, out, extra)
}

// call sends one call with in as its JSON body (nil: none) and decodes a
// 2xx answer into out (nil: ignore it). extra lengthens the default call
// timeout for calls that may hold.
func (c *Client) call(ctx context.Context, method, path string, q url.Values, in, out any, extra time.Duration) error {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		body = b
	}
	b, _, err := c.do(ctx, method, path, q, body, extra)
	if err != nil || out == nil {
		return err
	}
	if len(b) == 0 {
		// Every answer with a body to decode has one; only a server going
		// away mid-answer sends nothing.
		return &UnreachableError{URL: c.base, Err: errors.New("the API sent an empty answer")}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: answer is not the expected JSON: %w", method, path, err)
	}
	return nil
}

// getBytes fetches a route that answers with something other than JSON;
// errors still come as the API's envelope.
func (c *Client) getBytes(ctx context.Context, path string) ([]byte, http.Header, error) {
	return c.do(ctx, http.MethodGet, path, nil, nil, 0)
}

// do sends one call and returns the body and headers of a 2xx answer.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body []byte, extra time.Duration) ([]byte, http.Header, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	callCtx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, callTimeout+extra)
		defer cancel()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(callCtx, method, u, rd)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, c.transportError(ctx, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode >= 400 {
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		if err != nil {
			return nil, nil, c.transportError(ctx, err)
		}
		return nil, nil, contract.DecodeError(resp.StatusCode, resp.Header, b)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, c.transportError(ctx, err)
	}
	return b, resp.Header, nil
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
