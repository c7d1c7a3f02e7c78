package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/capturedev/capture/server/certs"
	"github.com/capturedev/capture/server/openapi/openapitest"
	"github.com/capturedev/capture/server/servertest"
)

// searchServer is a server whose mail arrives over SMTP (STARTTLS, AUTH)
// and whose webhooks arrive on the capture listener, searched through the
// read API with every exchange checked against the OpenAPI document
// (SPEC §16).
type searchServer struct {
	*running
	caPEM []byte
	v     *openapitest.Validator
}

func startSearchServer(t *testing.T) *searchServer {
	t.Helper()
	st, boot := servertest.Open(t, "team") // many quick calls, no rate limit
	cfg := servertest.Config(t)
	ca, err := certs.Ensure(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLSConfig = certs.ServerConfig(ca.Certificate)
	caPEM, err := os.ReadFile(ca.CAPath)
	if err != nil {
		t.Fatal(err)
	}
	v, err := openapitest.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	return &searchServer{running: runServerWith(t, st, boot, cfg), caPEM: caPEM, v: v}
}

// mail sends msg (headers and body, CRLF line ends) to the default inbox
// over SMTP and returns the id the 250 reply names.
func (s *searchServer) mail(t *testing.T, msg string) string {
	t.Helper()
	tp, err := smtpSession(s.srv.StartTLSAddrs()[0].String(), s.caPEM, s.boot.Inbox.ID, s.boot.Inbox.SMTPPassword)
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	code, reply, err := sendData(tp, msg)
	if err != nil || code != 250 {
		t.Fatalf("DATA: %d %s %v", code, reply, err)
	}
	fields := strings.Fields(reply)
	return fields[len(fields)-1]
}

// hook sends a webhook to the default endpoint with target (path and
// query) appended and returns its id.
func (s *searchServer) hook(t *testing.T, method, target string, header http.Header, body []byte) string {
	t.Helper()
	req, _ := http.NewRequest(method, s.srv.CaptureBase()+"/"+s.boot.Endpoint.ID+target, bytes.NewReader(body))
	for name, values := range header {
		req.Header[name] = values
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		ID string `json:"id"`
	}
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || json.Unmarshal(b, &v) != nil {
		t.Fatalf("capture: %d %s", resp.StatusCode, b)
	}
	return v.ID
}

// listed is a list call's answer.
type listed struct {
	status int
	items  []map[string]any
	next   string
	code   string
	fields map[string]string
	body   string
}

// ids are the ids of the page, in its order.
func (l listed) ids() []string {
	ids := make([]string, len(l.items))
	for i, it := range l.items {
		ids[i], _ = it["id"].(string)
	}
	return ids
}

// list calls a list route (path relative to /api/v1, query values in q).
func (s *searchServer) list(t *testing.T, path string, q url.Values) listed {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", s.base+"/api/v1"+path+"?"+q.Encode(), nil)
	req.Header.Set("Authorization", "Bearer "+s.boot.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err) // not Fatal: a wait calls this in a goroutine of its own
		return listed{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := s.v.Check(req, resp.StatusCode, resp.Header, b); err != nil {
		t.Errorf("not as the OpenAPI document says: %v\n%s", err, b)
	}
	var v struct {
		Items []map[string]any `json:"items"`
		Next  *string          `json:"next"`
		Error struct {
			Code   string            `json:"code"`
			Fields map[string]string `json:"fields"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Errorf("%s: %v: %s", req.URL, err, b)
	}
	l := listed{status: resp.StatusCode, items: v.Items, code: v.Error.Code, fields: v.Error.Fields, body: string(b)}
	if v.Next != nil {
		l.next = *v.Next
	}
	return l
}

// vals is a query string from name, value pairs.
func vals(pairs ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		v.Set(pairs[i], pairs[i+1])
	}
	return v
}

func (s *searchServer) messages() string { return "/inboxes/" + s.boot.Inbox.ID + "/messages" }
func (s *searchServer) requests() string { return "/endpoints/" + s.boot.Endpoint.ID + "/requests" }

// expect checks that the list answers want (ids, newest first).
func (s *searchServer) expect(t *testing.T, path string, q url.Values, want ...string) {
	t.Helper()
	l := s.list(t, path, q)
	if l.status != 200 || !slices.Equal(l.ids(), want) {
		t.Errorf("%s?%s = %d %v, want %v\n%s", path, q.Encode(), l.status, l.ids(), want, l.body)
	}
}

// shipped is a message with something to find in every field search reads,
// each word in one field only. The style and script of its HTML are not
// text anyone reads, so search skips them.
const shipped = "From: =?UTF-8?Q?Zo=C3=AB_Keller?= <dispatch@shop.test>\r\n" +
	"To: Alice Liddell <alice@wonderland.test>\r\n" +
	"Cc: Bob Marley <bob@reggae.test>\r\n" +
	"Subject: Your parcel has shipped\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: multipart/mixed; boundary=\"mix\"\r\n" +
	"\r\n" +
	"--mix\r\n" +
	"Content-Type: multipart/alternative; boundary=\"alt\"\r\n" +
	"\r\n" +
	"--alt\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"\r\n" +
	"Tracking number XQZ778812, sent from the warehouse.\r\n" +
	"--alt\r\n" +
	"Content-Type: text/html; charset=utf-8\r\n" +
	"\r\n" +
	"<html><head><style>.styleonly { color: red }</style></head><body>\r\n" +
	"<p>Your parcel left our <b>Rotter</b>dam depot.</p><script>var scriptonly = 1;</script>\r\n" +
	"</body></html>\r\n" +
	"--alt--\r\n" +
	"--mix\r\n" +
	"Content-Type: application/pdf\r\n" +
	"Content-Disposition: attachment; filename=\"invoice-2026-0042.pdf\"\r\n" +
	"Content-Transfer-Encoding: base64\r\n" +
	"\r\n" +
	"JVBERi0xLjQK\r\n" +
	"--mix--\r\n"

// digest shares one word (warehouse) with shipped.
const digest = "From: News <news@blog.test>\r\n" +
	"To: carol@example.test\r\n" +
	"Subject: Weekly digest\r\n" +
	"\r\n" +
	"Warehouse tips and tricks for your garden.\r\n"

func TestSearchMessages(t *testing.T) {
	t.Parallel()
	s := startSearchServer(t)
	a := s.mail(t, shipped)
	b := s.mail(t, digest)
	path := s.messages()

	t.Run("each field", func(t *testing.T) {
		for _, tt := range []struct{ field, q string }{
			{"subject", "shipped"},
			{"from name, accent-insensitive", "zoe"},
			{"from name as written", "Zoë Keller"},
			{"from address", "dispatch@shop.test"},
			{"to name", "liddell"},
			{"to address", "wonderland"},
			{"cc name", "Marley"},
			{"cc address", "bob@reggae"},
			{"text body, inside a word", "qz7788"},
			{"HTML text, across inline tags", "rotterdam"},
			{"attachment file name", "invoice-2026-0042.pdf"},
		} {
			t.Run(tt.field, func(t *testing.T) { s.expect(t, path, vals("q", tt.q), a) })
		}
		for _, q := range []string{"styleonly", "scriptonly", "nothing-like-it"} {
			s.expect(t, path, vals("q", q))
		}
	})
	t.Run("words and phrases", func(t *testing.T) {
		for _, tt := range []struct {
			q    string
			want []string
		}{
			{"warehouse", []string{b, a}},
			{"WAREHOUSE Tricks", []string{b}},
			{"warehouse rotterdam", []string{a}},
			{"tricks rotterdam", nil},
			{`"parcel left our"`, []string{a}},
			{`"left parcel"`, nil},
			{`"tips and" garden`, []string{b}},
		} {
			s.expect(t, path, vals("q", tt.q), tt.want...)
		}
	})
	t.Run("with the other filters", func(t *testing.T) {
		l := s.list(t, path, vals("q", "rotterdam"))
		if len(l.items) != 1 {
			t.Fatalf("q=rotterdam: %s", l.body)
		}
		received := l.items[0]["received_at"].(string)
		for _, q := range []url.Values{
			vals("q", "warehouse", "to", "carol"),
			vals("q", "warehouse", "from", "NEWS@"),
			vals("q", "warehouse", "subject", "digest"),
			vals("q", "warehouse", "since", received),
		} {
			s.expect(t, path, q, b)
		}
		s.expect(t, path, vals("q", "warehouse", "to", "alice"), a)
		s.expect(t, path, vals("q", "rotterdam", "to", "carol"))
		s.expect(t, path, vals("q", "tricks", "subject", "shipped"))
	})
}

func TestSearchRequests(t *testing.T) {
	t.Parallel()
	s := startSearchServer(t)
	stripe := s.hook(t, "POST", "/hooks/stripe?event=invoice.paid&note=caf%C3%A9",
		http.Header{"Content-Type": {"application/json"}, "Stripe-Signature": {"t=1712,v1=5a9be7c0ffee"}},
		[]byte(`{"customer":"cus_Nimbus42","amount":4200}`))
	github := s.hook(t, "POST", "/hooks/github", http.Header{"X-Github-Event": {"push"}}, []byte("zen: keep it logically awesome"))
	binary := s.hook(t, "PUT", "/upload", nil, []byte{0xff, 0xfe, 'g', 'h', 'o', 's', 't', 'l', 'y', 0x00})
	path := s.requests()

	for _, tt := range []struct {
		field, q string
		want     []string
	}{
		{"path", "stripe", []string{stripe}},
		{"path of both", "hooks", []string{github, stripe}},
		{"path of the third", "upload", []string{binary}},
		{"query", "invoice.paid", []string{stripe}},
		{"query, percent-decoded and accent-insensitive", "cafe", []string{stripe}},
		{"header value", "c0ffee", []string{stripe}},
		{"another header value", "push", []string{github}},
		{"UTF-8 body, inside a word", "nimbus4", []string{stripe}},
		{"UTF-8 body phrase", `"logically awesome"`, []string{github}},
		{"a body that is not UTF-8", "ghostly", nil},
	} {
		t.Run(tt.field, func(t *testing.T) { s.expect(t, path, vals("q", tt.q), tt.want...) })
	}
	t.Run("with method and path", func(t *testing.T) {
		s.expect(t, path, vals("q", "hooks", "method", "post", "path", "/hooks/git"), github)
		s.expect(t, path, vals("q", "hooks", "method", "PUT"))
		s.expect(t, path, vals("q", "upload", "method", "put", "path", "/up"), binary)
		s.expect(t, path, vals("q", "push", "path", "/hooks/stripe"))
	})
}

// A form body is searched percent-decoded and a JSON body with its \u
// escapes decoded, as the query string of the URL is; a query pasted from
// a JSON body ("status":"paid") finds the key and value next to each other.
func TestSearchRequestBodies(t *testing.T) {
	t.Parallel()
	s := startSearchServer(t)
	form := s.hook(t, "POST", "/ipn", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}},
		[]byte("payer_email=buyer%40example.com&custom=order%3D9981&first_name=Jos%C3%A9&memo=thanks+a+lot"))
	// As Python's json.dumps writes it.
	py := s.hook(t, "POST", "/py", http.Header{"Content-Type": {"application/json"}},
		[]byte(`{"customer": "Zo\u00eb Keller", "status": "paid"}`))
	failed := s.hook(t, "POST", "/go", http.Header{"Content-Type": {"application/json"}},
		[]byte(`{"status":"failed","note":"paid"}`))
	unpaid := s.hook(t, "POST", "/go", http.Header{"Content-Type": {"application/json"}}, []byte(`{"status":"unpaid"}`))
	path := s.requests()
	for _, tt := range []struct {
		q    string
		want []string
	}{
		{"buyer@example.com", []string{form}},
		{"order=9981", []string{form}},
		{"jose", []string{form}},
		{`"thanks a lot"`, []string{form}},
		{"buyer%40example.com", []string{form}}, // as sent, too
		{"zoe", []string{py}},
		{"Zoë Keller", []string{py}},
		{`"status":"paid"`, []string{py}},
		{`{"status":"paid"}`, []string{py}},
		{`"status" "paid"`, []string{unpaid, failed, py}},
	} {
		s.expect(t, path, vals("q", tt.q), tt.want...)
	}
}

// Paging a search reads the same pages as paging the list, counted in
// matches: a page of two holds two matches however many captures lie
// between them, going back with before and forward with after.
func TestSearchPages(t *testing.T) {
	t.Parallel()
	s := startSearchServer(t)
	var msgs, reqs []string // the matches, oldest first
	for i := range 5 {
		msgs = append(msgs, s.mail(t, fmt.Sprintf("Subject: Build %d passed\r\n\r\nPipeline zephyr finished.\r\n", i)))
		s.mail(t, fmt.Sprintf("Subject: Build %d failed\r\n\r\nPipeline mistral finished.\r\n", i))
		reqs = append(reqs, s.hook(t, "POST", fmt.Sprintf("/ci/%d", i), nil, []byte(`{"status":"zephyr"}`)))
		s.hook(t, "POST", fmt.Sprintf("/ci/%d", i), nil, []byte(`{"status":"mistral"}`))
	}
	for _, c := range []struct {
		name, path string
		matches    []string
	}{{"messages", s.messages(), msgs}, {"requests", s.requests(), reqs}} {
		t.Run(c.name, func(t *testing.T) {
			m := c.matches
			s.walk(t, c.path, vals("q", "zephyr", "limit", "2"), "before", []string{m[4], m[3]}, []string{m[2], m[1]}, []string{m[0]})
			s.walk(t, c.path, vals("q", "zephyr", "limit", "2", "after", m[0]), "after", []string{m[2], m[1]}, []string{m[4], m[3]})
		})
	}
}

// walk pages through path from q, passing each page's next as cursor
// (before or after), and checks that the pages are want and that the last
// one has no next.
func (s *searchServer) walk(t *testing.T, path string, q url.Values, cursor string, want ...[]string) {
	t.Helper()
	for _, page := range want {
		l := s.list(t, path, q)
		if !slices.Equal(l.ids(), page) {
			t.Fatalf("%s=%s: %v, want %v", cursor, q.Get(cursor), l.ids(), page)
		}
		q.Set(cursor, l.next)
	}
	if q.Get(cursor) != "" {
		t.Errorf("the last page going %s has next %q, want null", cursor, q.Get(cursor))
	}
}

// A wait with q holds through a capture that does not match and returns
// the one that does.
func TestSearchWait(t *testing.T) {
	t.Parallel()
	s := startSearchServer(t)
	for _, c := range []struct {
		name, path, q  string
		noMatch, match func(*testing.T) string
	}{
		{name: "messages", path: s.messages(), q: `"quartz zebra"`,
			noMatch: func(t *testing.T) string { return s.mail(t, "Subject: Quartz\r\n\r\nA zebra, and quartz.\r\n") },
			match:   func(t *testing.T) string { return s.mail(t, "Subject: Minerals\r\n\r\nThe quartz zebra is here.\r\n") }},
		{name: "requests", path: s.requests(), q: "zebra quartz",
			noMatch: func(t *testing.T) string { return s.hook(t, "POST", "/zebra", nil, []byte("no mineral here")) },
			match:   func(t *testing.T) string { return s.hook(t, "POST", "/zebra", nil, []byte("quartz")) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan listed, 1)
			go func() { done <- s.list(t, c.path, vals("q", c.q, "wait", "20")) }()
			s.eventually(t, "the wait held", func(fams map[string]*dto.MetricFamily) bool {
				return value(fams, "capture_active_waits", "project", s.boot.Project.ID) == 1
			})
			c.noMatch(t)
			want := c.match(t)
			l := <-done
			if l.status != 200 || !slices.Equal(l.ids(), []string{want}) {
				t.Errorf("wait = %d %v, want only %s\n%s", l.status, l.ids(), want, l.body)
			}
		})
	}
	// A wait that times out is an empty 200, with q as without.
	if l := s.list(t, s.requests(), vals("q", "never-captured", "wait", "1")); l.status != 200 || len(l.items) != 0 || l.next != "" {
		t.Errorf("timed-out wait: %d %s", l.status, l.body)
	}
}

// A query search cannot read is a 400 naming q, at once, also with wait.
func TestSearchBadQuery(t *testing.T) {
	t.Parallel()
	s := startSearchServer(t)
	for _, path := range []string{s.messages(), s.requests()} {
		for _, tt := range []struct{ q, why string }{
			{`"unclosed phrase`, "quotation mark is not closed"},
			{`!!! ---`, "nothing to search for"},
			{"w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 w15 w16", "more than 16 words"},
			{strings.Repeat("x", 1025), "longer than 1024 bytes"},
		} {
			l := s.list(t, path, vals("q", tt.q, "wait", "30"))
			if l.status != 400 || l.code != "invalid_parameter" || !strings.Contains(l.fields["q"], tt.why) || len(l.fields) != 1 {
				t.Errorf("%s q=%.20s: %d %s, want 400 invalid_parameter with fields.q saying %q", path, tt.q, l.status, l.body, tt.why)
			}
		}
		// An empty q searches for nothing: the list is unfiltered.
		if l := s.list(t, path, vals("q", "")); l.status != 200 {
			t.Errorf("%s q=: %d %s", path, l.status, l.body)
		}
	}
}
