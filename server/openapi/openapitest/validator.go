// Package openapitest checks real HTTP exchanges against the read API's
// OpenAPI document, so that tests prove the document and the server (and
// every client) agree. Only tests import it: the validator and its
// dependencies stay out of the binary.
package openapitest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/capturedev/capture/server/openapi"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Validator checks real HTTP exchanges against openapi.Document.
//
// It is safe for concurrent use.
type Validator struct {
	doc    *openapi3.T
	server *openapi3.Server
	base   string // path prefix of every route, from the document's server URL
	routes []route
	// methodNotAllowed documents the answer to a documented path called with
	// an undocumented method, which no operation can declare.
	methodNotAllowed *openapi3.ResponseRef
}

// route is one path template of the document, split into segments.
type route struct {
	template string
	segments []string
	params   int
	item     *openapi3.PathItem
}

// NewValidator loads and validates openapi.Document.
func NewValidator() (*Validator, error) {
	ctx := context.Background()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openapi.Document)
	if err != nil {
		return nil, fmt.Errorf("load openapi document: %w", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("openapi document: version %q, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("validate openapi document: %w", err)
	}
	if len(doc.Servers) != 1 {
		return nil, fmt.Errorf("openapi document: %d servers, want 1", len(doc.Servers))
	}
	v := &Validator{
		doc:    doc,
		server: doc.Servers[0],
		base:   strings.TrimSuffix(doc.Servers[0].URL, "/"),
	}
	if doc.Components != nil {
		v.methodNotAllowed = doc.Components.Responses["MethodNotAllowed"]
	}
	if v.methodNotAllowed == nil {
		return nil, errors.New("openapi document: no MethodNotAllowed response")
	}
	for template, item := range doc.Paths.Map() {
		segments := strings.Split(strings.TrimPrefix(template, "/"), "/")
		r := route{template: template, segments: segments, item: item}
		for _, s := range segments {
			if isParam(s) {
				r.params++
			}
		}
		v.routes = append(v.routes, r)
	}
	// A template with fewer parameters is more specific; the template breaks
	// ties so that matching does not depend on map order.
	slices.SortFunc(v.routes, func(a, b route) int {
		return cmp.Or(cmp.Compare(a.params, b.params), strings.Compare(a.template, b.template))
	})
	return v, nil
}

// Check validates that the request (path under /api/v1, e.g.
// "/api/v1/me?x=1") matches a documented operation and that the response
// (status, header, body) matches its documented response; it returns a
// descriptive error otherwise.
//
// The request itself (query parameters, undocumented ones included, the
// Authorization header and the body) is validated only when the response is
// a success: a server may answer an invalid request, but only with a
// documented error. The request body is read through req.GetBody, so it is
// checked for requests made with http.NewRequest and skipped for requests
// whose body has been consumed. A documented path called with an
// undocumented method must answer 405 with the MethodNotAllowed response.
//
// A JSON response body is validated against its schema, additional and
// missing properties included. For other media types (raw messages,
// attachments) only the status, the documented headers and the presence of a
// documented Content-Type are checked. A response documented without content
// must have an empty body.
func (v *Validator) Check(req *http.Request, status int, header http.Header, body []byte) error {
	if req == nil || req.URL == nil {
		return errors.New("openapi: nil request")
	}
	name := req.Method + " " + req.URL.RequestURI()
	if err := v.check(req, status, header, body); err != nil {
		return fmt.Errorf("%s → %d: %w", name, status, err)
	}
	return nil
}

func (v *Validator) check(req *http.Request, status int, header http.Header, body []byte) error {
	// Validation must not stop because the exchange's context has ended.
	ctx := context.WithoutCancel(req.Context())

	r, pathParams, err := v.find(req.URL.EscapedPath())
	if err != nil {
		return err
	}
	op := r.item.GetOperation(req.Method)
	// HEAD is no route of the API (SPEC §8): like every method a path does
	// not document, it must be answered 405; a reply to HEAD has no body.
	head := req.Method == http.MethodHead
	if head && len(body) != 0 {
		return fmt.Errorf("HEAD answered with a body of %d bytes", len(body))
	}
	if op == nil {
		if status != http.StatusMethodNotAllowed {
			return fmt.Errorf("method %s is not documented for %s (documented: %s), so the answer must be 405",
				req.Method, r.template, strings.Join(methods(r.item), ", "))
		}
		op = &openapi3.Operation{
			Responses: openapi3.NewResponses(openapi3.WithStatus(http.StatusMethodNotAllowed, v.methodNotAllowed)),
		}
	}
	rt := &routers.Route{
		Spec:      v.doc,
		Server:    v.server,
		Path:      r.template,
		PathItem:  r.item,
		Method:    req.Method,
		Operation: op,
	}

	input := &openapi3filter.RequestValidationInput{
		Request:    req,
		PathParams: pathParams,
		Route:      rt,
		Options:    newOptions(),
	}
	input.Options.AuthenticationFunc = checkBearer
	if status >= 200 && status < 300 {
		if err := v.checkRequest(ctx, input); err != nil {
			return err
		}
	}

	if op.Responses.Status(status) == nil && op.Responses.Default() == nil {
		return fmt.Errorf("status %d is not documented for %s %s (documented: %s)",
			status, req.Method, r.template, strings.Join(statuses(op), ", "))
	}
	resp := op.Responses.Status(status)
	if resp == nil {
		resp = op.Responses.Default()
	}
	content := resp.Value.Content
	jsonBody := slices.ContainsFunc(mediaTypes(content), isJSON)

	respOpts := newOptions()
	respOpts.IncludeResponseStatus = true
	respOpts.ExcludeResponseBody = !jsonBody || head
	err = openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: input,
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                respOpts,
	})
	if err != nil {
		return fmt.Errorf("response: %w", err)
	}
	if jsonBody || head {
		return nil
	}
	if len(content) == 0 {
		if len(body) != 0 {
			return fmt.Errorf("response: documented without a body, got %d bytes", len(body))
		}
		return nil
	}
	ct := header.Get("Content-Type")
	if ct == "" {
		return fmt.Errorf("response: no Content-Type (documented: %s)", strings.Join(mediaTypes(content), ", "))
	}
	if _, _, err := mime.ParseMediaType(ct); err != nil {
		return fmt.Errorf("response: Content-Type %q: %w", ct, err)
	}
	if content.Get(ct) == nil {
		return fmt.Errorf("response: Content-Type %q is not documented (documented: %s)",
			ct, strings.Join(mediaTypes(content), ", "))
	}
	return nil
}

