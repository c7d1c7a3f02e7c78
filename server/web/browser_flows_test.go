package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/capturedev/capture/store"
)

func TestBrowserSignInWithPasswordAndLink(t *testing.T) {
	e := start(t)
	b := newBrowser(t, e, desktop)
	if err := e.st.SetPassword(t.Context(), "correct horse battery"); err != nil {
		t.Fatal(err)
	}

	b.open("/")
	b.fill("Password", "wrong horse battery")
	b.clickAndLoad("button", "Sign in")
	if got := run(b, textOf(`[role=alert]`)); !strings.Contains(got, "Sign-in failed") {
		t.Fatalf("wrong password: %q", got)
	}
	b.fill("Password", "correct horse battery")
	b.clickAndLoad("button", "Sign in")
	if !b.has("button", "Sign out") {
		t.Fatalf("not signed in after the right password; on %s", b.location())
	}
	b.clickAndLoad("button", "Sign out")
	if !b.has("button", "Sign in") {
		t.Fatalf("sign-out did not lead to the sign-in page; on %s", b.location())
	}

	// Opening the link signs in.
	link := e.loginLink(t)
	b.open(link)
	if !b.has("button", "Sign out") {
		t.Fatalf("the one-time link did not sign in; on %s", b.location())
	}
	b.clickAndLoad("button", "Sign out")

	b.open(link)
	if got := run(b, textOf(`[role=alert]`)); !strings.Contains(got, "cannot be used") {
		t.Fatalf("a reused link: %q", got)
	}
	if b.has("button", "Sign out") {
		t.Fatal("a reused link signed in")
	}
	b.checkClean()
}

// A sign-in link clicked on a page of another site (a CI log, a chat) signs
// in and lands where it leads, though the browser sends no SameSite=Strict
// cookie on the redirects of a click from another site.
func TestBrowserSignInLinkFromAnotherSite(t *testing.T) {
	e := start(t)
	b := newBrowser(t, e, desktop)
	link := e.loginLink(t) + "&next=%2Fprojects"
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>CI log</title><a href="%s">Sign in to capture</a>`, html.EscapeString(link))
	}))
	defer other.Close()
	// localhost is another site than 127.0.0.1, where capture's pages are.
	b.open(strings.Replace(other.URL, "127.0.0.1", "localhost", 1))
	b.clickAndLoad("link", "Sign in to capture")
	// The page signing in moves on by itself: a poll that the move
	// interrupts is sent again to the page it moved to.
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector("form.signout") !== null`))
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "navigated") && !strings.Contains(err.Error(), "Cannot find context") || ctx.Err() != nil {
			t.Fatalf("not signed in: %v (on %s)", err, b.location())
		}
	}
	if got := b.location(); got != e.base+"/projects" {
		t.Errorf("signed in on %s, want %s/projects", got, e.base)
	}
	b.checkClean()
}

func TestBrowserKeys(t *testing.T) {
	e := start(t)
	b := newBrowser(t, e, desktop)
	b.signIn()
	pid := e.boot.Project.ID
	b.open("/projects/" + pid + "/keys")

	// The free plan's limit is explained, and enforced with its code.
	if got := run(b, textOf(`#key-limit`)); !strings.Contains(got, "free plan allows one active API key") {
		t.Errorf("limit note: %q", got)
	}
	b.clickAndLoad("button", "Create API key")
	if got := run(b, textOf(`[role=alert]`)); !strings.Contains(got, "quota_exceeded") {
		t.Errorf("second key on free: %q", got)
	}

	// Revoking the bootstrap key makes the API refuse it at once.
	if status := apiStatus(t, e, e.boot.Secret); status != http.StatusOK {
		t.Fatalf("bootstrap key before revoking: %d", status)
	}
	b.clickAndLoad("button", "Revoke")
	if !b.asked("Revoke " + e.boot.Key.ID) {
		t.Error("Revoke did not ask first")
	}
	if status := apiStatus(t, e, e.boot.Secret); status != http.StatusUnauthorized {
		t.Errorf("revoked key: %d, want 401", status)
	}

	// A new key is shown once, with a copy button.
	b.clickAndLoad("button", "Create API key")
	secret := b.value("textbox", "New API key")
	if !strings.HasPrefix(secret, "cap_") {
		t.Fatalf("new key %q", secret)
	}
	b.click("button", "Copy")
	b.waitFor(`document.querySelector(".copied").textContent === "Copied"`)
	if got := b.clipboard(); got != secret {
		t.Errorf("clipboard %q, want the key", got)
	}
	if status := apiStatus(t, e, secret); status != http.StatusOK {
		t.Errorf("new key: %d", status)
	}
	// Reloading the page that showed it creates no other key (on a plan
	// that would allow one).
	if _, err := e.st.SetPlan(t.Context(), pid, "pro"); err != nil {
		t.Fatal(err)
	}
	keys, err := e.st.Keys(t.Context(), pid)
	if err != nil {
		t.Fatal(err)
	}
	if got := eval[string](b, `location.pathname`); got != "/projects/"+pid+"/keys" {
		t.Errorf("the page that shows a new key is at %q", got)
	}
	b.do(chromedp.Reload())
	b.waitFor(`document.readyState === "complete" && !document.querySelector("#new-key-value")`)
	if again, err := e.st.Keys(t.Context(), pid); err != nil || len(again) != len(keys) {
		t.Errorf("after a reload %d keys, before %d (%v): the reload created one", len(again), len(keys), err)
	}
	b.open("/projects/" + pid + "/keys")
	if html := eval[string](b, `document.documentElement.outerHTML`); strings.Contains(html, secret) {
		t.Error("the key is shown again after the page that created it")
	}
	b.checkClean()
}

