// Package replay sends a captured webhook request again, with edits, to its
// endpoint's saved target, and records the delivery in the request's
// history. The read API's POST /requests/{id}/replay and the web interface
// both replay through it, so a replay behaves the same wherever it starts.
package replay

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/server/api/resend"
	"github.com/capturedev/capture/server/weburl"
	"github.com/capturedev/capture/store"
)

const (
	// Timeout bounds one replay: connecting, sending and reading the answer.
	Timeout = 10 * time.Second
	// MaxResponse bounds the target's response body kept in the result.
	MaxResponse = 64 << 10
)

// Store is what a replay needs from the database.
type Store interface {
	Request(ctx context.Context, projectID, id string) (store.Request, error)
	Endpoint(ctx context.Context, projectID, id string) (store.Endpoint, error)
	AddDelivery(ctx context.Context, projectID, requestID string, d store.NewDelivery) (store.Delivery, error)
}

var _ Store = (*store.Store)(nil)

// Replayer replays captured requests of one store.
type Replayer struct {
	store  Store
	client *http.Client
}

// New returns a Replayer over st that sends with client; nil means a
// client with Timeout that follows no redirects and adds nothing to what
// it sends.
func New(st Store, client *http.Client) *Replayer {
	if client == nil {
		client = &http.Client{
			Transport: resend.Transport(http.ProxyFromEnvironment),
			Timeout:   Timeout,
			// A replay reports what the target answered, redirects included.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return &Replayer{store: st, client: client}
}

// Sent is the request a replay sent.
type Sent struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte
	// url is URL as it is sent: its path byte for byte.
	url *url.URL
	// path and rawQuery are the captured ones, edited, to join to the
	// target's.
	path, rawQuery string
	// lengthWhenEmpty: the capture carried a Content-Length, which an
	// empty body is then sent with too (and only then).
	lengthWhenEmpty bool
}

// Response is what the target answered.
type Response struct {
	Status int
	Header http.Header
	// Body is cut at MaxResponse bytes (Truncated), and then at a UTF-8
	// character boundary when it is text.
	Body      []byte
	Truncated bool
}

// Result is one replay: the delivery recorded, what was sent, and what the
// target answered (nil when it did not answer; the delivery says why).
type Result struct {
	Delivery store.Delivery
	Sent     Sent
	Response *Response
}

// Replay sends request id of the project to its endpoint's saved target,
// changed by edits, and records the delivery. The delivery is recorded
// whatever the target did, also when ctx ends meanwhile. A *contract.Error
// says what the caller must fix (no_target, invalid edits); store errors
// come back as they are. A request deleted while the replay was in flight
// is store.ErrNotFound, saying what was sent and what the target answered.
func (r *Replayer) Replay(ctx context.Context, projectID, id string, edits contract.ReplayEdits) (Result, error) {
	req, err := r.store.Request(ctx, projectID, id)
	if err != nil {
		return Result{}, err
	}
	endpoint, err := r.store.Endpoint(ctx, projectID, req.EndpointID)
	if err != nil {
		return Result{}, err
	}
	// Bad edits are told first, so that a caller without a target yet
	// does not fix one thing only to meet the next.
	out, err := build(req, edits)
	if err != nil {
		return Result{}, err
	}
	if endpoint.TargetURL == nil {
		return Result{}, contract.Errorf(contract.CodeNoTarget,
			"endpoint %s has no saved target; set one with `capture endpoint set %s --target URL`", endpoint.ID, endpoint.ID)
	}
	base, err := url.Parse(*endpoint.TargetURL)
	if err != nil {
		// Saved targets are checked when saved; one that no longer parses
		// is the user's to fix.
		return Result{}, contract.Errorf(contract.CodeNoTarget, "the saved target %q is not a URL: %v", *endpoint.TargetURL, err)
	}
	out.url, out.URL = resend.Join(base, out.path, out.rawQuery)
	// Reported as a URI (a raw request line may hold a space or UTF-8
	// that the wire gets byte for byte).
	out.URL = weburl.Escape(out.URL)

	res := Result{Sent: *out}
	// The history keeps what fits the delivery caps; the answer has it all.
	nd := store.NewDelivery{Kind: store.DeliveryReplay, TargetURL: contract.Clip(out.URL, contract.MaxDeliveryTargetURL)}
	start := time.Now()
	resp, sendErr := r.send(ctx, out)
	nd.Duration = time.Since(start)
	if sendErr != nil {
		msg := contract.Clip(sendErr.Error(), contract.MaxDeliveryError)
		nd.Error = &msg
	} else {
		status := resp.Status
		nd.ResponseStatus = &status
		res.Response = resp
	}
	res.Delivery, err = r.store.AddDelivery(context.WithoutCancel(ctx), projectID, req.ID, nd)
	if errors.Is(err, store.ErrNotFound) {
		return Result{}, unrecorded(req.ID, out, nd)
	}
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// unrecorded is the error of a replay whose request was deleted (or its
// endpoint) while it was in flight. It is still not_found, as the request
// is, and nothing is answered as created, as nothing was recorded; but it
// says that the replay was sent and what came of it, so that the caller
// neither takes it for a replay that never went out nor sends it again.
func unrecorded(requestID string, out *Sent, nd store.NewDelivery) error {
	outcome := "it got no answer"
	if nd.ResponseStatus != nil {
		outcome = fmt.Sprintf("the target answered %d", *nd.ResponseStatus)
	} else if nd.Error != nil {
		outcome += " (" + *nd.Error + ")"
	}
	return fmt.Errorf("%w: request %q was deleted while its replay was in flight: the replay was sent (%s %s) and %s, "+
		"but with the request gone no delivery history is left to record it in", store.ErrNotFound, requestID, out.Method, out.URL, outcome)
}

// Check reports what Replay would refuse in edits of req, as one
// invalid_parameter error, without sending anything.
func Check(req store.Request, edits contract.ReplayEdits) error {
	_, err := build(req, edits)
	return err
}

// build applies edits to the captured request; every bad edit is named in
// one invalid_parameter error. Where it goes is the caller's to add.
func build(req store.Request, ed contract.ReplayEdits) (*Sent, error) {
	bad := map[string]string{}
	out := &Sent{Method: req.Method, Header: http.Header{}, Body: req.Body}
	path, rawQuery := req.Path, req.Query
	if ed.Method != nil {
		if !store.ValidHeaderName(*ed.Method) {
			bad["method"] = "must be an HTTP method token"
		}
		out.Method = *ed.Method
	}
	if ed.Path != nil {
		if !strings.HasPrefix(*ed.Path, "/") || strings.ContainsAny(*ed.Path, "?# \r\n") {
			bad["path"] = "must start with / and hold no query, fragment or spaces"
		}
		path = *ed.Path
	}
	if ed.Query != nil {
		if strings.ContainsAny(*ed.Query, "# \r\n") {
			bad["query"] = "must be a raw query string without #, spaces or line breaks"
		}
		rawQuery = strings.TrimPrefix(*ed.Query, "?")
	}
	if ed.Body != nil && ed.BodyBase64 != nil {
		bad["body"] = "give body or body_base64, not both"
		bad["body_base64"] = "give body or body_base64, not both"
	} else if ed.Body != nil {
		out.Body = []byte(*ed.Body)
	} else if ed.BodyBase64 != nil {
		b, err := base64.StdEncoding.DecodeString(*ed.BodyBase64)
		if err != nil {
			bad["body_base64"] = "not valid base64: " + err.Error()
		}
		out.Body = b
	}

	captured := http.Header{}
	for _, h := range req.Headers {
		name := http.CanonicalHeaderKey(h.Name)
		captured[name] = append(captured[name], h.Values...)
	}
	out.Header = resend.Header(captured)
	_, out.lengthWhenEmpty = captured["Content-Length"]
	spelled := map[string]string{} // canonical name → the edit's spelling
	for _, name := range slices.Sorted(maps.Keys(ed.Headers)) {
		edit := ed.Headers[name]
		field := "headers." + name
		if !store.ValidHeaderName(name) {
			bad[field] = "not a valid header name"
			continue
		}
		canon := http.CanonicalHeaderKey(name)
		if first, ok := spelled[canon]; ok {
			bad[field] = fmt.Sprintf("the same header as %q (names are not case-sensitive); give it once", first)
			continue
		}
		spelled[canon] = name
		if resend.IsHopByHop(canon) {
			switch canon {
			case "Host":
				bad[field] = "follows the target URL; change the target to change it"
			case "Content-Length":
				bad[field] = "follows the body; it cannot be set"
			default:
				bad[field] = "a hop-by-hop header cannot be set"
			}
			continue
		}
		if !edit.Valid() {
			bad[field] = "must be a string, an array of strings, or null to remove it"
			continue
		}
		if edit.Remove || len(edit.Values) == 0 {
			// A header with no values is no header: [] removes it as
			// null does.
			out.Header.Del(canon)
			continue
		}
		for _, v := range edit.Values {
			if strings.ContainsAny(v, "\r\n\x00") {
				bad[field] = "values must not contain line breaks or NUL"
			}
		}
		out.Header[canon] = edit.Values
	}
	if len(bad) > 0 {
		return nil, contract.Invalid(bad)
	}
	out.path, out.rawQuery = path, rawQuery
	return out, nil
}

func (r *Replayer) send(ctx context.Context, out *Sent) (*Response, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := resend.NewRequest(ctx, out.Method, out.url, out.Header, out.Body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	if len(out.Body) == 0 {
		resend.FrameEmpty(req, out.lengthWhenEmpty)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, sendError(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse+1))
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	res := &Response{Status: resp.StatusCode, Header: resp.Header}
	if len(body) > MaxResponse {
		body, res.Truncated = body[:MaxResponse], true
		// A cut may split a UTF-8 sequence; keep text bodies as text.
		if trimmed := bytes.ToValidUTF8(body, nil); len(body)-len(trimmed) <= 3 {
			body = trimmed
		}
	}
	res.Body = body
	return res, nil
}

// sendError says what came of a request the target never answered, as a
// person reads it: net/http's own wording names the method as Go spells
// it ("Patch") and the URL as the request was built, not as sent.
func sendError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %s", Timeout)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("the target closed the connection without an answer")
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
