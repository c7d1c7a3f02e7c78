package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/capturedev/capture/store"
)

const (
	replayTimeout = 10 * time.Second
	// maxReplayResponse bounds the target's response body kept in the reply.
	maxReplayResponse = 64 << 10
	maxJSONBody       = 32 << 20
)

// hopByHop headers describe one connection, not the request, so a replay
// never copies them; Host and Content-Length follow the new target and body.
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Host": true, "Content-Length": true,
}

func newReplayClient() *http.Client {
	return &http.Client{
		Timeout: replayTimeout,
		// A replay reports what the target answered, redirects included.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// replayEdits is the optional body of POST /requests/{id}/replay. Each field
// that is present changes the replayed request.
type replayEdits struct {
	Method     *string                    `json:"method"`
	Path       *string                    `json:"path"`
	Query      *string                    `json:"query"`
	Headers    map[string]json.RawMessage `json:"headers"`
	Body       *string                    `json:"body"`
	BodyBase64 *string                    `json:"body_base64"`
}

// decodeJSON reads a strict JSON body: unknown fields and trailing data are
// errors. An empty body leaves v as it is.
func decodeJSON(r *http.Request, v any) *Error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxJSONBody+1))
	if err != nil {
		return errInvalid(map[string]string{"body": "could not read the body: " + err.Error()})
	}
	if len(body) > maxJSONBody {
		return errInvalid(map[string]string{"body": "larger than 32 MiB"})
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		field := "body"
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			field = typeErr.Field
		}
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return errInvalid(map[string]string{strings.Trim(name, `"`): "unknown field"})
		}
		return errInvalid(map[string]string{field: "bad JSON: " + err.Error()})
	}
	if dec.More() {
		return errInvalid(map[string]string{"body": "bad JSON: data after the object"})
	}
	return nil
}

// outgoing is the request a replay sends.
type outgoing struct {
	method string
	url    string
	header http.Header
	body   []byte
}

func buildReplay(req store.Request, target string, ed replayEdits) (*outgoing, *Error) {
	bad := map[string]string{}
	out := &outgoing{method: req.Method, header: http.Header{}, body: req.Body}
	path, rawQuery := req.Path, req.Query
	if ed.Method != nil {
		if !store.ValidHeaderName(*ed.Method) {
			bad["method"] = "must be an HTTP method token"
		}
		out.method = *ed.Method
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
		out.body = []byte(*ed.Body)
	} else if ed.BodyBase64 != nil {
		b, err := base64.StdEncoding.DecodeString(*ed.BodyBase64)
		if err != nil {
			bad["body_base64"] = "not valid base64: " + err.Error()
		}
		out.body = b
	}

	for _, h := range req.Headers {
		name := http.CanonicalHeaderKey(h.Name)
		if !hopByHop[name] {
			out.header[name] = append(out.header[name], h.Values...)
		}
	}
	for name, raw := range ed.Headers {
		field := "headers." + name
		if !store.ValidHeaderName(name) {
			bad[field] = "not a valid header name"
			continue
		}
		canon := http.CanonicalHeaderKey(name)
		if hopByHop[canon] {
			bad[field] = "a hop-by-hop header cannot be set"
			continue
		}
		values, ok := headerEdit(raw)
		if !ok {
			bad[field] = "must be a string, an array of strings, or null to remove it"
			continue
		}
		if values == nil {
			out.header.Del(canon)
			continue
		}
		for _, v := range values {
			if strings.ContainsAny(v, "\r\n\x00") {
				bad[field] = "values must not contain line breaks or NUL"
			}
		}
		out.header[canon] = values
	}
	if len(bad) > 0 {
		return nil, errInvalid(bad)
	}
	out.url = strings.TrimSuffix(target, "/") + path
	if rawQuery != "" {
		out.url += "?" + rawQuery
	}
	return out, nil
}

