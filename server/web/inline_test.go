package web_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/capturedev/capture/server/web"
	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/storetest"
)

// inlineURL is the address of an inline part in a message's HTML: on
// this site, whatever its name, so root-relative.
var inlineURL = regexp.MustCompile(`/projects/[^"'\s]+/inline/[^"'\s]+`)

// onlyMessage sends raw and returns the message it made, the inbox's only
// one.
func (e *env) onlyMessage(t *testing.T, from, raw string) store.Message {
	t.Helper()
	e.sendMail(t, e.boot.Inbox, from, []string{"bob@example.com"}, raw)
	list, err := e.st.Messages(t.Context(), e.boot.Inbox.ID, store.MessageFilter{}, store.Page{})
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("messages: %v %v", list.Items, err)
	}
	m, err := e.st.Message(t.Context(), e.boot.Project.ID, list.Items[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// related is a multipart/related message of an HTML body and parts, each
// given whole with its headers.
func related(html string, parts ...string) string {
	var b strings.Builder
	b.WriteString("From: a@example.com\nTo: bob@example.com\nSubject: inline parts\nMIME-Version: 1.0\n" +
		"Content-Type: multipart/related; boundary=R\n\n--R\nContent-Type: text/html; charset=utf-8\n\n" + html + "\n")
	for _, p := range parts {
		b.WriteString("--R\n" + p + "\n")
	}
	b.WriteString("--R--\n")
	return b.String()
}

// part is a base64 part with headers.
func part(headers string, data []byte) string {
	enc := base64.StdEncoding.EncodeToString(data)
	var lines []string
	for len(enc) > 76 {
		lines, enc = append(lines, enc[:76]), enc[76:]
	}
	return headers + "\nContent-Transfer-Encoding: base64\n\n" + strings.Join(append(lines, enc), "\n")
}

// fetchInline asks site for an inline part at u, as the message's frame
// does: with no session cookie.
func fetchInline(t *testing.T, site, u string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(site + u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// One large image referenced many times makes the HTML longer by a short
// address per reference, not by a copy of the image each time: the HTML
// served stays within the message's size, and the image is served once,
// from its own address.
func TestInlineImageReferencesDoNotMultiplyIt(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	img := make([]byte, 2<<20)
	rand.Read(img)
	copy(img, "\x89PNG\r\n\x1a\n")
	const refs = 150
	html := strings.Repeat(`<img src="cid:i1">`, refs)
	raw := related(html, part("Content-Type: image/png\nContent-ID: <i1>", img))
	m := e.onlyMessage(t, "a@example.com", raw)

	resp := c.get("/projects/" + e.boot.Project.ID + "/messages/" + m.ID + "/html")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("html: %d %s", resp.StatusCode, resp.body)
	}
	// A short address per reference; a copy of the image each would be
	// 150 × 2.8 MB.
	if limit := len(html) + refs*256; len(resp.body) > limit || len(resp.body) > len(raw) {
		t.Fatalf("the HTML of a %d-byte message is %d bytes, more than %d", len(raw), len(resp.body), limit)
	}
	urls := inlineURL.FindAllString(resp.body, -1)
	if len(urls) != refs {
		t.Fatalf("%d inline addresses in the HTML, want %d", len(urls), refs)
	}
	for _, u := range urls[1:] {
		if u != urls[0] {
			t.Fatalf("one part has two addresses: %s and %s", urls[0], u)
		}
	}
	got, data := fetchInline(t, e.base, urls[0])
	if got.StatusCode != http.StatusOK || got.Header.Get("Content-Type") != "image/png" || !bytes.Equal(data, img) {
		t.Fatalf("inline part: %d %q, %d bytes", got.StatusCode, got.Header.Get("Content-Type"), len(data))
	}
	if got.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.HasPrefix(got.Header.Get("Content-Security-Policy"), "sandbox;") ||
		got.Header.Get("Cross-Origin-Resource-Policy") != "cross-origin" {
		t.Errorf("inline part headers: %v", got.Header)
	}
	// The frame may load images of this site, where its inline parts
	// are, and nothing remote until asked.
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "img-src data: 'self';") {
		t.Errorf("HTML CSP %q, want img-src data: 'self'", csp)
	}
}

// Past maxInlineRefs references, the rest stay cid: references, so even a
// body of nothing but references grows by a bounded amount.
func TestInlineReferencesBounded(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	const refs = 20000
	html := strings.Repeat(`<img src="cid:i">`, refs)
	m := e.onlyMessage(t, "a@example.com", related(html, part("Content-Type: image/gif\nContent-ID: <i>", []byte(tinyGIF))))
	body := c.get("/projects/" + e.boot.Project.ID + "/messages/" + m.ID + "/html").body
	if n := len(inlineURL.FindAllString(body, -1)); n != 1000 {
		t.Errorf("%d references made addresses, want the first 1000", n)
	}
	if limit := len(html) + 1000*256; len(body) > limit {
		t.Errorf("the HTML is %d bytes, more than %d", len(body), limit)
	}
}

const tinyGIF = "GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"

// A cid: reference finds its part by Content-ID whatever type the part
// is labelled with, and the part is served as the image its bytes are;
// a part that is no image stays a broken image, never a page.
func TestInlinePartsServedAsImagesOnly(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	pid := e.boot.Project.ID

	// A signature labelled application/octet-stream.
	raw, err := os.ReadFile("testdata/octet_cid.eml")
	if err != nil {
		t.Fatal(err)
	}
	// sendMail writes each line with CRLF itself.
	m := e.onlyMessage(t, "a@example.com", strings.ReplaceAll(string(raw), "\r\n", "\n"))
	urls := inlineURL.FindAllString(c.get("/projects/"+pid+"/messages/"+m.ID+"/html").body, -1)
	if len(urls) != 1 {
		t.Fatalf("the octet-stream part's reference: %d addresses", len(urls))
	}
	if resp, data := fetchInline(t, e.base, urls[0]); resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/png" ||
		!bytes.HasPrefix(data, []byte("\x89PNG")) {
		t.Errorf("the octet-stream signature: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	svg := `<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><rect width="4" height="4" fill="red"/></svg>`
	html := `<img id="angle" src="cid:%3Cbracketed@x%3E"><img id="page" src="cid:page@x">` +
		`<img id="liar" src="cid:liar@x"><img id="svg" src="cid:svg@x">`
	m = e.onlyMessage(t, "a@example.com", related(html,
		part("Content-Type: image/gif\nContent-ID: <bracketed@x>", []byte(tinyGIF)),
		part("Content-Type: text/html\nContent-Disposition: attachment; filename=page.html\nContent-ID: <page@x>", []byte("<html><script>alert(1)</script></html>")),
		part("Content-Type: image/png\nContent-ID: <liar@x>", []byte("<!DOCTYPE html><script>alert(1)</script>")),
		part("Content-Type: image/svg+xml\nContent-ID: <svg@x>", []byte(svg)),
	))
	body := c.get("/projects/" + pid + "/messages/" + m.ID + "/html").body
	served := map[string]string{}
	for _, id := range []string{"angle", "page", "liar", "svg"} {
		src := regexp.MustCompile(`id="` + id + `" src="([^"]+)"`).FindStringSubmatch(body)
		if src == nil || !inlineURL.MatchString(src[1]) {
			t.Fatalf("%s: no inline address in %s", id, body)
		}
		resp, _ := fetchInline(t, e.base, src[1])
		served[id] = resp.Status + " " + resp.Header.Get("Content-Type")
		if resp.StatusCode != http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "image/") {
			t.Errorf("%s: an error served as an image", id)
		}
	}
	want := map[string]string{
		"angle": "200 OK image/gif",
		"page":  "404 Not Found application/json",
		"liar":  "404 Not Found application/json",
		"svg":   "200 OK image/svg+xml",
	}
	for id, w := range want {
		if !strings.HasPrefix(served[id], w) {
			t.Errorf("%s served as %q, want %q", id, served[id], w)
		}
	}

	// The address is its own permission, for that part only.
	good := regexp.MustCompile(`id="angle" src="([^"]+)"`).FindStringSubmatch(body)[1]
	// Its signature's last character changed, to a different one always.
	last := "x"
	if strings.HasSuffix(good, last) {
		last = "y"
	}
	if resp, _ := fetchInline(t, e.base, good[:len(good)-1]+last); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a forged signature: %d", resp.StatusCode)
	}
	svgURL := regexp.MustCompile(`id="svg" src="([^"]+)"`).FindStringSubmatch(body)[1]
	_, svgToken, _ := strings.Cut(svgURL, "?")
	other, _, _ := strings.Cut(good, "?")
	if resp, _ := fetchInline(t, e.base, other+"?"+svgToken); resp.StatusCode != http.StatusNotFound {
		t.Errorf("one part's signature opened another: %d", resp.StatusCode)
	}
}

// inlineMessage is a message whose HTML shows one inline GIF, and the
// address its HTML view, as the signed-in c sees it on the env's server,
// gives that image.
func inlineMessage(t *testing.T, e *env, c *client) (htmlPath, imagePath string) {
	t.Helper()
	m := e.onlyMessage(t, "a@example.com", related(`<p><img id="logo" src="cid:logo@x"></p>`,
		part("Content-Type: image/gif\nContent-ID: <logo@x>", []byte(tinyGIF))))
	htmlPath = "/projects/" + e.boot.Project.ID + "/messages/" + m.ID + "/html"
	resp := c.get(htmlPath)
	urls := inlineURL.FindAllString(resp.body, -1)
	if resp.StatusCode != http.StatusOK || len(urls) != 1 {
		t.Fatalf("html: %d, inline addresses %q in %s", resp.StatusCode, urls, resp.body)
	}
	return htmlPath, urls[0]
}

// webOn serves the web interface over another store opened on e's
// database, as another replica, or this one after a restart, does.
func webOn(t *testing.T, e *env) *httptest.Server {
	t.Helper()
	ui := httptest.NewServer(web.New(storetest.OpenAgain(t, e.st), web.Config{SMTPHost: "localhost",
		Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(ui.Close)
	return ui
}

// An inline image's address opens on whichever replica sharing the
// database the browser's request reaches, as replicas behind a balancer
// without stickiness take turns, and still opens after the server
// restarts, for the hour it is signed for.
func TestInlineAddressOpensOnEveryReplicaAndAfterRestart(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	htmlPath, signedByA := inlineMessage(t, e, c)

	replicaB := webOn(t, e)
	if resp, data := fetchInline(t, replicaB.URL, signedByA); resp.StatusCode != http.StatusOK || string(data) != tinyGIF {
		t.Errorf("an address signed by one replica, on another: %d %s", resp.StatusCode, data)
	}
	// The session is the database's too: B signs the HTML it serves.
	b := *c
	b.base = replicaB.URL
	signedByB := inlineURL.FindString(b.get(htmlPath).body)
	if signedByB == "" {
		t.Fatal("replica B's HTML has no inline address")
	}
	if resp, data := fetchInline(t, e.base, signedByB); resp.StatusCode != http.StatusOK || string(data) != tinyGIF {
		t.Errorf("an address signed by another replica: %d %s", resp.StatusCode, data)
	}

	// A restart: B's process gone, a new one on the same database.
	replicaB.Close()
	restarted := webOn(t, e)
	for _, u := range []string{signedByA, signedByB} {
		if resp, data := fetchInline(t, restarted.URL, u); resp.StatusCode != http.StatusOK || string(data) != tinyGIF {
			t.Errorf("an address signed before a restart, after it: %d %s", resp.StatusCode, data)
		}
	}
	// Still signed: another message's address is no permission here.
	if resp, _ := fetchInline(t, restarted.URL, strings.Replace(signedByA, "/messages/", "/messages/x", 1)); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an address of another message: %d", resp.StatusCode)
	}
}

// Behind a proxy that passes its upstream's name as Host (nginx's
// proxy_pass without proxy_set_header Host), the inline images still point
// at the site the browser reached: their addresses are root-relative and
// the frame's policy allows 'self', never a host the request named. A
// <base href> in the message cannot move them.
func TestInlineAddressesDoNotDependOnHost(t *testing.T) {
	e := start(t)
	c := e.client(t)
	c.signIn(e)
	htmlPath, _ := inlineMessage(t, e, c)
	req, err := http.NewRequest("GET", e.base+htmlPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The browser sends its cookies for the site it reached; the proxy
	// passes them on under its own Host.
	for _, cookie := range c.Jar.Cookies(req.URL) {
		req.AddCookie(cookie)
	}
	req.Host = "capture_http"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	body, csp := string(b), resp.Header.Get("Content-Security-Policy")
	src := regexp.MustCompile(`id="logo" src="([^"]+)"`).FindStringSubmatch(body)
	if resp.StatusCode != http.StatusOK || src == nil || !strings.HasPrefix(src[1], "/projects/") || strings.Contains(body, "capture_http") {
		t.Fatalf("HTML asked for as capture_http: %d %s", resp.StatusCode, body)
	}
	if strings.Contains(csp, "capture_http") || !strings.Contains(csp, "img-src data: 'self';") || !strings.Contains(csp, "base-uri 'none'") {
		t.Errorf("HTML CSP asked for as capture_http: %q", csp)
	}
	// The only <base> before the message's is ours, whose href is the
	// frame's own address.
	if !strings.HasPrefix(body, `<base href="" target="_blank">`) {
		t.Errorf("the HTML does not begin with its own <base>: %.80s", body)
	}
	if got, data := fetchInline(t, e.base, src[1]); got.StatusCode != http.StatusOK || string(data) != tinyGIF {
		t.Errorf("the root-relative address: %d %s", got.StatusCode, data)
	}
}
