package web_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/server/web"
	"github.com/capturedev/capture/store"
)

func cookieOf(resp response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func TestSignInWithLinkAndSignOut(t *testing.T) {
	e := start(t)
	c := e.client(t)

	if resp := c.get("/"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?next=%2F" {
		t.Fatalf("signed-out /: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if page := c.get("/login"); !strings.Contains(page.body, "No password is set yet") {
		t.Errorf("before set-password the page should point to the link:\n%s", page.body)
	}

	// Opening the link signs in, and goes where next says.
	link := e.loginLink(t)
	resp := c.get(link + "&next=%2Fprojects")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/projects" {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.body)
	}
	sess := cookieOf(resp, "capture_session")
	if sess == nil || !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode || sess.Secure || sess.Path != "/" {
		t.Fatalf("session cookie %+v", sess)
	}
	if page := c.get("/projects"); page.StatusCode != http.StatusOK || !strings.Contains(page.body, "Sign out") {
		t.Fatalf("after the link: %d %s", page.StatusCode, page.body)
	}

	// The link works once, and a refused one is slowed like a password.
	began := time.Now()
	again := e.client(t)
	if resp := again.get(link); resp.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(resp.body, "cannot be used") || cookieOf(resp, "capture_session") != nil {
		t.Errorf("reused link: %d %s", resp.StatusCode, resp.body)
	}
	if d := time.Since(began); d < time.Second {
		t.Errorf("a refused link was answered after %s, want at least 1s", d)
	}
	// Posted from a form, as from a page of another site, a token is
	// refused without the sign-in form's cookie.
	fresh := e.loginLink(t)
	form := url.Values{"csrf": {"x"}, "token": {strings.TrimPrefix(fresh, e.base+"/login?token=")}}
	if resp := e.client(t).post("/login", form); resp.StatusCode != http.StatusForbidden {
		t.Errorf("sign-in without the form cookie: %d", resp.StatusCode)
	}

	// The read API never takes the session cookie.
	if resp := c.get("/api/v1/me"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("API with the session cookie: %d %s", resp.StatusCode, resp.body)
	}

	// Sign-out needs the CSRF token, and ends the session on the server.
	if resp := c.post("/logout", url.Values{}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("sign-out without a CSRF token: %d", resp.StatusCode)
	}
	pageToken := csrf(t, c.get("/projects").body)
	if resp := c.post("/logout", url.Values{"csrf": {pageToken}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	stolen := e.client(t)
	u, _ := url.Parse(e.base)
	stolen.Jar.SetCookies(u, []*http.Cookie{{Name: "capture_session", Value: sess.Value}})
	if resp := stolen.get("/projects"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the signed-out session still opens pages: %d", resp.StatusCode)
	}
}

// Parallel wrong passwords from one client wait their turn; one that
// would wait too long is refused with 429 at once, never left without an
// answer when the listener's write timeout cuts it.
func TestParallelSignInsAllAnswered(t *testing.T) {
	defer web.SetMaxTurnWait(1500 * time.Millisecond)()
	e := start(t)
	if err := e.st.SetPassword(t.Context(), "hunter2hunter2"); err != nil {
		t.Fatal(err)
	}
	c := e.client(t)
	page := c.get("/login")
	form := url.Values{"csrf": {csrf(t, page.body)}, "password": {"wrong-wrong"}}
	type answer struct {
		status     int
		retryAfter string
		body       string
	}
	answers := make(chan answer, 4)
	for range 4 {
		go func() {
			req, _ := http.NewRequest("POST", e.base+"/login", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := c.Do(req)
			if err != nil {
				answers <- answer{body: err.Error()}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers <- answer{resp.StatusCode, resp.Header.Get("Retry-After"), string(b)}
		}()
	}
	busy := 0
	for range 4 {
		a := <-answers
		switch a.status {
		case http.StatusUnauthorized:
		case http.StatusTooManyRequests:
			busy++
			if a.retryAfter == "" || !strings.Contains(a.body, "Too many sign-in attempts at once") {
				t.Errorf("refused attempt: Retry-After %q, %s", a.retryAfter, a.body)
			}
		default:
			t.Errorf("attempt answered %d: %s", a.status, a.body)
		}
	}
	if busy == 0 {
		t.Error("four parallel wrong passwords all waited their turn past the bound")
	}
}

func TestSignInWithPassword(t *testing.T) {
	e := start(t)
	if err := e.st.SetPassword(t.Context(), "hunter2hunter2"); err != nil {
		t.Fatal(err)
	}
	c := e.client(t)
	page := c.get("/login?next=/projects")
	try := func(password string) (response, time.Duration) {
		began := time.Now()
		resp := c.post("/login", url.Values{"csrf": {csrf(t, page.body)}, "password": {password}, "next": {"/projects"}})
		return resp, time.Since(began)
	}
	resp, took := try("hunter2hunter3")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.body, "Sign-in failed. Check the password and try again.") {
		t.Fatalf("wrong password: %d %s", resp.StatusCode, resp.body)
	}
	if took < time.Second {
		t.Errorf("a wrong password was answered after %s, want at least 1s", took)
	}
	// A second failure in a row waits longer.
	if _, took := try(""); took < 2*time.Second {
		t.Errorf("a second wrong password was answered after %s, want at least 2s", took)
	}
	resp, _ = try("hunter2hunter2")
	if resp.StatusCode != http.StatusSeeOther || cookieOf(resp, "capture_session") == nil {
		t.Fatalf("right password: %d %s", resp.StatusCode, resp.body)
	}
}

func TestSecureCookieBehindHTTPS(t *testing.T) {
	e := start(t)
	c := e.client(t)
	https := http.Header{"X-Forwarded-Proto": {"https"}}
	resp := c.do("GET", e.loginLink(t), nil, https)
	if s := cookieOf(resp, "capture_session"); s == nil || !s.Secure {
		t.Fatalf("session cookie over https: %+v", s)
	}
}

func TestCSRFRefused(t *testing.T) {
	e := start(t)
	c := e.client(t)
	token := c.signIn(e)
	pid := e.boot.Project.ID
	keysBefore, _ := e.st.Keys(t.Context(), pid)

	if _, err := e.st.RevokeKey(t.Context(), e.boot.Key.ID); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		form   url.Values
		header http.Header
	}{
		"no token":    {url.Values{}, nil},
		"wrong token": {url.Values{"csrf": {"x" + token}}, nil},
		"cross-site":  {url.Values{"csrf": {token}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}},
	} {
		resp := c.do("POST", "/projects/"+pid+"/keys", tc.form, tc.header)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d", name, resp.StatusCode)
		}
	}
	keys, _ := e.st.Keys(t.Context(), pid)
	if len(keys) != len(keysBefore) {
		t.Fatalf("a refused post created a key: %d keys, had %d", len(keys), len(keysBefore))
	}
	if resp := c.post("/projects/"+pid+"/keys", url.Values{"csrf": {token}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("with the token: %d", resp.StatusCode)
	}
}

func TestQuotaErrorOnThePage(t *testing.T) {
	e := start(t)
	c := e.client(t)
	token := c.signIn(e)
	resp := c.post("/projects/"+e.boot.Project.ID+"/keys", url.Values{"csrf": {token}})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.body, "quota_exceeded: the free plan allows 1") {
		t.Fatalf("second key on free: %d %s", resp.StatusCode, resp.body)
	}
}

func TestHeadersOfPagesAndDownloads(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	e.sendMail(t, e.boot.Inbox, "a@example.com", []string{"b@example.com"}, mimeWithAttachment("Headers", "<p>hi</p>", "x.html", "<script>1</script>"))
	msgs, err := e.st.Messages(t.Context(), e.boot.Inbox.ID, store.MessageFilter{}, store.Page{})
	if err != nil || len(msgs.Items) != 1 {
		t.Fatalf("messages: %v %v", msgs, err)
	}
	m, _ := e.st.Message(t.Context(), e.boot.Project.ID, msgs.Items[0].ID)
	pid := e.boot.Project.ID
	base := "/projects/" + pid

	if resp := e.client(t).get("/login"); resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Errorf("/login: %d %v", resp.StatusCode, resp.Header)
	}
	for _, p := range []string{"/projects", base + "/keys", base + "/inboxes", base + "/endpoints",
		base + "/inboxes/" + e.boot.Inbox.ID, base + "/messages/" + m.ID, base + "/endpoints/" + e.boot.Endpoint.ID} {
		resp := c.get(p)
		csp := resp.Header.Get("Content-Security-Policy")
		if resp.StatusCode != http.StatusOK || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") ||
			!strings.Contains(csp, "frame-ancestors 'none'") || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: %d, CSP %q", p, resp.StatusCode, csp)
		}
	}

	// Images from the message itself (this site) and from nowhere else,
	// until asked.
	html := c.get(base + "/messages/" + m.ID + "/html")
	if csp := html.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "sandbox") ||
		!strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "img-src data: 'self';") || !strings.Contains(csp, "base-uri 'none'") {
		t.Errorf("HTML body CSP %q", csp)
	}
	if csp := c.get(base + "/messages/" + m.ID + "/html?images=1").Header.Get("Content-Security-Policy"); !strings.Contains(csp, "img-src data: 'self' http: https:;") {
		t.Errorf("HTML body CSP with images %q", csp)
	}

	for _, p := range []string{base + "/messages/" + m.ID + "/raw", base + "/messages/" + m.ID + "/attachments/" + m.Attachments[0].ID} {
		resp := c.get(p)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment;") ||
			resp.Header.Get("X-Content-Type-Options") != "nosniff" || strings.Contains(resp.Header.Get("Content-Type"), "html") {
			t.Errorf("%s: %d %v", p, resp.StatusCode, resp.Header)
		}
	}
	if got := c.get(base + "/messages/" + m.ID + "/attachments/" + m.Attachments[0].ID).body; got != "<script>1</script>" {
		t.Errorf("attachment bytes %q", got)
	}

	// Another project's id in the path finds nothing.
	other, _ := e.st.CreateProject(t.Context(), "other", "free")
	if resp := c.get("/projects/" + other.ID + "/messages/" + m.ID); resp.StatusCode != http.StatusNotFound {
		t.Errorf("message through another project: %d", resp.StatusCode)
	}
}

