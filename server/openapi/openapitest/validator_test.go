package openapitest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/server/openapi"
	"github.com/getkin/kin-openapi/openapi3"
)

func newValidator(t *testing.T) *Validator {
	t.Helper()
	v, err := NewValidator()
	if err != nil {
		t.Fatalf("NewValidator: %v", err)
	}
	return v
}

// The document's error codes, and the codes each error response allows,
// are those of the contract's table with its statuses.
func TestErrorCodesMatchContract(t *testing.T) {
	doc := newValidator(t).doc
	codeSchema := doc.Components.Schemas["Error"].Value.Properties["error"].Value.Properties["code"].Value
	var documented []string
	for _, c := range codeSchema.Enum {
		documented = append(documented, c.(string))
	}
	spec := []string{contract.CodeInvalidParameter, contract.CodeInvalidCursor, contract.CodeUnauthorized,
		contract.CodeNotFound, contract.CodeMethodNotAllowed, contract.CodeNoTarget, contract.CodeQuotaExceeded,
		contract.CodeRateLimited, contract.CodeTooManyWaits, contract.CodeInternal, contract.CodeUnavailable}
	slices.Sort(documented)
	slices.Sort(spec)
	if !slices.Equal(documented, spec) {
		t.Errorf("Error.code enum = %v, want %v", documented, spec)
	}
	statuses := map[string]int{"BadRequest": 400, "Unauthorized": 401, "Forbidden": 403, "NotFound": 404,
		"MethodNotAllowed": 405, "Conflict": 409, "PayloadTooLarge": 413, "RequestHeaderFieldsTooLarge": 431, "TooManyRequests": 429,
		"Internal": 500, "Unavailable": 503}
	for name, resp := range doc.Components.Responses {
		mt := resp.Value.Content.Get("application/json")
		if mt == nil {
			continue
		}
		for _, part := range mt.Schema.Value.AllOf {
			if part.Ref != "" || part.Value.Properties["error"] == nil {
				continue
			}
			for _, c := range part.Value.Properties["error"].Value.Properties["code"].Value.Enum {
				code, status := c.(string), statuses[name]
				want := contract.StatusOf(code)
				switch {
				case code == contract.CodeQuotaExceeded && status == http.StatusRequestEntityTooLarge:
					want = status // an oversize capture
				case code == contract.CodeInvalidParameter && status == http.StatusRequestHeaderFieldsTooLarge:
					want = status // header fields past what the server reads
				}
				if status != want {
					t.Errorf("response %s (%d) allows %s, which the contract answers with %d", name, status, code, want)
				}
			}
		}
	}
}

func TestDocumentLoads(t *testing.T) {
	v := newValidator(t)
	doc := v.doc
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	if len(doc.Servers) != 1 || doc.Servers[0].URL != "/api/v1" {
		t.Errorf("servers = %v, want one at /api/v1", doc.Servers)
	}
	scheme := doc.Components.SecuritySchemes["bearer"]
	if scheme == nil || scheme.Value.Type != "http" || scheme.Value.Scheme != "bearer" {
		t.Fatalf("security scheme bearer = %+v, want http bearer", scheme)
	}
	if len(doc.Security) != 1 || doc.Security[0]["bearer"] == nil {
		t.Errorf("global security = %v, want bearer", doc.Security)
	}
	schema := doc.Paths.Value("/schema/").Get
	if schema.Security == nil || len(*schema.Security) != 0 {
		t.Errorf("GET /schema/ security = %v, want []", schema.Security)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Summary == "" || op.Description == "" || op.OperationID == "" {
				t.Errorf("%s %s: summary, description and operationId are required", method, path)
			}
		}
	}
}

// routes lists every operation of the read API with its success status.
var routes = []struct {
	method, path string
	status       int
}{
	{"GET", "/me", 200},
	{"GET", "/inboxes", 200},
	{"GET", "/inboxes/{id}/messages", 200},
	{"DELETE", "/inboxes/{id}/messages", 204},
	{"GET", "/messages/{id}", 200},
	{"DELETE", "/messages/{id}", 204},
	{"GET", "/messages/{id}/links", 200},
	{"GET", "/messages/{id}/raw", 200},
	{"GET", "/messages/{id}/attachments/{att_id}", 200},
	{"GET", "/endpoints", 200},
	{"GET", "/endpoints/{id}/requests", 200},
	{"DELETE", "/endpoints/{id}/requests", 204},
	{"GET", "/requests/{id}", 200},
	{"DELETE", "/requests/{id}", 204},
	{"POST", "/requests/{id}/replay", 201},
	{"POST", "/requests/{id}/deliveries", 201},
	{"GET", "/schema/", 200},
}

