package resend_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/capturedev/capture/server/api/resend"
	"github.com/capturedev/capture/server/api/resend/resendtest"
)

// send resends a capture with method, headers, path, query and body to
// base, and returns what arrived and what came back.
func send(t *testing.T, rec *resendtest.Recorder, base, method, path, query string, captured http.Header, body string) (string, *http.Response, []byte) {
	t.Helper()
	b, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := resend.Join(b, path, query)
	req, err := resend.NewRequest(t.Context(), method, u, resend.Header(captured), []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: resend.Transport(nil)}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	return <-rec.Requests(), resp, rb
}

// The request that arrives is the captured one: its method, path, query,
// headers and body, with nothing added but Host and the body's length.
func TestResendSendsExactlyWhatWasCaptured(t *testing.T) {
	rec := resendtest.NewRecorder(t, "HTTP/1.1 204 No Content\r\n\r\n")
	host := rec.Host()
	captured := http.Header{
		"X-Signature":       {"t=1,v1=abc"},
		"Content-Type":      {"application/json"},
		"Accept":            {"*/*"},
		"X-Twice":           {"1", "2"},
		"Host":              {"sender.example"},
		"Content-Length":    {"999"},
		"Connection":        {"keep-alive, X-Hop"},
		"X-Hop":             {"private"},
		"Transfer-Encoding": {"chunked"},
		"Te":                {"trailers"},
		"Keep-Alive":        {"timeout=5"},
	}
	got, resp, _ := send(t, rec, rec.URL(), "POST", "/hooks/a%2Fb", "x=1&y=%20", captured, `{"a":1}`)
	want := "POST /hooks/a%2Fb?x=1&y=%20 HTTP/1.1\r\n" +
		"Host: " + host + "\r\n" +
		"Content-Length: 7\r\n" +
		"Accept: */*\r\n" +
		"Content-Type: application/json\r\n" +
		"X-Signature: t=1,v1=abc\r\n" +
		"X-Twice: 1\r\n" +
		"X-Twice: 2\r\n" +
		"\r\n" +
		`{"a":1}`
	if got != want || resp.StatusCode != 204 {
		t.Errorf("arrived:\n%q\nwant:\n%q", got, want)
	}

	// A capture without User-Agent or Accept-Encoding arrives without
	// them; one with them keeps its own.
	got, _, _ = send(t, rec, rec.URL(), "GET", "/", "", http.Header{}, "")
	if got != "GET / HTTP/1.1\r\nHost: "+host+"\r\n\r\n" {
		t.Errorf("bare GET arrived as %q", got)
	}
	got, _, _ = send(t, rec, rec.URL(), "GET", "/", "", http.Header{"User-Agent": {"Stripe/1.0"}, "Accept-Encoding": {"br"}}, "")
	if got != "GET / HTTP/1.1\r\nHost: "+host+"\r\nUser-Agent: Stripe/1.0\r\nAccept-Encoding: br\r\n\r\n" {
		t.Errorf("GET with its own User-Agent arrived as %q", got)
	}
	// Any method token goes as it is.
	got, _, _ = send(t, rec, rec.URL(), "PURGE", "/x", "", http.Header{}, "")
	if !strings.HasPrefix(got, "PURGE /x HTTP/1.1\r\n") {
		t.Errorf("PURGE arrived as %q", got)
	}
}

// The target's answer comes back as the target sent it: a gzip body stays
// gzip, not silently unpacked.
func TestResendKeepsTheAnswerAsSent(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("hello"))
	zw.Close()
	rec := resendtest.NewRecorder(t, "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: "+strconv.Itoa(gz.Len())+"\r\n\r\n"+gz.String())
	_, resp, body := send(t, rec, rec.URL(), "POST", "/", "", http.Header{"Accept-Encoding": {"gzip"}}, "x")
	if !bytes.Equal(body, gz.Bytes()) || resp.Header.Get("Content-Encoding") != "gzip" {
		t.Errorf("answer %v %q, want the gzip bytes as sent", resp.Header, body)
	}
}

// The captured path is appended to the target's base path and never climbs
// above it, however it is written.
func TestJoinStaysUnderTheBasePath(t *testing.T) {
	for _, tt := range []struct{ base, path, query, wantURI, wantText string }{
		{"http://h:1", "/a/b", "x=1", "/a/b?x=1", "http://h:1/a/b?x=1"},
		{"http://h:1/base", "/a%2Fb", "", "/base/a%2Fb", "http://h:1/base/a%2Fb"},
		{"http://h:1/base/", "/x", "", "/base/x", "http://h:1/base/x"},
		{"http://h:1", "/", "", "/", "http://h:1/"},
		{"http://h:1", "", "", "/", "http://h:1/"},
		{"http://h:1/", "/", "x=1", "/?x=1", "http://h:1/?x=1"},
		// The bare capture URL goes to the base path as given.
		{"http://h:1/webhook", "/", "", "/webhook", "http://h:1/webhook"},
		{"http://h:1/webhook", "", "x=1", "/webhook?x=1", "http://h:1/webhook?x=1"},
		{"http://h:1/webhook/", "/", "", "/webhook/", "http://h:1/webhook/"},
		{"http://h:1/webhook", "/x/", "", "/webhook/x/", "http://h:1/webhook/x/"},
		{"http://h:1/webhook", "/.", "", "/webhook/", "http://h:1/webhook/"},
		{"http://h:1", "//double", "q", "//double?q", "http://h:1//double?q"},
		{"http://h:1/base", "/../../admin", "", "/base/admin", "http://h:1/base/admin"},
		{"http://h:1/base", "/a/../../../etc/passwd", "", "/base/etc/passwd", "http://h:1/base/etc/passwd"},
		{"http://h:1/base", "/%2e%2E/%2E./admin", "", "/base/admin", "http://h:1/base/admin"},
		{"http://h:1/base", "/a/./b/..", "", "/base/a/", "http://h:1/base/a/"},
		{"http://h:1/base", "/..", "", "/base/", "http://h:1/base/"},
		{"http://h:1/base", "/..a/b..", "", "/base/..a/b..", "http://h:1/base/..a/b.."},
		{"http://h:1/base?k=v", "/x", "y=1", "/base/x?k=v&y=1", "http://h:1/base/x?k=v&y=1"},
		{"https://user:pw@h:1/b#frag", "/x", "", "/b/x", "https://h:1/b/x"},
	} {
		base, err := url.Parse(tt.base)
		if err != nil {
			t.Fatal(err)
		}
		u, text := resend.Join(base, tt.path, tt.query)
		if got := u.RequestURI(); got != tt.wantURI || u.Host != "h:1" || text != tt.wantText || u.User != nil {
			t.Errorf("Join(%q, %q, %q) = %q on %q (%q), want %q (%q)", tt.base, tt.path, tt.query, got, u.Host, text, tt.wantURI, tt.wantText)
		}
	}
}