// mimeWithAttachment is a multipart message with an HTML body and one
// attachment.
func mimeWithAttachment(subject, html, filename, attachment string) string {
	return "From: Sender <a@example.com>\nTo: b@example.com\nSubject: " + subject + "\nMIME-Version: 1.0\n" +
		"Content-Type: multipart/mixed; boundary=XYZ\n\n--XYZ\nContent-Type: text/html; charset=utf-8\n\n" + html +
		"\n--XYZ\nContent-Type: text/html; name=\"" + filename + "\"\nContent-Disposition: attachment; filename=\"" + filename +
		"\"\n\n" + attachment + "\n--XYZ--\n"
}

// Without the page's script, a destructive form is confirmed on a page of
// its own before anything is deleted (SPEC §11: every page works as plain
// HTML forms; delete and purge ask first).
func TestDeleteAsksWithoutScript(t *testing.T) {
	e := start(t)
	c := e.client(t)
	token := c.signIn(e)
	e.sendMail(t, e.boot.Inbox, "a@example.com", []string{"b@example.com"}, "Subject: doomed\r\n\r\nbody\r\n")
	list, err := e.st.Messages(t.Context(), e.boot.Inbox.ID, store.MessageFilter{}, store.Page{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("messages: %v %v", list.Items, err)
	}
	pid, id := e.boot.Project.ID, list.Items[0].ID
	form := url.Values{"csrf": {token}, "inbox": {e.boot.Inbox.ID},
		"question": {"Delete this message? This cannot be undone."}, "button": {"Delete"}}
	page := c.post("/projects/"+pid+"/messages/"+id+"/delete", form)
	if page.StatusCode != http.StatusOK || !strings.Contains(page.body, "<h1>Delete this message? This cannot be undone.</h1>") ||
		!strings.Contains(page.body, `name="confirmed" value="yes"`) || !strings.Contains(page.body, `>Delete</button>`) ||
		!strings.Contains(page.body, `name="inbox" value="`+e.boot.Inbox.ID+`"`) {
		t.Fatalf("confirmation page: %d %s", page.StatusCode, page.body)
	}
	if _, err := e.st.Message(t.Context(), pid, id); err != nil {
		t.Fatalf("the message went before it was confirmed: %v", err)
	}
	form.Set("csrf", csrf(t, page.body))
	form.Set("confirmed", "yes")
	if resp := c.post("/projects/"+pid+"/messages/"+id+"/delete", form); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("confirmed delete: %d %s", resp.StatusCode, resp.body)
	}
	if _, err := e.st.Message(t.Context(), pid, id); err == nil {
		t.Error("the message is still there after the confirmed delete")
	}
	// A page left open while another client deleted the message: its
	// Delete is done already, and says so, back on the inbox.
	resp := c.post("/projects/"+pid+"/messages/"+id+"/delete", form)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/projects/"+pid+"/inboxes/"+e.boot.Inbox.ID {
		t.Errorf("delete of a deleted message: %d %v %s", resp.StatusCode, resp.Header, resp.body)
	}
	if page := c.get("/projects/" + pid + "/inboxes/" + e.boot.Inbox.ID); !strings.Contains(page.body, "The message was already deleted.") {
		t.Errorf("the inbox does not say the message was already deleted: %s", page.body)
	}
}

