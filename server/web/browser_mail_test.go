package web_test

import (
	"bytes"
	"encoding/base64"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/capturedev/capture/store"
)

// imageProbe is a web server that reports each request for its image, to
// show when a message's remote image is loaded.
func imageProbe(t *testing.T) (string, <-chan string) {
	t.Helper()
	hits := make(chan string, 16)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- r.URL.Path
		w.Header().Set("Content-Type", "image/gif")
		w.Write([]byte("GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"))
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String(), hits
}

func TestBrowserLiveMessageHTMLSandboxAndAttachment(t *testing.T) {
	e := start(t)
	probe, hits := imageProbe(t)
	b := newBrowser(t, e, desktop)
	b.signIn()
	pid := e.boot.Project.ID
	b.open("/projects/" + pid + "/inboxes/" + e.boot.Inbox.ID)
	b.waitFor(`!document.querySelector("[data-live-status]").hidden`)

	html := `<!doctype html><html><body><h1 id="greeting">Hello from HTML</h1>` +
		`<img src="` + probe + `/pixel.gif" alt="pixel">` +
		`<script>document.body.setAttribute("data-ran", "yes")</script></body></html>`
	pdf := "%PDF-1.4 pretend\x00\x01binary"
	raw := "From: Shop <shop@example.com>\nTo: Alice <alice@example.com>\nSubject: Your receipt\nMIME-Version: 1.0\n" +
		"Content-Type: multipart/mixed; boundary=B1\n\n--B1\nContent-Type: text/html; charset=utf-8\n\n" + html +
		"\n--B1\nContent-Type: application/pdf; name=receipt.pdf\nContent-Disposition: attachment; filename=receipt.pdf\n" +
		"Content-Transfer-Encoding: base64\n\n" + b64(pdf) + "\n--B1--\n"
	e.sendMail(t, e.boot.Inbox, "shop@example.com", []string{"alice@example.com"}, raw)

	// It appears without a reload.
	b.waitFor(`document.querySelector("a.row .subj")?.textContent === "Your receipt"`)
	if got := run(b, textOf(`a.row .c-from`)); got != "Shop" {
		t.Errorf("from column %q", got)
	}
	b.clickCSSAndLoad(`a.row`)

	// The HTML tab shows the body in a sandboxed frame, without its script
	// and without the remote image until asked.
	sandbox := run(b, chromedp.AttributeValue(chromedp.CSS(`iframe.mail-html`), "sandbox"))
	if !sandbox.Exists || strings.Contains(sandbox.Value, "allow-scripts") || strings.Contains(sandbox.Value, "allow-same-origin") {
		t.Fatalf("iframe sandbox attribute %+v", sandbox)
	}
	frame := b.frameText(`#greeting`)
	if frame != "Hello from HTML" {
		t.Errorf("frame shows %q", frame)
	}
	if ran := b.frameEval(`document.body.getAttribute("data-ran")`); ran != "" {
		t.Errorf("the message's script ran: data-ran=%q", ran)
	}
	select {
	case p := <-hits:
		t.Fatalf("remote image %s loaded before Load images", p)
	default:
	}
	b.click("button", "Load images")
	select {
	case p := <-hits:
		if p != "/pixel.gif" {
			t.Errorf("probe got %s", p)
		}
	case <-time.After(stepTimeout):
		t.Fatal("Load images did not load the remote image")
	}

	// The attachment downloads as a file.
	b.clickAndLoad("link", "Attachments (1)")
	name, data := b.download("link", "Download receipt.pdf")
	if name != "receipt.pdf" || !bytes.Equal(data, []byte(pdf)) {
		t.Errorf("downloaded %q: %q", name, data)
	}

	// Delete asks first, then removes the message and goes back to the list.
	b.clickAndLoad("button", "Delete")
	if !b.asked("Delete this message?") {
		t.Error("Delete did not ask first")
	}
	if got := run(b, textOf(`[role=status]`)); !strings.Contains(got, "Deleted the message") {
		t.Errorf("after Delete: %q", got)
	}
	if left, _ := e.st.Messages(t.Context(), e.boot.Inbox.ID, store.MessageFilter{}, store.Page{}); len(left.Items) != 0 {
		t.Errorf("%d messages left after Delete", len(left.Items))
	}
	b.checkClean()
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