func TestEveryRoute(t *testing.T) {
	doc := newValidator(t).doc
	want := make(map[string]bool)
	for _, r := range routes {
		want[r.method+" "+r.path] = true
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			item := doc.Paths.Value(r.path)
			if item == nil {
				t.Fatal("path not documented")
			}
			op := item.GetOperation(r.method)
			if op == nil {
				t.Fatal("method not documented")
			}
			if op.Responses.Status(r.status) == nil {
				t.Errorf("status %d not documented", r.status)
			}
			for code, resp := range op.Responses.Map() {
				if code[0] != '2' {
					checkErrorResponse(t, code, resp)
				}
			}
			secured := r.path != "/schema/"
			if got := op.Responses.Status(401) != nil; got != secured {
				t.Errorf("401 documented = %v, want %v", got, secured)
			}
			if got := op.Responses.Status(429) != nil; got != secured {
				t.Errorf("429 documented = %v, want %v", got, secured)
			}
			// Every call that reads the database may find it unable to
			// commit in time, or the server stopping.
			if got := op.Responses.Status(503) != nil; got != secured {
				t.Errorf("503 documented = %v, want %v", got, secured)
			}
			if op.Responses.Status(500) == nil {
				t.Error("500 not documented")
			}
			if strings.Contains(r.path, "{id}") && op.Responses.Status(404) == nil {
				t.Error("404 not documented")
			}
		})
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if !want[method+" "+path] {
				t.Errorf("%s %s is documented but not expected", method, path)
			}
		}
	}
}

func checkErrorResponse(t *testing.T, code string, resp *openapi3.ResponseRef) {
	t.Helper()
	mt := resp.Value.Content.Get("application/json")
	if mt == nil || mt.Schema == nil {
		t.Errorf("%s: no JSON schema", code)
		return
	}
	if !slices.ContainsFunc(mt.Schema.Value.AllOf, func(s *openapi3.SchemaRef) bool {
		return s.Ref == "#/components/schemas/Error"
	}) {
		t.Errorf("%s: does not use the Error schema", code)
	}
	header := map[string]string{"401": "WWW-Authenticate", "429": "Retry-After", "503": "Retry-After"}[code]
	if header == "" {
		return
	}
	h := resp.Value.Headers[header]
	if h == nil || !h.Value.Required {
		t.Errorf("%s: header %s not declared as required", code, header)
	}
	if header == "Retry-After" && !h.Value.Schema.Value.Type.Is("integer") {
		t.Errorf("%s: Retry-After is not an integer", code)
	}
}

func queryParams(op *openapi3.Operation) []string {
	var names []string
	for _, p := range op.Parameters {
		if p.Value.In == openapi3.ParameterInQuery {
			names = append(names, p.Value.Name)
		}
	}
	slices.Sort(names)
	return names
}

func TestQueryParameters(t *testing.T) {
	doc := newValidator(t).doc
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/inboxes", []string{"after", "before", "limit"}},
		{"/endpoints", []string{"after", "before", "limit"}},
		{"/inboxes/{id}/messages", []string{"after", "before", "from", "limit", "q", "since", "subject", "to", "wait"}},
		{"/endpoints/{id}/requests", []string{"after", "before", "limit", "method", "path", "q", "since", "wait"}},
		{"/messages/{id}/links", []string{"kind", "match"}},
		{"/me", nil},
		{"/messages/{id}", nil},
	} {
		got := queryParams(doc.Paths.Value(tc.path).Get)
		if !slices.Equal(got, tc.want) {
			t.Errorf("GET %s query parameters = %v, want %v", tc.path, got, tc.want)
		}
	}
	limit := doc.Components.Parameters["Limit"].Value.Schema.Value
	if *limit.Min != 1 || *limit.Max != 100 || limit.Default != float64(20) {
		t.Errorf("limit = [%v, %v] default %v, want [1, 100] default 20", *limit.Min, *limit.Max, limit.Default)
	}
	wait := doc.Components.Parameters["Wait"].Value.Schema.Value
	if *wait.Min != 0 || *wait.Max != 30 {
		t.Errorf("wait = [%v, %v], want [0, 30]", *wait.Min, *wait.Max)
	}
}

