package web_test

import (
	"fmt"
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/capturedev/capture/store"
)

// The Links tab says when a message had more links than it keeps, and
// refuses a kind that does not exist.
func TestLinksTruncatedAndBadKind(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	var text strings.Builder
	for i := range 1001 {
		fmt.Fprintf(&text, "https://example.com/p/%d\n", i)
	}
	e.sendMail(t, e.boot.Inbox, "a@example.com", []string{"b@example.com"},
		"From: a@example.com\nTo: b@example.com\nSubject: Many links\n\n"+text.String())
	list, err := e.st.Messages(t.Context(), e.boot.Inbox.ID, store.MessageFilter{}, store.Page{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("messages: %v %v", list, err)
	}
	page := "/projects/" + e.boot.Project.ID + "/messages/" + list.Items[0].ID
	links := c.get(page + "?tab=links")
	if text := html.UnescapeString(links.body); links.StatusCode != http.StatusOK || !strings.Contains(text, "Links (1000+)") ||
		!strings.Contains(text, "more links than the 1000 kept") {
		t.Errorf("the links tab of a message with 1001 links: %d\n%s", links.StatusCode, links.body)
	}
	if bad := c.get(page + "?tab=links&kind=nope"); bad.StatusCode != http.StatusBadRequest || !strings.Contains(bad.body, "no link kind") {
		t.Errorf("kind=nope: %d %s", bad.StatusCode, bad.body)
	}
}