// CheckSchema validates a JSON body against the document's component
// schema name: the answers of the capture listener, which lives outside
// /api/v1 but whose shapes the document defines (CaptureReceipt, Error).
func (v *Validator) CheckSchema(name string, body []byte) error {
	ref := v.doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("openapi: no schema %q in the document", name)
	}
	var value any
	if err := json.Unmarshal(body, &value); err != nil {
		return fmt.Errorf("%s: decode %q: %w", name, body, err)
	}
	err := ref.Value.VisitJSON(value, openapi3.MultiErrors(), openapi3.EnableJSONSchema2020(),
		openapi3.SetSchemaErrorMessageCustomizer(schemaErrorMessage))
	if err != nil {
		return fmt.Errorf("%s: %s: %w", name, body, err)
	}
	return nil
}

// checkRequest validates the request of a successful exchange.
func (v *Validator) checkRequest(ctx context.Context, input *openapi3filter.RequestValidationInput) error {
	req := input.Request
	allowed := make(map[string]bool)
	for _, params := range []openapi3.Parameters{input.Route.PathItem.Parameters, input.Route.Operation.Parameters} {
		for _, p := range params {
			if p.Value != nil && p.Value.In == openapi3.ParameterInQuery {
				allowed[p.Value.Name] = true
			}
		}
	}
	var unknown []string
	for name := range req.URL.Query() {
		if !allowed[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fmt.Errorf("request: undocumented query parameter %s answered with success (want 400)",
			strings.Join(unknown, ", "))
	}

	// The body is validated only when it can be read again: a request that
	// has been sent or served has usually had its body consumed already.
	clone := req.Clone(ctx)
	opts := *input.Options
	switch {
	case req.GetBody != nil:
		b, err := req.GetBody()
		if err != nil {
			return fmt.Errorf("request: read body: %w", err)
		}
		clone.Body = b
	default:
		clone.Body = http.NoBody
		opts.ExcludeRequestBody = true
	}
	defer clone.Body.Close()
	in := *input
	in.Request = clone
	in.Options = &opts
	if err := openapi3filter.ValidateRequest(ctx, &in); err != nil {
		return fmt.Errorf("request answered with success: %w", err)
	}
	return nil
}

func newOptions() *openapi3filter.Options {
	opts := &openapi3filter.Options{MultiError: true}
	opts.WithCustomSchemaErrorFunc(schemaErrorMessage)
	return opts
}

// schemaErrorMessage names the offending location and the reason, leaving
// out the schema and the value, which make the default message unreadable.
func schemaErrorMessage(err *openapi3.SchemaError) string {
	reason := err.Reason
	if reason == "" {
		reason = fmt.Sprintf("does not match %q", err.SchemaField)
	}
	// The JSON Schema 2020-12 validator's reason already lists every failure
	// below it; the origin of other errors (allOf, oneOf) holds the details.
	var verr *jsonschema.ValidationError
	if err.Origin != nil && !errors.As(err, &verr) {
		reason += ": " + err.Origin.Error()
	}
	return fmt.Sprintf("at /%s: %s", strings.Join(err.JSONPointer(), "/"), reason)
}

// find returns the route whose template matches the escaped path, and the
// values of the template's parameters: a slash escaped within a segment
// (%2F) stays in that segment, as it does for the server.
func (v *Validator) find(path string) (route, map[string]string, error) {
	rel, ok := strings.CutPrefix(path, v.base)
	if !ok || !strings.HasPrefix(rel, "/") {
		return route{}, nil, fmt.Errorf("path %q is not under %s", path, v.base)
	}
	segments := strings.Split(strings.TrimPrefix(rel, "/"), "/")
	for i, s := range segments {
		if unescaped, err := url.PathUnescape(s); err == nil {
			segments[i] = unescaped
		}
	}
	for _, r := range v.routes {
		if params, ok := r.match(segments); ok {
			return r, params, nil
		}
	}
	return route{}, nil, fmt.Errorf("path %q is not documented", path)
}

func (r route) match(segments []string) (map[string]string, bool) {
	if len(segments) != len(r.segments) {
		return nil, false
	}
	params := make(map[string]string, r.params)
	for i, s := range r.segments {
		switch {
		case isParam(s):
			if segments[i] == "" {
				return nil, false
			}
			params[s[1:len(s)-1]] = segments[i]
		case s != segments[i]:
			return nil, false
		}
	}
	return params, true
}

func isParam(segment string) bool {
	return len(segment) > 2 && segment[0] == '{' && segment[len(segment)-1] == '}'
}

// checkBearer accepts a request that carries a bearer token; whether the key
// is valid is the server's business, not the document's.
func checkBearer(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	scheme := in.SecurityScheme
	if scheme == nil || scheme.Type != "http" || !strings.EqualFold(scheme.Scheme, "bearer") {
		return fmt.Errorf("unsupported security scheme %q", in.SecuritySchemeName)
	}
	auth := in.RequestValidationInput.Request.Header.Get("Authorization")
	kind, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(kind, "Bearer") || strings.TrimSpace(token) == "" {
		return errors.New("no bearer token in the Authorization header")
	}
	return nil
}

func isJSON(mediaType string) bool {
	base, _, _ := strings.Cut(mediaType, ";")
	base = strings.ToLower(strings.TrimSpace(base))
	return base == "application/json" || strings.HasSuffix(base, "+json")
}

func mediaTypes(content openapi3.Content) []string {
	return slices.Sorted(maps.Keys(content))
}

func methods(item *openapi3.PathItem) []string {
	return slices.Sorted(maps.Keys(item.Operations()))
}

func statuses(op *openapi3.Operation) []string {
	return slices.Sorted(maps.Keys(op.Responses.Map()))
}
