package server_test

import (
	"bufio"
	"encoding/json"
	"io"
	"mime"
	"net"
	"net/http"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// TestListFiltersFoldThroughTheAPI sends mail over SMTP and webhooks to
// the capture listener and filters them through the read API: the message
// filters fold as q= does (NFC and NFD, İ and ı, ß and ss), and the path
// filter finds a path whichever way it or the path spells its escapes.
func TestListFiltersFoldThroughTheAPI(t *testing.T) {
	s := startSearchServer(t)

	// The subject in NFD, as some mail clients on macOS send it.
	subject := mime.QEncoding.Encode("utf-8", norm.NFD.String("Résumé from İstanbul"))
	from := mime.QEncoding.Encode("utf-8", "Zoë Straße")
	folded := s.mail(t, "From: "+from+" <zoe@shop.test>\r\nTo: alice@wonderland.test\r\nSubject: "+subject+"\r\n\r\nHello\r\n")
	plain := s.mail(t, "From: News <news@blog.test>\r\nTo: alice@wonderland.test\r\nSubject: Weekly digest\r\n\r\nHi\r\n")
	for _, c := range []struct{ name, value, want string }{
		{"subject", norm.NFC.String("résumé"), folded},
		{"subject", "istanbul", folded},
		{"subject", "ISTANBUL", folded},
		{"subject", "from ıstanbul", folded},
		{"subject", "weekly", plain},
		{"from", "strasse", folded},
		{"from", "ZOE STRASSE", folded},
		{"from", "news@", plain},
	} {
		s.expect(t, s.messages(), vals(c.name, c.value), c.want)
	}
	s.expect(t, s.messages(), vals("to", "ALICE@"), plain, folded)

	upper := s.hook(t, "POST", "/ci/%C4%B0stanbul/1", nil, nil)
	lower := s.hook(t, "POST", "/ci/%c4%b0stanbul/2", nil, nil)
	raw := s.rawHook(t, "/ci/İstanbul/3")
	slash := s.hook(t, "POST", "/ci/a%2Fb", nil, nil)
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"/ci/İstanbul", []string{raw, lower, upper}},
		{"/ci/%C4%B0stanbul", []string{raw, lower, upper}},
		{"/ci/%c4%b0stanbul/2", []string{lower}},
		{"/ci/a/", nil},
		{"/ci/a%2F", []string{slash}},
	} {
		s.expect(t, s.requests(), vals("path", c.prefix), c.want...)
	}
	// Paths are kept as received.
	for id, path := range map[string]string{upper: "/ci/%C4%B0stanbul/1", lower: "/ci/%c4%b0stanbul/2", raw: "/ci/İstanbul/3"} {
		l := s.list(t, s.requests(), vals("path", path))
		if len(l.items) != 1 || l.items[0]["id"] != id || l.items[0]["path"] != path {
			t.Errorf("path %q listed as %v", path, l.items)
		}
	}
}

// rawHook sends a webhook whose request line holds path's bytes as they
// are, UTF-8 unescaped, as some senders do (Go's client would escape it).
func (s *searchServer) rawHook(t *testing.T, path string) string {
	t.Helper()
	conn, err := net.Dial("tcp", s.srv.CaptureAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /"+s.boot.Endpoint.ID+path+" HTTP/1.1\r\nHost: capture\r\n"+
		"Content-Length: 0\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		ID string `json:"id"`
	}
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || json.Unmarshal(b, &v) != nil {
		t.Fatalf("capture of %q: %d %s", path, resp.StatusCode, b)
	}
	return v.ID
}