// Without a script, Reveal is a link to the page with the password shown,
// which offers Hide, a link back to the page without it.
func TestRevealAndHideWithoutScript(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	pid, in := e.boot.Project.ID, e.boot.Inbox
	page := c.get("/projects/" + pid + "/inboxes")
	if strings.Contains(page.body, in.SMTPPassword) || !strings.Contains(page.body, `>Reveal</button>`) {
		t.Fatalf("before Reveal: the password is shown or Reveal is missing: %s", page.body)
	}
	page = c.get("/projects/" + pid + "/inboxes?reveal=" + in.ID)
	if !strings.Contains(page.body, `value="`+in.SMTPPassword+`"`) || !strings.Contains(page.body, `>Hide</button>`) ||
		strings.Contains(page.body, `name="reveal"`) {
		t.Fatalf("after Reveal: want the password and a Hide button that drops reveal=: %s", page.body)
	}
}

// An attachment without a file name downloads as its id with the
// extension of its content type, so that it opens with the right program.
func TestUnnamedAttachmentDownloadName(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	raw := "From: a@example.com\nTo: b@example.com\nSubject: invoice\nMIME-Version: 1.0\n" +
		"Content-Type: multipart/mixed; boundary=XYZ\n\n--XYZ\nContent-Type: text/plain\n\nsee attached\n" +
		"--XYZ\nContent-Type: application/pdf\nContent-Disposition: attachment\n\n%PDF-1.4\n--XYZ--\n"
	e.sendMail(t, e.boot.Inbox, "a@example.com", []string{"b@example.com"}, raw)
	msgs, err := e.st.Messages(t.Context(), e.boot.Inbox.ID, store.MessageFilter{}, store.Page{})
	if err != nil || len(msgs.Items) != 1 {
		t.Fatalf("messages: %v %v", msgs, err)
	}
	m, _ := e.st.Message(t.Context(), e.boot.Project.ID, msgs.Items[0].ID)
	if len(m.Attachments) != 1 || m.Attachments[0].Filename != "" {
		t.Fatalf("attachments: %+v", m.Attachments)
	}
	a := m.Attachments[0]
	resp := c.get("/projects/" + e.boot.Project.ID + "/messages/" + m.ID + "/attachments/" + a.ID)
	if want := `filename=` + a.ID + `.pdf`; resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Disposition"), want) {
		t.Errorf("download: %d Content-Disposition %q, want %s", resp.StatusCode, resp.Header.Get("Content-Disposition"), want)
	}
}

