package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// envelope reads the read API's error envelope of a response, failing the
// test when it is not one with the status and code wanted.
func envelope(t *testing.T, what string, resp response, status int, code string) map[string]string {
	t.Helper()
	var env struct {
		Error *struct {
			Code    string            `json:"code"`
			Message string            `json:"message"`
			Fields  map[string]string `json:"fields"`
		} `json:"error"`
	}
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/json" ||
		json.Unmarshal([]byte(resp.body), &env) != nil || env.Error == nil ||
		env.Error.Code != code || env.Error.Message == "" || env.Error.Fields == nil {
		t.Errorf("%s: want %d with the %s envelope, got %d %s %q", what, status, code,
			resp.StatusCode, resp.Header.Get("Content-Type"), resp.body)
		return nil
	}
	return env.Error.Fields
}

// htmlPage fails the test when a response is not the HTML page with the
// status wanted.
func htmlPage(t *testing.T, what string, resp response, status int) {
	t.Helper()
	if resp.StatusCode != status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(resp.body, "</html>") {
		t.Errorf("%s: want the %d page, got %d %s %q", what, status, resp.StatusCode,
			resp.Header.Get("Content-Type"), resp.body)
	}
}

// A program that is signed out and posts, or sends a form without its CSRF
// token, gets the read API's error envelope, like every other error on the
// listener; a browser gets the page. A signed-out GET of a page is the
// redirect to sign in for both.
func TestRefusalsAnswerByAccept(t *testing.T) {
	e := start(t)
	pid := e.boot.Project.ID
	inboxes := "/projects/" + pid + "/inboxes"
	form := url.Values{"name": {"x"}}

	signedOut := e.client(t)
	if resp := signedOut.get("/"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?next=%2F" {
		t.Errorf("signed-out browser GET /: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// A page is a redirect to sign in for any client: one that follows
	// redirects lands on the form.
	if resp := signedOut.program().get(inboxes); resp.StatusCode != http.StatusSeeOther ||
		!strings.HasPrefix(resp.Header.Get("Location"), "/login?next=") {
		t.Errorf("signed-out program GET inboxes: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	envelope(t, "signed-out program POST", signedOut.program().post(inboxes, form), http.StatusUnauthorized, "unauthorized")
	htmlPage(t, "signed-out browser POST", signedOut.post(inboxes, form), http.StatusUnauthorized)
	fields := envelope(t, "program sign-in without the form's cookie",
		signedOut.program().post("/login", url.Values{"csrf": {"x"}, "password": {"whatever1"}}), http.StatusForbidden, "invalid_parameter")
	if fields["csrf"] == "" {
		t.Errorf("the sign-in refusal names no csrf field: %v", fields)
	}

	c := e.client(t)
	token := c.signIn(e)
	program := c.program()
	fields = envelope(t, "program POST without a CSRF token", program.post(inboxes, form), http.StatusForbidden, "invalid_parameter")
	if fields["csrf"] == "" {
		t.Errorf("the CSRF refusal names no csrf field: %v", fields)
	}
	htmlPage(t, "browser POST without a CSRF token", c.post(inboxes, form), http.StatusForbidden)
	cross := program.do("POST", inboxes, url.Values{"name": {"x"}, "csrf": {token}}, http.Header{"Sec-Fetch-Site": {"cross-site"}})
	if fields := envelope(t, "program POST from another site", cross, http.StatusForbidden, "invalid_parameter"); fields["Origin"] == "" {
		t.Errorf("the cross-site refusal names no Origin: %v", fields)
	}
	// None of them made anything.
	if page := c.get(inboxes); strings.Contains(page.body, ">x<") {
		t.Errorf("a refused form created an inbox:\n%s", page.body)
	}

	// The other refusals of a signed-in program's request.
	envelope(t, "a quota", program.post("/projects/"+pid+"/keys", url.Values{"csrf": {token}}), http.StatusForbidden, "quota_exceeded")
	envelope(t, "no such project", program.get("/projects/proj_nope/inboxes"), http.StatusNotFound, "not_found")
	envelope(t, "a bad search", program.get(inboxes+"/"+e.boot.Inbox.ID+`?q="open`), http.StatusBadRequest, "invalid_parameter")
	envelope(t, "a duplicate project", program.post("/projects", url.Values{"name": {e.boot.Project.Name}, "plan": {"free"}, "csrf": {token}}),
		http.StatusBadRequest, "invalid_parameter")
	// With the token, the program's form works as a browser's does.
	if resp := program.post(inboxes, url.Values{"name": {"made"}, "csrf": {token}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("program POST with the token: %d %s", resp.StatusCode, resp.body)
	}
}

// liveStream opens a list's event stream as the page's EventSource does,
// and reads it until it shows a row.
func liveStream(t *testing.T, c *client, path string, capture func()) *bufio.Scanner {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d", path, resp.StatusCode)
	}
	lines := bufio.NewScanner(resp.Body)
	// The stream has begun once its first lines are in.
	if !lines.Scan() {
		t.Fatalf("%s ended at once: %v", path, lines.Err())
	}
	capture()
	for lines.Scan() {
		if lines.Text() == "event: row" {
			return lines
		}
	}
	t.Fatalf("%s ended without a row: %v", path, lines.Err())
	return nil
}

// restOf reads the stream to its end, failing the test when it sends
// another row or does not end (the read's deadline) or does not tell the
// page to reload.
func restOf(t *testing.T, what string, lines *bufio.Scanner) {
	t.Helper()
	var events []string
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "event: ") {
			events = append(events, lines.Text())
		}
	}
	if err := lines.Err(); err != nil {
		t.Errorf("%s: the stream did not end: %v (events %q)", what, err, events)
	}
	if len(events) != 1 || events[0] != "event: reload" {
		t.Errorf("%s: the stream sent %q after the session ended, want only a reload", what, events)
	}
}

// A live list stops once its session ends: at once when it is signed out
// on this server, and before anything else is sent when it ended on
// another one (SPEC §11: sign out ends it on the server).
func TestSessionEndEndsLiveLists(t *testing.T) {
	e := start(t)
	pid, inbox, ep := e.boot.Project.ID, e.boot.Inbox, e.boot.Endpoint.ID
	send := func(subject string) func() {
		return func() {
			e.sendMail(t, inbox, "a@example.com", []string{"b@example.com"}, "Subject: "+subject+"\n\nhello\n")
		}
	}

	t.Run("signed out", func(t *testing.T) {
		c := e.client(t)
		token := c.signIn(e)
		lines := liveStream(t, c, "/projects/"+pid+"/inboxes/"+inbox.ID+"/events", send("before"))
		if resp := c.post("/logout", url.Values{"csrf": {token}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-out: %d", resp.StatusCode)
		}
		// Nothing else happens: the sign-out itself ends the stream, well
		// before its next keep-alive would find the session gone.
		restOf(t, "inbox stream", lines)
	})

	t.Run("ended elsewhere", func(t *testing.T) {
		c := e.client(t)
		c.signIn(e)
		lines := liveStream(t, c, "/projects/"+pid+"/endpoints/"+ep+"/events", func() {
			postWebhook(t, e, ep, "/before", http.Header{}, "1")
		})
		base, _ := url.Parse(e.base)
		var session string
		for _, ck := range c.Jar.Cookies(base) {
			if ck.Name == "capture_session" {
				session = ck.Value
			}
		}
		// As another server on the same database, or a new password, ends
		// it: this server is not told.
		if err := e.st.EndSession(t.Context(), session); err != nil {
			t.Fatal(err)
		}
		postWebhook(t, e, ep, "/after", http.Header{}, "2")
		restOf(t, "endpoint stream", lines)
	})
}