// TestSchemasAreClosed checks that every object schema of the components
// rejects unknown properties and requires all it lists, but for the request
// bodies, whose fields are optional.
func TestSchemasAreClosed(t *testing.T) {
	doc := newValidator(t).doc
	optional := map[string][]string{
		"ReplayRequest":  {},
		"DeliveryReport": {"target_url", "duration_ms"},
	}
	for name, ref := range doc.Components.Schemas {
		var walk func(path string, s *openapi3.SchemaRef)
		walk = func(path string, s *openapi3.SchemaRef) {
			if s == nil || s.Value == nil || (s.Ref != "" && path != name) {
				return
			}
			v := s.Value
			if v.Type.Is("object") && len(v.Properties) > 0 {
				if v.AdditionalProperties.Has == nil || *v.AdditionalProperties.Has {
					t.Errorf("%s: additionalProperties is not false", path)
				}
				props := make([]string, 0, len(v.Properties))
				for p := range v.Properties {
					props = append(props, p)
				}
				want := props
				if req, ok := optional[path]; ok {
					want = req
				}
				if !sameSet(v.Required, want) {
					t.Errorf("%s: required = %v, want %v", path, v.Required, want)
				}
			}
			for p, sub := range v.Properties {
				walk(path+"."+p, sub)
			}
			walk(path+"[]", v.Items)
			for _, sub := range v.OneOf {
				walk(path, sub)
			}
		}
		walk(name, ref)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// exchange is one request and response to check.
type exchange struct {
	name   string
	method string
	target string // under /api/v1
	body   string // request body, JSON
	noAuth bool
	status int
	header http.Header
	resp   []byte
}

func (e exchange) request(t *testing.T) *http.Request {
	t.Helper()
	var req *http.Request
	if e.body != "" {
		// A client request keeps GetBody, so the validator can read the body.
		var err error
		req, err = http.NewRequest(e.method, "http://127.0.0.1:7780"+e.target, strings.NewReader(e.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
	} else {
		req = httptest.NewRequest(e.method, e.target, nil)
	}
	if !e.noAuth {
		req.Header.Set("Authorization", "Bearer cap_0123456789abcdefghijABCDEFGHIJ01")
	}
	return req
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mutate decodes a JSON fixture, lets edit change it and encodes it again.
func mutate(t *testing.T, name string, edit func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(fixture(t, name), &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func obj(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		switch v := m[k].(type) {
		case map[string]any:
			m = v
		case []any:
			m = v[0].(map[string]any)
		}
	}
	return m
}

var (
	jsonHeader = http.Header{"Content-Type": {"application/json"}}
	noHeader   = http.Header{}
)

func errorBody(code string) []byte {
	return []byte(`{"error":{"code":"` + code + `","message":"something","fields":{}}}`)
}

func header(kv ...string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestCheckAccepts(t *testing.T) {
	v := newValidator(t)
	for _, e := range []exchange{
		{name: "me", method: "GET", target: "/api/v1/me", status: 200, header: jsonHeader, resp: fixture(t, "me.json")},
		{name: "me charset", method: "GET", target: "/api/v1/me", status: 200,
			header: header("Content-Type", "application/json; charset=utf-8"), resp: fixture(t, "me.json")},
		{name: "inboxes", method: "GET", target: "/api/v1/inboxes?limit=100&before=inb_3HsQ8nZk1RtY", status: 200,
			header: jsonHeader, resp: fixture(t, "inbox_list.json")},
		{name: "endpoints", method: "GET", target: "/api/v1/endpoints", status: 200, header: jsonHeader,
			resp: fixture(t, "endpoint_list.json")},
		{name: "messages", method: "GET",
			target: "/api/v1/inboxes/inb_3HsQ8nZk1RtY/messages?to=alice&from=shop&subject=Confirm&since=2025-05-04T09:30:00%2B02:00&wait=20&after=msg_A1&limit=5",
			status: 200, header: jsonHeader, resp: fixture(t, "message_list.json")},
		{name: "wait timed out", method: "GET", target: "/api/v1/inboxes/inb_3HsQ8nZk1RtY/messages?wait=1",
			status: 200, header: jsonHeader, resp: []byte(`{"items":[],"next":null}`)},
		{name: "message", method: "GET", target: "/api/v1/messages/msg_Vb7Kq2Lx9PzT4mWc", status: 200,
			header: jsonHeader, resp: fixture(t, "message.json")},
		{name: "message with nulls", method: "GET", target: "/api/v1/messages/msg_Vb7Kq2Lx9PzT4mWc", status: 200,
			header: jsonHeader, resp: mutate(t, "message.json", func(m map[string]any) {
				m["from"], m["date"], m["message_id"] = nil, nil, nil
				obj(m, "body")["text"] = nil
				m["warnings"] = []any{"malformed MIME part"}
			})},
		{name: "links", method: "GET", target: "/api/v1/messages/msg_Vb7Kq2Lx9PzT4mWc/links?match=confirm",
			status: 200, header: jsonHeader, resp: fixture(t, "link_list.json")},
		{name: "links of a kind", method: "GET", target: "/api/v1/messages/msg_Vb7Kq2Lx9PzT4mWc/links?kind=verify&match=CONFIRM",
			status: 200, header: jsonHeader, resp: fixture(t, "link_list.json")},
		{name: "message without codes, links cut", method: "GET", target: "/api/v1/messages/msg_Vb7Kq2Lx9PzT4mWc", status: 200,
			header: jsonHeader, resp: mutate(t, "message.json", func(m map[string]any) {
				m["codes"], m["links_truncated"] = []any{}, true
			})},
		{name: "unknown link kind", method: "GET", target: "/api/v1/messages/msg_Vb7Kq2Lx9PzT4mWc/links?kind=confirm", status: 400,
			header: jsonHeader, resp: []byte(`{"error":{"code":"invalid_parameter","message":"bad","fields":{"kind":"must be one of verify, reset, login, unsubscribe, other"}}}`)},
		{name: "raw", method: "GET", target: "/api/v1/messages/msg_Vb7Kq2Lx9PzT4mWc/raw", status: 200,
			header: http.Header{"Content-Type": {"message/rfc822"}}, resp: []byte("Subject: hi\r\n\r\nhello\r\n")},
		{name: "attachment", method: "GET", target: "/api/v1/messages/msg_Vb7Kq2Lx9PzT4mWc/attachments/att_Qm3Zx8Lk",
			status: 200, header: http.Header{"Content-Type": {"application/pdf"},
				"Content-Disposition": {`attachment; filename="invoice.pdf"`}}, resp: []byte("%PDF-1.7\x00\xff")},
		{name: "delete message", method: "DELETE", target: "/api/v1/messages/msg_Vb7Kq2Lx9PzT4mWc", status: 204,
			header: noHeader},
		{name: "purge inbox", method: "DELETE", target: "/api/v1/inboxes/inb_3HsQ8nZk1RtY/messages", status: 204,
			header: noHeader},
		{name: "requests", method: "GET",
			target: "/api/v1/endpoints/whe_8Yt2PqLm4Zx/requests?method=purge&path=/ci/&since=2025-05-04T09:30:00Z",
			status: 200, header: jsonHeader, resp: fixture(t, "request_list.json")},
		{name: "request", method: "GET", target: "/api/v1/requests/req_Lk2Mx9Qz7Pw", status: 200,
			header: jsonHeader, resp: fixture(t, "request.json")},
		{name: "binary request", method: "GET", target: "/api/v1/requests/req_Lk2Mx9Qz7Pw", status: 200,
			header: jsonHeader, resp: mutate(t, "request.json", func(m map[string]any) {
				m["body"], m["body_base64"] = nil, "/w=="
				m["deliveries"] = []any{}
			})},
		{name: "delete request", method: "DELETE", target: "/api/v1/requests/req_Lk2Mx9Qz7Pw", status: 204,
			header: noHeader},
		{name: "purge endpoint", method: "DELETE", target: "/api/v1/endpoints/whe_8Yt2PqLm4Zx/requests", status: 204,
			header: noHeader},
		{name: "replay as captured", method: "POST", target: "/api/v1/requests/req_Lk2Mx9Qz7Pw/replay", status: 201,
			header: jsonHeader, resp: fixture(t, "replay.json")},
		{name: "replay with edits", method: "POST", target: "/api/v1/requests/req_Lk2Mx9Qz7Pw/replay",
			body:   `{"method":"PUT","path":"/other","query":"","headers":{"X-A":"1","X-B":["1","2"],"X-Signature":null},"body":"{}"}`,
			status: 201, header: jsonHeader, resp: mutate(t, "replay.json", func(m map[string]any) {
				m["status"], m["response_status"], m["error"], m["response"] = "failed", nil, "timeout", nil
			})},
		{name: "replay without target", method: "POST", target: "/api/v1/requests/req_Lk2Mx9Qz7Pw/replay",
			status: 409, header: jsonHeader, resp: errorBody("no_target")},
		{name: "record delivery", method: "POST", target: "/api/v1/requests/req_Lk2Mx9Qz7Pw/deliveries",
			body:   `{"target_url":"http://localhost:3000/ci/run-42/hook","response_status":200,"duration_ms":5}`,
			status: 201, header: jsonHeader, resp: fixture(t, "delivery.json")},
		{name: "schema without key", method: "GET", target: "/api/v1/schema/", noAuth: true, status: 200,
			header: jsonHeader, resp: openapi.Document},
		{name: "unauthorized", method: "GET", target: "/api/v1/me", noAuth: true, status: 401,
			header: header("WWW-Authenticate", "Bearer"), resp: errorBody("unauthorized")},
		{name: "bad parameter", method: "GET", target: "/api/v1/inboxes/inb_3HsQ8nZk1RtY/messages?wait=31", status: 400,
			header: jsonHeader, resp: []byte(`{"error":{"code":"invalid_parameter","message":"bad","fields":{"wait":"at most 30"}}}`)},
		{name: "unknown parameter", method: "GET", target: "/api/v1/me?x=1", status: 400,
			header: jsonHeader, resp: errorBody("invalid_parameter")},
		{name: "invalid cursor", method: "GET", target: "/api/v1/endpoints/whe_8Yt2PqLm4Zx/requests?after=req_gone",
			status: 400, header: jsonHeader, resp: errorBody("invalid_cursor")},
		{name: "not found", method: "GET", target: "/api/v1/messages/msg_nope", status: 404,
			header: jsonHeader, resp: errorBody("not_found")},
		{name: "rate limited", method: "GET", target: "/api/v1/me", status: 429,
			header: header("Retry-After", "2"), resp: errorBody("rate_limited")},
		{name: "too many waits", method: "GET", target: "/api/v1/endpoints/whe_8Yt2PqLm4Zx/requests?wait=20",
			status: 429, header: header("Retry-After", "1"), resp: errorBody("too_many_waits")},
		{name: "internal", method: "GET", target: "/api/v1/requests/req_Lk2Mx9Qz7Pw", status: 500,
			header: jsonHeader, resp: errorBody("internal")},
		{name: "unavailable", method: "GET", target: "/api/v1/inboxes/inb_3HsQ8nZk1RtY/messages?wait=20", status: 503,
			header: header("Retry-After", "5"), resp: errorBody("unavailable")},
		{name: "method not allowed", method: "PUT", target: "/api/v1/me", status: 405,
			header: header("Allow", "GET"), resp: errorBody("method_not_allowed")},
	} {
		t.Run(e.name, func(t *testing.T) {
			if err := v.Check(e.request(t), e.status, e.header, e.resp); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestCheckRejects(t *testing.T) {
	v := newValidator(t)
	for _, tc := range []struct {
		exchange
		want string // in the error
	}{
		{exchange{name: "me missing plan", method: "GET", target: "/api/v1/me", status: 200, header: jsonHeader,
			resp: mutate(t, "me.json", func(m map[string]any) { delete(m, "plan") })}, `"plan" is missing`},
		{exchange{name: "me missing quota", method: "GET", target: "/api/v1/me", status: 200, header: jsonHeader,
			resp: mutate(t, "me.json", func(m map[string]any) { delete(obj(m, "plan", "quotas"), "burst") })},
			`"burst" is missing`},
		{exchange{name: "me extra field", method: "GET", target: "/api/v1/me", status: 200, header: jsonHeader,
			resp: mutate(t, "me.json", func(m map[string]any) { m["account"] = "x" })}, `"account"`},
		{exchange{name: "me bad plan", method: "GET", target: "/api/v1/me", status: 200, header: jsonHeader,
			resp: mutate(t, "me.json", func(m map[string]any) { obj(m, "plan")["name"] = "gold" })}, "/plan/name"},
		{exchange{name: "message missing subject", method: "GET", target: "/api/v1/messages/msg_A1", status: 200,
			header: jsonHeader, resp: mutate(t, "message.json", func(m map[string]any) { delete(m, "subject") })},
			`"subject" is missing`},
		{exchange{name: "message missing warnings", method: "GET", target: "/api/v1/messages/msg_A1", status: 200,
			header: jsonHeader, resp: mutate(t, "message.json", func(m map[string]any) { delete(m, "warnings") })},
			`"warnings" is missing`},
		{exchange{name: "message extra field", method: "GET", target: "/api/v1/messages/msg_A1", status: 200,
			header: jsonHeader, resp: mutate(t, "message.json", func(m map[string]any) { m["raw"] = "x" })}, `"raw"`},
		{exchange{name: "attachment extra field", method: "GET", target: "/api/v1/messages/msg_A1", status: 200,
			header: jsonHeader, resp: mutate(t, "message.json", func(m map[string]any) {
				obj(m, "attachments")["path"] = "/tmp/x"
			})}, `"path"`},
		{exchange{name: "message wrong type", method: "GET", target: "/api/v1/messages/msg_A1", status: 200,
			header: jsonHeader, resp: mutate(t, "message.json", func(m map[string]any) { m["size"] = "2048" })},
			"/size"},
		{exchange{name: "message from as string", method: "GET", target: "/api/v1/messages/msg_A1", status: 200,
			header: jsonHeader, resp: mutate(t, "message.json", func(m map[string]any) { m["from"] = "a@b.test" })},
			"/from"},
		{exchange{name: "message null array", method: "GET", target: "/api/v1/messages/msg_A1", status: 200,
			header: jsonHeader, resp: mutate(t, "message.json", func(m map[string]any) { m["cc"] = nil })}, "/cc"},
		{exchange{name: "time without milliseconds", method: "GET", target: "/api/v1/messages/msg_A1", status: 200,
			header: jsonHeader, resp: mutate(t, "message.json", func(m map[string]any) {
				m["received_at"] = "2025-05-04T09:31:00Z"
			})}, "/received_at"},
		{exchange{name: "time with offset", method: "GET", target: "/api/v1/messages/msg_A1", status: 200,
			header: jsonHeader, resp: mutate(t, "message.json", func(m map[string]any) {
				m["date"] = "2025-05-04T11:31:00.000+02:00"
			})}, "/date"},
		{exchange{name: "wrong id prefix", method: "GET", target: "/api/v1/messages/msg_A1", status: 200,
			header: jsonHeader, resp: mutate(t, "message.json", func(m map[string]any) { m["id"] = "req_A1" })},
			"/id"},
		{exchange{name: "message missing codes", method: "GET", target: "/api/v1/messages/msg_A1", status: 200,
			header: jsonHeader, resp: mutate(t, "message.json", func(m map[string]any) { delete(m, "codes") })},
			`"codes" is missing`},
		{exchange{name: "message null codes", method: "GET", target: "/api/v1/messages/msg_A1", status: 200,
			header: jsonHeader, resp: mutate(t, "message.json", func(m map[string]any) { m["codes"] = nil })}, "/codes"},
		{exchange{name: "message missing links_truncated", method: "GET", target: "/api/v1/messages/msg_A1", status: 200,
			header: jsonHeader, resp: mutate(t, "message.json", func(m map[string]any) { delete(m, "links_truncated") })},
			`"links_truncated" is missing`},
		{exchange{name: "code without context", method: "GET", target: "/api/v1/messages/msg_A1", status: 200,
			header: jsonHeader, resp: mutate(t, "message.json", func(m map[string]any) {
				delete(obj(m, "codes"), "context")
			})}, `"context" is missing`},
		{exchange{name: "link missing kind", method: "GET", target: "/api/v1/messages/msg_A1/links", status: 200,
			header: jsonHeader, resp: mutate(t, "link_list.json", func(m map[string]any) {
				delete(obj(m, "items"), "kind")
			})}, `"kind" is missing`},
		{exchange{name: "link of an unknown kind", method: "GET", target: "/api/v1/messages/msg_A1", status: 200,
			header: jsonHeader, resp: mutate(t, "message.json", func(m map[string]any) {
				obj(m, "links")["kind"] = "confirm"
			})}, "/links/0/kind"},
		{exchange{name: "unknown link kind answered", method: "GET", target: "/api/v1/messages/msg_A1/links?kind=confirm",
			status: 200, header: jsonHeader, resp: fixture(t, "link_list.json")}, "kind"},
		{exchange{name: "link not http", method: "GET", target: "/api/v1/messages/msg_A1/links", status: 200,
			header: jsonHeader, resp: mutate(t, "link_list.json", func(m map[string]any) {
				obj(m, "items")["url"] = "javascript:alert(1)"
			})}, "/items/0/url"},
		{exchange{name: "request missing deliveries", method: "GET", target: "/api/v1/requests/req_A1", status: 200,
			header: jsonHeader, resp: mutate(t, "request.json", func(m map[string]any) { delete(m, "deliveries") })},
			`"deliveries" is missing`},
		{exchange{name: "delivery wrong type", method: "GET", target: "/api/v1/requests/req_A1", status: 200,
			header: jsonHeader, resp: mutate(t, "request.json", func(m map[string]any) {
				obj(m, "deliveries")["duration_ms"] = 1.5
			})}, "/deliveries/0/duration_ms"},
		{exchange{name: "list item missing last_delivery", method: "GET", target: "/api/v1/endpoints/whe_A1/requests", status: 200,
			header: jsonHeader, resp: mutate(t, "request_list.json", func(m map[string]any) {
				delete(obj(m, "items"), "last_delivery")
			})}, `"last_delivery" is missing`},
		{exchange{name: "last_delivery of an unknown kind", method: "GET", target: "/api/v1/requests/req_A1", status: 200,
			header: jsonHeader, resp: mutate(t, "request.json", func(m map[string]any) {
				m["last_delivery"].(map[string]any)["kind"] = "pigeon"
			})}, "/last_delivery"},
		{exchange{name: "request headers as strings", method: "GET", target: "/api/v1/requests/req_A1", status: 200,
			header: jsonHeader, resp: mutate(t, "request.json", func(m map[string]any) {
				m["headers"] = map[string]any{"Content-Type": "application/json"}
			})}, "/headers"},
		{exchange{name: "list missing next", method: "GET", target: "/api/v1/inboxes", status: 200,
			header: jsonHeader, resp: mutate(t, "inbox_list.json", func(m map[string]any) { delete(m, "next") })},
			`"next" is missing`},
		{exchange{name: "list item extra field", method: "GET", target: "/api/v1/endpoints/whe_A1/requests",
			status: 200, header: jsonHeader, resp: mutate(t, "request_list.json", func(m map[string]any) {
				obj(m, "items")["body"] = ""
			})}, `"body"`},
		{exchange{name: "endpoint status out of range", method: "GET", target: "/api/v1/endpoints", status: 200,
			header: jsonHeader, resp: mutate(t, "endpoint_list.json", func(m map[string]any) {
				obj(m, "items", "response")["status"] = 600
			})}, "/status"},
		{exchange{name: "replay missing request", method: "POST", target: "/api/v1/requests/req_A1/replay",
			status: 201, header: jsonHeader, resp: mutate(t, "replay.json", func(m map[string]any) {
				delete(m, "request")
			})}, `"request" is missing`},
		{exchange{name: "replay with unknown edit", method: "POST", target: "/api/v1/requests/req_A1/replay",
			body: `{"host":"evil.test"}`, status: 201, header: jsonHeader, resp: fixture(t, "replay.json")},
			"request"},
		{exchange{name: "replay with two bodies", method: "POST", target: "/api/v1/requests/req_A1/replay",
			body: `{"body":"a","body_base64":"YQ=="}`, status: 201, header: jsonHeader, resp: fixture(t, "replay.json")},
			"request"},
		{exchange{name: "replay header edit of a wrong type", method: "POST",
			target: "/api/v1/requests/req_A1/replay", body: `{"headers":{"X-A":1}}`, status: 201, header: jsonHeader,
			resp: fixture(t, "replay.json")}, "request"},
		{exchange{name: "delivery report missing duration", method: "POST",
			target: "/api/v1/requests/req_A1/deliveries", body: `{"target_url":"http://localhost:3000/"}`,
			status: 201, header: jsonHeader, resp: fixture(t, "delivery.json")}, "duration_ms"},
		{exchange{name: "error missing fields", method: "GET", target: "/api/v1/messages/msg_A1", status: 404,
			header: jsonHeader, resp: []byte(`{"error":{"code":"not_found","message":"no"}}`)}, `"fields" is missing`},
		{exchange{name: "error extra field", method: "GET", target: "/api/v1/messages/msg_A1", status: 404,
			header: jsonHeader, resp: []byte(`{"error":{"code":"not_found","message":"no","fields":{}},"status":404}`)},
			`"status"`},
		{exchange{name: "error code for another status", method: "GET", target: "/api/v1/messages/msg_A1",
			status: 404, header: jsonHeader, resp: errorBody("internal")}, "/error/code"},
		{exchange{name: "error as text", method: "GET", target: "/api/v1/messages/msg_A1", status: 404,
			header: http.Header{"Content-Type": {"text/plain"}}, resp: []byte("404 page not found")}, "text/plain"},
		{exchange{name: "401 without WWW-Authenticate", method: "GET", target: "/api/v1/me", noAuth: true,
			status: 401, header: jsonHeader, resp: errorBody("unauthorized")}, "WWW-Authenticate"},
		{exchange{name: "429 without Retry-After", method: "GET", target: "/api/v1/me", status: 429,
			header: jsonHeader, resp: errorBody("rate_limited")}, "Retry-After"},
		{exchange{name: "429 with a date", method: "GET", target: "/api/v1/me", status: 429,
			header: header("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT"), resp: errorBody("rate_limited")},
			"Retry-After"},
		{exchange{name: "503 without Retry-After", method: "GET", target: "/api/v1/me", status: 503,
			header: jsonHeader, resp: errorBody("unavailable")}, "Retry-After"},
		{exchange{name: "503 with another code", method: "GET", target: "/api/v1/me", status: 503,
			header: header("Retry-After", "5"), resp: errorBody("internal")}, "/error/code"},
		{exchange{name: "undocumented status", method: "GET", target: "/api/v1/me", status: 418,
			header: jsonHeader, resp: errorBody("internal")}, "418"},
		{exchange{name: "404 on a route without id", method: "GET", target: "/api/v1/me", status: 404,
			header: jsonHeader, resp: errorBody("not_found")}, "404"},
		{exchange{name: "delete with a body", method: "DELETE", target: "/api/v1/messages/msg_A1", status: 204,
			header: jsonHeader, resp: []byte(`{}`)}, "without a body"},
		{exchange{name: "delete answering 200", method: "DELETE", target: "/api/v1/messages/msg_A1", status: 200,
			header: jsonHeader, resp: []byte(`{}`)}, "200"},
		{exchange{name: "raw without content type", method: "GET", target: "/api/v1/messages/msg_A1/raw",
			status: 200, header: noHeader, resp: []byte("Subject: x\r\n\r\n")}, "Content-Type"},
		{exchange{name: "raw as text", method: "GET", target: "/api/v1/messages/msg_A1/raw",
			status: 200, header: http.Header{"Content-Type": {"text/plain"}}, resp: []byte("Subject: x\r\n\r\n")},
			"text/plain"},
		{exchange{name: "JSON without content type", method: "GET", target: "/api/v1/me", status: 200,
			header: noHeader, resp: fixture(t, "me.json")}, "Content-Type"},
		{exchange{name: "not JSON", method: "GET", target: "/api/v1/me", status: 200, header: jsonHeader,
			resp: []byte(`{"project":`)}, "decode"},
		{exchange{name: "undocumented path", method: "GET", target: "/api/v1/accounts", status: 200,
			header: jsonHeader, resp: []byte(`{}`)}, "not documented"},
		{exchange{name: "path without trailing slash", method: "GET", target: "/api/v1/schema", noAuth: true,
			status: 200, header: jsonHeader, resp: openapi.Document}, "not documented"},
		{exchange{name: "path outside the API", method: "GET", target: "/me", status: 200,
			header: jsonHeader, resp: fixture(t, "me.json")}, "not under /api/v1"},
		{exchange{name: "undocumented method", method: "POST", target: "/api/v1/me", status: 200,
			header: jsonHeader, resp: fixture(t, "me.json")}, "405"},
		{exchange{name: "unknown query parameter answered", method: "GET", target: "/api/v1/me?x=1", status: 200,
			header: jsonHeader, resp: fixture(t, "me.json")}, "query parameter x"},
		{exchange{name: "list-only parameter on inboxes", method: "GET", target: "/api/v1/inboxes?wait=5",
			status: 200, header: jsonHeader, resp: fixture(t, "inbox_list.json")}, "query parameter wait"},
		{exchange{name: "limit out of range answered", method: "GET", target: "/api/v1/inboxes?limit=500",
			status: 200, header: jsonHeader, resp: fixture(t, "inbox_list.json")}, "limit"},
		{exchange{name: "wait out of range answered", method: "GET",
			target: "/api/v1/endpoints/whe_A1/requests?wait=31", status: 200, header: jsonHeader,
			resp: fixture(t, "request_list.json")}, "wait"},
		{exchange{name: "naive since answered", method: "GET",
			target: "/api/v1/endpoints/whe_A1/requests?since=2025-05-04T09:30:00", status: 200, header: jsonHeader,
			resp: fixture(t, "request_list.json")}, "since"},
		{exchange{name: "success without key", method: "GET", target: "/api/v1/me", noAuth: true, status: 200,
			header: jsonHeader, resp: fixture(t, "me.json")}, "security"},
		{exchange{name: "success on a wrong id", method: "GET", target: "/api/v1/messages/req_A1", status: 200,
			header: jsonHeader, resp: fixture(t, "message.json")}, "id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := v.Check(tc.request(t), tc.status, tc.header, tc.resp)
			if err == nil {
				t.Fatal("Check accepted it")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestCheckConcurrent(t *testing.T) {
	v := newValidator(t)
	body := fixture(t, "message.json")
	bad := mutate(t, "message.json", func(m map[string]any) { m["size"] = "x" })
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			req := httptest.NewRequest("GET", "/api/v1/messages/msg_Vb7Kq2Lx9PzT4mWc", nil)
			req.Header.Set("Authorization", "Bearer cap_x")
			if i%2 == 0 {
				if err := v.Check(req, 200, jsonHeader, body); err != nil {
					t.Error(err)
				}
			} else if err := v.Check(req, 200, jsonHeader, bad); err == nil {
				t.Error("Check accepted a wrong type")
			}
		})
	}
	wg.Wait()
}

// The capture listener's answers are checked against the document's
// component schemas by name.
func TestCheckSchema(t *testing.T) {
	v := newValidator(t)
	for _, tc := range []struct {
		schema, body string
		ok           bool
	}{
		{"CaptureReceipt", `{"id":"req_Lk2Mx9Qz7Pw"}`, true},
		{"CaptureReceipt", `{"ID":"req_Lk2Mx9Qz7Pw"}`, false},
		{"CaptureReceipt", `{"id":"msg_Lk2Mx9Qz7Pw"}`, false},
		{"CaptureReceipt", `{"id":"req_Lk2Mx9Qz7Pw","status":"ok"}`, false},
		{"CaptureReceipt", `{}`, false},
		{"CaptureReceipt", `{"id":`, false},
		{"Error", `{"error":{"code":"unavailable","message":"try again","fields":{}}}`, true},
		{"Error", `{"error":{"code":"not_found","message":"no endpoint"}}`, false},
		{"Error", `{"error":{"code":"gone","message":"x","fields":{}}}`, false},
		{"NoSuchSchema", `{}`, false},
	} {
		err := v.CheckSchema(tc.schema, []byte(tc.body))
		if (err == nil) != tc.ok {
			t.Errorf("CheckSchema(%s, %s) = %v, want ok %v", tc.schema, tc.body, err, tc.ok)
		}
	}
}
