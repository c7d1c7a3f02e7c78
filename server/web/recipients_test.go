package web_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/capturedev/capture/store"
)

// TestManyRecipientsShownBounded: a message whose To header names 5,000
// addresses has a list row naming the first five and how many more, and
// a page naming the first 100 and how many more; the to filter still
// finds it by an address near the end.
func TestManyRecipientsShownBounded(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	addresses := make([]string, 5000)
	for i := range addresses {
		addresses[i] = fmt.Sprintf("user%05d@many.test", i)
	}
	e.sendMail(t, e.boot.Inbox, "a@example.com", []string{"rcpt@example.com"},
		"From: a@example.com\nTo: "+strings.Join(addresses, ",\n ")+"\nSubject: everyone\n\nhi\n")
	msgs, err := e.st.Messages(t.Context(), e.boot.Inbox.ID, store.MessageFilter{}, store.Page{})
	if err != nil || len(msgs.Items) != 1 {
		t.Fatalf("messages: %v %v", msgs, err)
	}

	inbox := "/projects/" + e.boot.Project.ID + "/inboxes/" + e.boot.Inbox.ID
	for q, echoed := range map[string]int{"": 0, "?to=" + url.QueryEscape(addresses[4990]): 1} {
		list := c.get(inbox + q)
		// The row's title and its text, each the first five (and the
		// filter's field its address).
		if n := strings.Count(list.body, "@many.test"); n != 10+echoed ||
			strings.Count(list.body, "4,995 more") != 2 || !strings.Contains(list.body, addresses[4]+", &#43;4,995 more</span>") {
			t.Errorf("list%s names %d addresses: %s", q, n, list.body)
		}
		if !strings.Contains(list.body, msgs.Items[0].ID) {
			t.Errorf("list%s lacks the message", q)
		}
	}
	detail := c.get("/projects/" + e.boot.Project.ID + "/messages/" + msgs.Items[0].ID)
	if n := strings.Count(detail.body, "@many.test"); n != 100 || !strings.Contains(detail.body, addresses[99]+", &#43;4,900 more</dd>") {
		t.Errorf("the page names %d addresses: %s", n, detail.body)
	}
}