// headerEdit reads one header edit: a string, an array of strings, or null
// (nil values: remove the header).
func headerEdit(raw json.RawMessage) ([]string, bool) {
	if string(bytes.TrimSpace(raw)) == "null" {
		return nil, true
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, true
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && many != nil {
		return many, true
	}
	return nil, false
}

type replayJSON struct {
	deliveryJSON
	Request struct {
		Method  string      `json:"method"`
		URL     string      `json:"url"`
		Headers http.Header `json:"headers"`
	} `json:"request"`
	Response *replayResponseJSON `json:"response"`
}

type replayResponseJSON struct {
	Status     int         `json:"status"`
	Headers    http.Header `json:"headers"`
	Body       *string     `json:"body"`
	BodyBase64 *string     `json:"body_base64"`
	Truncated  bool        `json:"truncated"`
}

func (a *API) replayRequest(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller) {
	if e := parseQuery(r).err(); e != nil {
		writeError(w, e)
		return
	}
	var edits replayEdits
	if e := decodeJSON(r, &edits); e != nil {
		writeError(w, e)
		return
	}
	req, err := a.store.Request(r.Context(), c.project.ID, ps.ByName("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	endpoint, err := a.store.Endpoint(r.Context(), c.project.ID, req.EndpointID)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if endpoint.TargetURL == nil {
		writeError(w, &Error{Status: http.StatusConflict, Code: "no_target",
			Message: "endpoint " + endpoint.ID + " has no saved target; set one with `capture endpoint set " + endpoint.ID + " --target URL`"})
		return
	}
	out, e := buildReplay(req, *endpoint.TargetURL, edits)
	if e != nil {
		writeError(w, e)
		return
	}

	result := replayJSON{}
	result.Request.Method, result.Request.URL, result.Request.Headers = out.method, out.url, out.header
	nd := store.NewDelivery{Kind: store.DeliveryReplay, TargetURL: out.url}
	start := time.Now()
	resp, sendErr := a.send(r.Context(), out)
	nd.Duration = time.Since(start)
	if sendErr != nil {
		msg := sendErr.Error()
		nd.Error = &msg
	} else {
		status := resp.Status
		nd.ResponseStatus = &status
		result.Response = resp
	}
	d, err := a.store.AddDelivery(context.WithoutCancel(r.Context()), c.project.ID, req.ID, nd)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	result.deliveryJSON = renderDelivery(d)
	writeJSON(w, http.StatusCreated, result)
}

func (a *API) send(ctx context.Context, out *outgoing) (*replayResponseJSON, error) {
	ctx, cancel := context.WithTimeout(ctx, replayTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, out.method, out.url, bytes.NewReader(out.body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header = out.header.Clone()
	if len(out.body) == 0 {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	resp, err := a.replay.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReplayResponse+1))
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	res := &replayResponseJSON{Status: resp.StatusCode, Headers: resp.Header}
	if len(body) > maxReplayResponse {
		body, res.Truncated = body[:maxReplayResponse], true
	}
	res.Body, res.BodyBase64 = splitBody(body)
	if res.Truncated && res.Body == nil {
		// A cut may split a UTF-8 sequence; keep text bodies as text.
		trimmed := bytes.ToValidUTF8(body, nil)
		if len(body)-len(trimmed) <= 3 {
			res.Body, res.BodyBase64 = splitBody(trimmed)
		}
	}
	return res, nil
}

// deliveryReport is the body of POST /requests/{id}/deliveries.
type deliveryReport struct {
	TargetURL      *string `json:"target_url"`
	ResponseStatus *int    `json:"response_status"`
	Error          *string `json:"error"`
	DurationMS     *int64  `json:"duration_ms"`
}

func (a *API) recordDelivery(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller) {
	if e := parseQuery(r).err(); e != nil {
		writeError(w, e)
		return
	}
	var rep deliveryReport
	if e := decodeJSON(r, &rep); e != nil {
		writeError(w, e)
		return
	}
	bad := map[string]string{}
	if rep.TargetURL == nil || *rep.TargetURL == "" {
		bad["target_url"] = "required"
	} else if err := store.ValidateTarget(*rep.TargetURL); err != nil {
		bad["target_url"] = "must be an absolute http:// or https:// URL"
	}
	if rep.DurationMS == nil || *rep.DurationMS < 0 {
		bad["duration_ms"] = "required, a whole number of milliseconds ≥ 0"
	}
	if rep.ResponseStatus != nil && (*rep.ResponseStatus < 100 || *rep.ResponseStatus > 599) {
		bad["response_status"] = "must be an HTTP status from 100 to 599"
	}
	if rep.ResponseStatus == nil && (rep.Error == nil || *rep.Error == "") {
		bad["error"] = "required when there is no response_status"
	}
	if len(bad) > 0 {
		writeError(w, errInvalid(bad))
		return
	}
	d, err := a.store.AddDelivery(r.Context(), c.project.ID, ps.ByName("id"), store.NewDelivery{
		Kind: store.DeliveryForward, TargetURL: *rep.TargetURL, ResponseStatus: rep.ResponseStatus,
		Error: rep.Error, Duration: time.Duration(*rep.DurationMS) * time.Millisecond,
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, renderDelivery(d))
}