// The page shows an attachment's name as the sender wrote it (escaped);
// only the download's name is made safe for a file system.
func TestAttachmentNameShownAsSent(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	e.sendMail(t, e.boot.Inbox, "a@example.com", []string{"b@example.com"},
		mimeWithAttachment("quotes", "<p>hi</p>", `invoice \"<x>\".pdf`, "%PDF"))
	msgs, err := e.st.Messages(t.Context(), e.boot.Inbox.ID, store.MessageFilter{}, store.Page{})
	if err != nil || len(msgs.Items) != 1 {
		t.Fatalf("messages: %v %v", msgs, err)
	}
	m, _ := e.st.Message(t.Context(), e.boot.Project.ID, msgs.Items[0].ID)
	if len(m.Attachments) != 1 || m.Attachments[0].Filename != `invoice "<x>".pdf` {
		t.Fatalf("attachments: %+v", m.Attachments)
	}
	page := c.get("/projects/" + e.boot.Project.ID + "/messages/" + m.ID + "?tab=attachments")
	if !strings.Contains(page.body, `<td>invoice &#34;&lt;x&gt;&#34;.pdf`) || strings.Contains(page.body, "<x>") {
		t.Errorf("attachment row: %s", page.body)
	}
	dl := c.get("/projects/" + e.boot.Project.ID + "/messages/" + m.ID + "/attachments/" + m.Attachments[0].ID)
	if cd := dl.Header.Get("Content-Disposition"); strings.Contains(cd, `\"`) || !strings.Contains(cd, "invoice") {
		t.Errorf("download name: %q", cd)
	}
}