func apiStatus(t *testing.T, e *env, key string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", e.base+"/api/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestBrowserInboxPasswordRevealCopyRotate(t *testing.T) {
	e := start(t)
	b := newBrowser(t, e, desktop)
	b.signIn()
	b.open("/projects/" + e.boot.Project.ID + "/inboxes")
	card := b.scope("region", "default")

	if v := b.value("textbox", "Password", card); v != "" {
		t.Fatalf("password shown before Reveal: %q", v)
	}
	b.click("button", "Reveal", card)
	b.waitFor(`document.getElementById("pw-` + e.boot.Inbox.ID + `").value !== ""`)
	if v := b.value("textbox", "Password", card); v != e.boot.Inbox.SMTPPassword {
		t.Fatalf("revealed %q, want the inbox's password", v)
	}
	// Hide masks it again, and Reveal shows it once more.
	pwType := `document.getElementById("pw-` + e.boot.Inbox.ID + `").type`
	b.click("button", "Hide", card)
	b.waitFor(pwType + ` === "password"`)
	b.click("button", "Reveal", card)
	b.waitFor(pwType + ` === "text"`)
	copyPassword := `[data-copy="pw-` + e.boot.Inbox.ID + `"]`
	b.do(chromedp.Click(chromedp.CSS(copyPassword)))
	b.waitFor(`document.querySelector("#` + e.boot.Inbox.ID + ` .copied:not(:empty)") !== null`)
	if got := b.clipboard(); got != e.boot.Inbox.SMTPPassword {
		t.Errorf("clipboard %q, want the password", got)
	}

	b.clickAndLoad("button", "Rotate", card)
	in, err := e.st.Inbox(t.Context(), "", e.boot.Inbox.ID)
	if err != nil {
		t.Fatal(err)
	}
	if in.SMTPPassword == e.boot.Inbox.SMTPPassword {
		t.Fatal("Rotate kept the password")
	}
	card = b.scope("region", "default")
	if v := b.value("textbox", "Password", card); v != in.SMTPPassword {
		t.Errorf("after Rotate the page shows %q, want the new password", v)
	}
	b.checkClean()
}

func TestBrowserEndpointSaveCopyPostLive(t *testing.T) {
	e := start(t)
	b := newBrowser(t, e, desktop)
	b.signIn()
	pid := e.boot.Project.ID

	// A custom response, saved on the settings page.
	b.open("/projects/" + pid + "/endpoints/" + e.boot.Endpoint.ID + "/settings")
	b.typeInto("spinbutton", "Status", "202")
	b.fill("Headers", "X-Test: yes")
	b.fill("Body", "accepted")
	b.clickAndLoad("button", "Save")
	if got := run(b, textOf(`[role=status]`)); !strings.Contains(got, "Saved") {
		t.Fatalf("after Save: %q", got)
	}

	b.open("/projects/" + pid + "/endpoints/" + e.boot.Endpoint.ID)
	b.waitFor(`!document.querySelector("[data-live-status]").hidden`)
	b.click("button", "Copy")
	b.waitFor(`document.querySelector(".copied").textContent === "Copied"`)
	captureURL := b.clipboard()
	if !strings.HasSuffix(captureURL, "/"+e.boot.Endpoint.ID) {
		t.Fatalf("copied %q", captureURL)
	}
	resp, err := http.Post(captureURL+"/orders?x=1", "application/json", strings.NewReader(`{"order":{"id":7,"paid":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 202 || resp.Header.Get("X-Test") != "yes" || string(got) != "accepted" {
		t.Errorf("custom response: %d %v %q", resp.StatusCode, resp.Header, got)
	}

	// The request appears without a reload, and opens with its JSON body
	// pretty-printed.
	b.waitFor(`document.querySelector("a.row .path")?.textContent === "/orders"`)
	b.clickCSSAndLoad(`a.row`)
	body := run(b, textOf(`pre.json`))
	var v any
	if json.Unmarshal([]byte(body), &v) != nil || !strings.Contains(body, "\n    \"id\": 7") {
		t.Errorf("body shown as %q", body)
	}

	// Delete all asks first, then empties the endpoint.
	b.open("/projects/" + pid + "/endpoints/" + e.boot.Endpoint.ID)
	b.clickAndLoad("button", "Delete all")
	if !b.asked("Delete every request of default?") {
		t.Error("Delete all did not ask first")
	}
	if n := eval[int](b, `document.querySelectorAll("a.row").length`); n != 0 {
		t.Errorf("%d rows after Delete all", n)
	}
	if left, _ := e.st.Requests(t.Context(), e.boot.Endpoint.ID, store.RequestFilter{}, store.Page{}); len(left.Items) != 0 {
		t.Errorf("%d requests left after Delete all", len(left.Items))
	}
	b.checkClean()
}
