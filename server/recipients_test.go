package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// manyAddresses is a To header naming n addresses, folded one a line.
func manyAddresses(n int) (header string, addresses []string) {
	addresses = make([]string, n)
	for i := range addresses {
		addresses[i] = fmt.Sprintf("user%05d@many.test", i)
	}
	return "To: " + strings.Join(addresses, ",\r\n ") + "\r\n", addresses
}

// TestManyRecipientsListedBounded sends a message whose To header names
// 5,000 addresses: the list item and the detail carry the first 100 and
// say there were more, the detail's headers keep them all, and the to
// filter still finds the message by an address near the end.
func TestManyRecipientsListedBounded(t *testing.T) {
	s := startSearchServer(t)
	to, addresses := manyAddresses(5000)
	id := s.mail(t, "From: app@shop.test\r\n"+to+"Cc: copy@shop.test\r\nSubject: everyone\r\n\r\nHello\r\n")

	l := s.list(t, s.messages(), nil)
	if len(l.items) != 1 || l.items[0]["id"] != id {
		t.Fatalf("list: %s", l.body)
	}
	item := l.items[0]
	if got, _ := item["to"].([]any); len(got) != 100 || item["to_truncated"] != true {
		t.Errorf("list item: %d addresses in to, to_truncated %v", len(got), item["to_truncated"])
	} else if first, _ := got[0].(map[string]any); first["address"] != addresses[0] {
		t.Errorf("list item's first address: %v", got[0])
	}
	if cc, _ := item["cc"].([]any); len(cc) != 1 || item["cc_truncated"] != false {
		t.Errorf("list item's cc: %v, cc_truncated %v", cc, item["cc_truncated"])
	}
	if n := strings.Count(l.body, "@many.test"); n != 100 {
		t.Errorf("the list names %d addresses", n)
	}
	for _, addr := range []string{addresses[4990], "USER04999@", addresses[150]} {
		s.expect(t, s.messages(), vals("to", addr), id)
	}
	s.expect(t, s.messages(), vals("to", "user05000@"))

	req, _ := http.NewRequestWithContext(t.Context(), "GET", s.base+"/api/v1/messages/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+s.boot.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := s.v.Check(req, resp.StatusCode, resp.Header, b); err != nil {
		t.Errorf("not as the OpenAPI document says: %v", err)
	}
	var m struct {
		To          []map[string]any    `json:"to"`
		ToTruncated bool                `json:"to_truncated"`
		Headers     map[string][]string `json:"headers"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.To) != 100 || !m.ToTruncated {
		t.Errorf("detail: %d addresses in to, to_truncated %v", len(m.To), m.ToTruncated)
	}
	if h := strings.Join(m.Headers["To"], ""); strings.Count(h, "@many.test") != 5000 || !strings.Contains(h, addresses[4999]) {
		t.Errorf("the detail's To header names %d addresses", strings.Count(h, "@many.test"))
	}
}

// TestManyCcAndReplyToListedBounded: Cc and Reply-To are cut at 100 as To
// is, each saying so in its own flag, and To, not cut, says it was not.
func TestManyCcAndReplyToListedBounded(t *testing.T) {
	s := startSearchServer(t)
	cc, _ := manyAddresses(150)
	replyTo, _ := manyAddresses(120)
	id := s.mail(t, "From: app@shop.test\r\nTo: one@shop.test\r\n"+"Cc:"+strings.TrimPrefix(cc, "To:")+
		"Reply-To:"+strings.TrimPrefix(replyTo, "To:")+"Subject: copied\r\n\r\nHello\r\n")

	l := s.list(t, s.messages(), nil)
	if len(l.items) != 1 || l.items[0]["id"] != id {
		t.Fatalf("list: %s", l.body)
	}
	item := l.items[0]
	if got, _ := item["cc"].([]any); len(got) != 100 || item["cc_truncated"] != true || item["to_truncated"] != false {
		t.Errorf("list item: %d addresses in cc, cc_truncated %v, to_truncated %v", len(got), item["cc_truncated"], item["to_truncated"])
	}

	req, _ := http.NewRequestWithContext(t.Context(), "GET", s.base+"/api/v1/messages/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+s.boot.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		To               []any `json:"to"`
		ToTruncated      bool  `json:"to_truncated"`
		Cc               []any `json:"cc"`
		CcTruncated      bool  `json:"cc_truncated"`
		ReplyTo          []any `json:"reply_to"`
		ReplyToTruncated bool  `json:"reply_to_truncated"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if len(m.To) != 1 || m.ToTruncated || len(m.Cc) != 100 || !m.CcTruncated || len(m.ReplyTo) != 100 || !m.ReplyToTruncated {
		t.Errorf("detail: to %d (%v), cc %d (%v), reply_to %d (%v); want 1 (false), 100 (true), 100 (true)",
			len(m.To), m.ToTruncated, len(m.Cc), m.CcTruncated, len(m.ReplyTo), m.ReplyToTruncated)
	}
}