// A sign-in link's next= never leads to another site, however it is spelled
// for a browser to read it as one.
func TestSignInNextStaysOnSite(t *testing.T) {
	e := start(t)
	for next, want := range map[string]string{
		"/%09/evil.test":    "/",
		"/%0A/evil.test":    "/",
		"/%0D%0A/evil.test": "/",
		"//evil.test":       "/",
		"/%5Cevil.test":     "/",
		"/%20/evil.test":    "/",
		"https://evil.test": "/",
		"/projects?x=1":     "/projects?x=1",
	} {
		resp := e.client(t).get(e.loginLink(t) + "&next=" + next)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
			t.Errorf("next=%s: %d to %q, want %q", next, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
}

// A name with a comma is quoted wherever recipients are listed, so
// "Smith, John" does not read as two of them; the list's To column shows
// the To recipients only, as its heading says.
func TestRecipientsShownApart(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	e.sendMail(t, e.boot.Inbox, "a@example.com", []string{"zoe@example.org", "js@example.org", "cc@example.org"},
		"From: a@example.com\nTo: Zoë <zoe@example.org>, \"Smith, John\" <js@example.org>\nCc: Copy <cc@example.org>\n"+
			"Subject: recipients\n\nhi\n")
	msgs, err := e.st.Messages(t.Context(), e.boot.Inbox.ID, store.MessageFilter{}, store.Page{})
	if err != nil || len(msgs.Items) != 1 {
		t.Fatalf("messages: %v %v", msgs, err)
	}
	const to = `Zoë &lt;zoe@example.org&gt;, &#34;Smith, John&#34; &lt;js@example.org&gt;`
	list := c.get("/projects/" + e.boot.Project.ID + "/inboxes/" + e.boot.Inbox.ID)
	if !strings.Contains(list.body, `<span class="c-to" title="`+to+`">`+to+`</span>`) {
		t.Errorf("list row's To: %s", list.body)
	}
	detail := c.get("/projects/" + e.boot.Project.ID + "/messages/" + msgs.Items[0].ID)
	if !strings.Contains(detail.body, "<dd>"+to+"</dd>") || !strings.Contains(detail.body, "<dd>Copy &lt;cc@example.org&gt;</dd>") {
		t.Errorf("detail's To and Cc: %s", detail.body)
	}
}

// A request deleted elsewhere while its page was open: the page's Delete
// goes back to its endpoint saying it was already deleted.
func TestDeleteADeletedRequest(t *testing.T) {
	e := start(t)
	c := e.client(t)
	token := c.signIn(e)
	pid, ep := e.boot.Project.ID, e.boot.Endpoint.ID
	id := postWebhook(t, e, ep, "/hook", http.Header{"Content-Type": {"text/plain"}}, "doomed")
	page := c.get("/projects/" + pid + "/requests/" + id)
	if !strings.Contains(page.body, `name="endpoint" value="`+ep+`"`) {
		t.Fatalf("the request page's Delete form does not name its endpoint: %s", page.body)
	}
	if err := e.st.DeleteRequest(t.Context(), pid, id); err != nil {
		t.Fatal(err)
	}
	form := url.Values{"csrf": {token}, "endpoint": {ep}, "confirmed": {"yes"}}
	resp := c.post("/projects/"+pid+"/requests/"+id+"/delete", form)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/projects/"+pid+"/endpoints/"+ep {
		t.Errorf("delete of a deleted request: %d %v %s", resp.StatusCode, resp.Header, resp.body)
	}
	if page := c.get("/projects/" + pid + "/endpoints/" + ep); !strings.Contains(page.body, "The request was already deleted.") {
		t.Errorf("the endpoint page does not say the request was already deleted: %s", page.body)
	}
}
