package tui

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/store"
)

// row is the screen line that holds text.
func row(t *testing.T, screen, text string) string {
	t.Helper()
	for _, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, text) {
			return l
		}
	}
	t.Fatalf("no line with %q in:\n%s", text, screen)
	return ""
}

func TestLiveArrival(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	u := e.run(e.config())
	u.waitText("Confirm your account", "● live")

	// Nothing is typed from here on: the capture must come by itself.
	start := time.Now()
	e.insert(mail{from: "noreply@shop.test", to: "carol@example.test", subject: "Reset for Carol"})
	teatest.WaitFor(t, u.tm.Output(), func(b []byte) bool {
		return bytes.Contains(b, []byte("Reset for Carol"))
	}, teatest.WithDuration(3*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
	if d := time.Since(start); d > time.Second {
		t.Errorf("the new message took %s to show", d)
	}
	s := u.screen()
	// The cursor stays on what it was on, the newcomer above it.
	if l := row(t, s, "Reset for Carol"); !strings.Contains(l, " •") {
		t.Errorf("new arrival should be marked fresh above the cursor: %q", l)
	}
	if l := row(t, s, "Confirm your account"); !strings.Contains(l, "› ") {
		t.Errorf("the cursor left the message it was on: %q", l)
	}
	if l := row(t, s, "› default"); !strings.Contains(l, "4 +1") {
		t.Errorf("sources pane should count 4 with 1 new: %q", l)
	}
	u.keys("enter")
	u.waitText("Subject   Confirm your account")
	u.keys("esc")

	// The same for the endpoint, once selected.
	u.keys("shift+tab", "j")
	u.waitText("Requests · default", "● live")
	start = time.Now()
	e.post("POST", "/live/hook", "application/json", `{"live":true}`)
	s = u.waitText("/live/hook")
	if d := time.Since(start); d > time.Second {
		t.Errorf("the new request took %s to show", d)
	}
	if l := row(t, s, "/live/hook"); !strings.Contains(l, "•") || !strings.Contains(l, "POST") {
		t.Errorf("request row: %q", l)
	}
}

// TestOneWaitSlot checks that the viewer holds one of the project's four
// wait slots, also after hopping between sources: of four more waits,
// exactly one is refused.
func TestOneWaitSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	other, err := e.st.CreateInbox(t.Context(), e.boot.Project.ID, "other")
	if err != nil {
		t.Fatal(err)
	}
	u := e.run(e.config())
	u.waitText("Confirm your account", "● live")
	u.keys("shift+tab")
	for range 3 {
		u.keys("j", "k")
	}
	u.keys("j", "j") // on "other", then the endpoint
	u.waitText("Requests · default", "no requests yet", "● live")

	// Our four waits race the viewer's for the slots only if its wait has
	// not reached the server yet; then the viewer is the one refused, and
	// the round is run again once it holds its slot.
	for round := 1; ; round++ {
		refused := 0
		errs := make(chan error, 4)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				_, err := e.client.Messages(t.Context(), other.ID, apiclient.MessageQuery{Wait: 2 * time.Second})
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			switch {
			case contract.IsCode(err, contract.CodeTooManyWaits):
				refused++
			case err != nil:
				t.Fatal(err)
			}
		}
		if refused == 0 && round < 3 {
			u.waitText("● live")
			continue
		}
		if refused != 1 {
			t.Errorf("%d of 4 waits refused, want 1: the viewer should hold exactly one slot", refused)
		}
		return
	}
}

func TestNavigation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	e.post("PUT", "/bin", "application/octet-stream", "\xff\x00\x01binary\x02")
	e.post("POST", "/form", "application/x-www-form-urlencoded", "name=Ada+Lovelace&role=admin")
	u := e.run(e.config())
	u.waitText("Confirm your account", "● live")

	// j/k in the sources pane switch the list at once.
	u.keys("shift+tab", "j")
	u.waitText("Requests · default", "/form", "/bin")
	u.keys("k")
	u.waitText("Messages · default", "Welcome to the Shop")

	// tab to the list, down to the receipt, enter opens it.
	u.keys("tab", "j")
	u.waitFor("cursor on the receipt", func(s string) bool { return strings.Contains(row(t, s, "Your receipt"), "›") })
	u.keys("enter")
	s := u.waitText("Text (from HTML)", "Total: *42.00 EUR*", "Attachments (a saves)")
	if !strings.Contains(s, "esc back") {
		t.Errorf("full-screen detail at 80 columns should say how to go back:\n%s", s)
	}
	u.keys("esc")
	u.waitText("Welcome to the Shop")

	// G to the bottom, g to the top.
	u.keys("G")
	s = u.waitFor("cursor at the bottom", func(s string) bool { return strings.Contains(row(t, s, "Welcome"), "›") })
	if !strings.Contains(s, "3/3") {
		t.Errorf("footer should say 3/3:\n%s", s)
	}
	u.keys("g")
	u.waitFor("cursor at the top", func(s string) bool { return strings.Contains(row(t, s, "Confirm your"), "›") })

	// shift+tab back to the sources, then the endpoint: binary as hex.
	u.keys("shift+tab", "j", "tab")
	u.waitText("/form")
	u.keys("enter")
	u.waitText("Body · form", "name = Ada Lovelace", "role = admin")
	u.keys("esc", "j", "enter")
	u.waitText("Body · binary, 10 B", "ff 00 01 62 69 6e 61 72  79 02")
}

func TestPagingOlder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 2*pageSize + 5 {
		e.insert(mail{from: "bulk@shop.test", to: "x@example.test", subject: fmt.Sprintf("Bulk %03d", i)})
	}
	u := e.run(e.config())
	u.waitText("Bulk 104", "1/50+")
	u.keys("G")
	u.waitText("Bulk 055", "/100+")
	u.keys("G")
	u.waitText("Bulk 005", "/105")
	u.keys("G")
	s := u.waitText("105/105", "Bulk 000")
	if !strings.Contains(row(t, s, "Bulk 000"), "›") {
		t.Errorf("cursor should rest on the oldest:\n%s", s)
	}
}

func TestFilter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	u := e.run(e.config())
	u.waitText("Welcome to the Shop", "● live")

	u.keys("/")
	u.waitText("enter applies")
	u.keys("t", "o", ":", "b", "o", "b", "enter")
	s := u.waitText("/to:bob", "Your receipt #1042")
	if strings.Contains(s, "Welcome to the Shop") || strings.Contains(s, "Confirm your account") {
		t.Fatalf("alice's messages should be filtered out:\n%s", s)
	}
	u.waitText("● live")

	// The live wait carries the filter too.
	e.insert(mail{from: "noreply@shop.test", to: "alice@example.test", subject: "For Alice live"})
	e.insert(mail{from: "noreply@shop.test", to: "bob@example.test", subject: "For Bob live"})
	s = u.waitText("For Bob live")
	if strings.Contains(s, "For Alice live") {
		t.Fatalf("a message to alice passed the filter:\n%s", s)
	}

	// Other words search the whole message, here its HTML body; a bad
	// term is refused on the spot.
	u.keys("/")
	u.tm.Send(tea.KeyMsg{Type: tea.KeyCtrlU})
	u.keys("nope:x", "enter")
	u.waitText(`unknown filter "nope:"`)
	u.tm.Send(tea.KeyMsg{Type: tea.KeyCtrlU})
	u.tm.Type(`"42.00 eur"`)
	u.keys("enter")
	s = u.waitText(`/"42.00 eur"`, "Your receipt #1042")
	if strings.Contains(s, "For Bob live") || strings.Contains(s, "Welcome to the Shop") {
		t.Fatalf("search for a phrase of the HTML body:\n%s", s)
	}

	// A search with a prefixed filter; the live wait carries both.
	u.filter("to:alice hello")
	s = u.waitText("/to:alice hello", "Welcome to the Shop")
	if strings.Contains(s, "Confirm your account") || strings.Contains(s, "For Alice live") {
		t.Fatalf("to:alice hello:\n%s", s)
	}
	u.waitText("● live")
	e.insert(mail{from: "noreply@shop.test", to: "alice@example.test", subject: "Silent live", text: "nothing to say"})
	e.insert(mail{from: "noreply@shop.test", to: "bob@example.test", subject: "Bob greeted live", text: "hello Bob"})
	e.insert(mail{from: "noreply@shop.test", to: "alice@example.test", subject: "Greeting live", text: "hello again"})
	s = u.waitText("Greeting live")
	if strings.Contains(s, "Silent live") || strings.Contains(s, "Bob greeted live") {
		t.Fatalf("the live wait let a message through that does not match:\n%s", s)
	}

	// A search the server refuses is said in the status bar, not retried.
	u.filter("a b c d e f g h i j k l m n o p q")
	u.waitText("nothing matches the filter", "more than 16 words")

	// Clearing the filter brings everything back.
	u.filter("")
	u.waitText("For Alice live", "Welcome to the Shop", "● live")

	// Requests: a method, a path prefix and a search of the body.
	e.post("GET", "/health", "", "")
	e.post("POST", "/hooks/a", "application/json", "{}")
	e.post("POST", "/hooks/b", "application/json", `{"type":"invoice.paid"}`)
	e.post("POST", "/other", "application/json", "{}")
	u.keys("shift+tab", "j", "tab")
	u.waitText("/hooks/a", "/hooks/b", "/health", "/other")
	u.filter("post /hooks")
	s = u.waitText("/post /hooks", "/hooks/a", "/hooks/b")
	if strings.Contains(s, "/health") || strings.Contains(s, "/other") {
		t.Fatalf("request filter:\n%s", s)
	}
	u.filter("post invoice.paid")
	s = u.waitText("/post invoice.paid", "/hooks/b")
	if strings.Contains(s, "/hooks/a") || strings.Contains(s, "/other") {
		t.Fatalf("request search:\n%s", s)
	}
}

// filter types text as the list's filter, in place of the one there.
func (u *tui) filter(text string) {
	u.keys("/")
	u.tm.Send(tea.KeyMsg{Type: tea.KeyCtrlU})
	u.tm.Type(text)
	u.keys("enter")
}

func TestReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	got := make(chan string, 4)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r.Method + " " + r.URL.RequestURI() + " " + string(b)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(target.Close)
	e.post("POST", "/hooks/pay?x=1", "application/json", `{"amount":1}`)
	u := e.run(e.config())
	u.waitText("● live")
	u.keys("shift+tab", "j", "tab")
	u.waitFor("no delivery yet (—)", func(s string) bool {
		return strings.Contains(s, "/hooks/pay?x=1") && strings.Contains(row(t, s, "/hooks/pay"), "—")
	})

	u.keys("r")
	u.waitText("no target: capture endpoint set " + e.boot.Endpoint.ID + " --target URL")

	tgt := target.URL + "/app"
	if _, err := e.st.UpdateEndpoint(t.Context(), e.boot.Endpoint.ID, store.EndpointUpdate{Target: &tgt}); err != nil {
		t.Fatal(err)
	}
	u.keys("r")
	s := u.waitText("replay → 202 Accepted in")
	if l := row(t, s, "/hooks/pay"); !strings.Contains(l, "202") {
		t.Errorf("the list should show the last delivery's status: %q", l)
	}
	if g := <-got; g != `POST /app/hooks/pay?x=1 {"amount":1}` {
		t.Errorf("target got %q", g)
	}

	// The detail has the delivery and what the target answered.
	u.keys("enter")
	u.waitText("Last      202 delivered · replay")
	u.keys("G")
	s = u.waitText("Last replay", "Deliveries", `"ok": true`)
	row(t, s, "replay  202 delivered")
	if !strings.Contains(paneText(s), target.URL+"/app/hooks/pay?x=1") {
		t.Errorf("the delivery should name its target in full:\n%s", s)
	}
}

func TestDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	u := e.run(e.config())
	u.waitText("Confirm your account", "● live")

	u.keys("d")
	u.waitText("delete this message? y deletes")
	u.keys("n")
	u.waitText("kept it")

	list, err := e.client.Messages(t.Context(), e.boot.Inbox.ID, apiclient.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	newest := list.Items[0].ID
	u.keys("d")
	u.waitText("delete this message?")
	u.keys("y")
	s := u.waitText("deleted " + newest)
	if strings.Contains(s, "Confirm your account") {
		t.Fatalf("still listed:\n%s", s)
	}
	if l := row(t, s, "› default"); !strings.Contains(l, "2") {
		t.Errorf("count after delete: %q", l)
	}
	if _, err := e.st.Message(t.Context(), e.boot.Project.ID, newest); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("message still stored: %v", err)
	}

	// The wait was on the deleted message; new ones still arrive.
	u.waitText("● live")
	e.insert(mail{from: "noreply@shop.test", to: "dave@example.test", subject: "After the delete"})
	u.waitText("After the delete")

	// From the detail view too, which then closes. The cursor stayed on
	// the receipt when the new message arrived above it.
	u.keys("enter")
	u.waitText("Subject   Your receipt #1042")
	u.keys("d", "y")
	s = u.waitText("deleted msg_")
	if strings.Contains(s, "Your receipt") {
		t.Fatalf("receipt still shown:\n%s", s)
	}
}

func TestResize(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	e.post("POST", "/hooks/stripe", "application/json", `{"a":1}`)
	u := e.run(e.config())
	u.waitText("Confirm your account", "● live")

	sizes := [][2]int{{120, 30}, {100, 40}, {60, 20}, {40, 10}, {200, 50}, {30, 6}, {80, 24}}
	for _, states := range [][]string{nil, {"tab", "enter"}, {"?"}, {"/"}} {
		u.keys(states...)
		for _, sz := range sizes {
			u.tm.Send(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
			s := u.waitFor(fmt.Sprintf("%d×%d", sz[0], sz[1]), func(s string) bool {
				return len(strings.Split(s, "\n")) == sz[1] && ansi.StringWidth(strings.Split(s, "\n")[0]) == sz[0]
			})
			for i, l := range strings.Split(s, "\n") {
				if w := ansi.StringWidth(l); w != sz[0] {
					t.Errorf("after %v at %dx%d line %d is %d wide: %q", states, sz[0], sz[1], i, w, l)
				}
			}
		}
		u.keys("esc", "esc")
	}

	// Wide enough, the detail sits beside the list and follows it.
	u.tm.Send(tea.WindowSizeMsg{Width: 132, Height: 30})
	u.keys("tab")
	u.waitText("Subject   Confirm your account")
	u.keys("j")
	s := u.settled("Subject   Your receipt #1042", "● live")
	golden.RequireEqual(t, []byte(mask(s)))
}

func TestConnectionLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	u := e.run(e.config())
	u.waitText("Confirm your account", "● live")

	e.stop()
	s := u.waitText("✖ offline", "cannot reach")
	if !strings.Contains(s, "Confirm your account") {
		t.Errorf("what was shown should stay while offline:\n%s", s)
	}
	e.start()
	u.waitText("● live")
	e.insert(mail{from: "noreply@shop.test", to: "erin@example.test", subject: "Back online"})
	s = u.waitText("Back online")
	if strings.Contains(s, "offline") {
		t.Errorf("still offline:\n%s", s)
	}
}

func TestWaitSlotsBusy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	other, err := e.st.CreateInbox(t.Context(), e.boot.Project.ID, "other")
	if err != nil {
		t.Fatal(err)
	}
	// Four waits of someone else take every slot of the project. A
	// refusal comes at once, so a call still out after a moment holds.
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	holding := make(chan struct{}, 4)
	for range 4 {
		wg.Go(func() {
			done := make(chan struct{})
			go func() {
				select {
				case <-done:
				case <-time.After(300 * time.Millisecond):
					holding <- struct{}{}
				}
			}()
			_, err := e.client.Messages(ctx, other.ID, apiclient.MessageQuery{Wait: 30 * time.Second})
			close(done)
			if contract.IsCode(err, contract.CodeTooManyWaits) {
				t.Errorf("a wait was refused before the viewer started: %v", err)
			}
		})
	}
	for range 4 {
		<-holding
	}
	u := e.run(e.config())
	s := u.waitText("◐ waiting", "wait slots are busy (429)")
	if !strings.Contains(s, "Confirm your account") {
		t.Errorf("the list loads even while no wait is possible:\n%s", s)
	}
	cancel()
	u.waitText("● live")
	e.insert(mail{from: "noreply@shop.test", to: "x@example.test", subject: "Slots free again"})
	u.waitText("Slots free again")
}

// syncBuffer is the terminal a copy is written to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLinksAndAttachments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	opened := make(chan string, 2)
	failOpen := false
	var term syncBuffer
	cfg := e.config()
	cfg.Output = &term
	cfg.OpenURL = func(u string) error {
		opened <- u
		if failOpen {
			// As xdg-open fails where there is no browser: several lines.
			return errors.New("xdg-open: exit status 3: /usr/bin/xdg-open: 882: www-browser: not found\n" +
				"/usr/bin/xdg-open: 882: links2: not found\n/usr/bin/xdg-open: 882: elinks: not found")
		}
		return nil
	}
	u := e.run(cfg)
	u.waitText("Your receipt #1042", "● live")
	u.keys("j")

	// a from the list opens the detail and the attachment picker.
	u.keys("a")
	u.waitText("Attachments", "1. receipt-1042.pdf  application/pdf  16 B", "enter or 1–9 saves")
	u.keys("enter")
	s := u.waitText("saved ")
	path := filepath.Join(cfg.SaveDir, "receipt-1042.pdf")
	if !strings.Contains(s, path) {
		t.Errorf("status should name %s:\n%s", path, s)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "%PDF-1.4 receipt" {
		t.Errorf("saved file: %q, %v", b, err)
	}
	// Saving again never overwrites.
	u.keys("a", "1")
	u.waitText("receipt-1042-1.pdf")

	u.keys("o")
	u.waitText("Links", "1. [other] Confirm https://shop.test/r/1042")
	u.keys("enter")
	if got := <-opened; got != "https://shop.test/r/1042" {
		t.Errorf("opened %q", got)
	}
	u.waitText("opened https://shop.test/r/1042")

	u.keys("o", "c")
	u.waitText("copied link 1 to the clipboard")
	u.keys("enter") // into the detail
	want := "\x1b]52;c;" + base64.StdEncoding.EncodeToString([]byte("https://shop.test/r/1042"))
	if !strings.Contains(term.String(), want) {
		t.Errorf("no OSC 52 copy in %q", term.String())
	}

	// h shows every header, v the raw message.
	u.keys("h")
	u.waitText("Headers (h hides)", "Subject: Your receipt #1042")
	u.keys("v")
	u.waitText("Raw message", "Subject: Your receipt #1042", "Message · raw")
	u.keys("v", "h")
	u.waitText("Text (from HTML)")

	// No browser: the link is copied instead.
	u.keys("esc", "k", "enter")
	u.waitText("Subject   Confirm your account")
	failOpen = true
	u.keys("o", "1")
	<-opened
	// On the one status line, what happened first.
	screen := strings.TrimRight(u.waitText("copied the link (OSC 52); no browser opened it (xdg-open: exit status 3:"), "\n ")
	if last := screen[strings.LastIndexByte(screen, '\n')+1:]; !strings.Contains(last, "copied the link") {
		t.Errorf("the status bar took more than its row; last row %q", last)
	}
}

// c copies a message's first code, the most likely, from the list (which
// opens the message first) or from its detail.
func TestCopyCode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	e.post("POST", "/hooks/a", "application/json", `{}`)
	var term syncBuffer
	cfg := e.config()
	cfg.Output = &term
	u := e.run(cfg)
	u.waitText("Confirm your account", "● live")

	u.keys("c") // the newest, not opened yet
	u.waitText("copied the code 482915 to the clipboard")
	want := "\x1b]52;c;" + base64.StdEncoding.EncodeToString([]byte("482915"))
	if got := strings.Count(term.String(), want); got != 1 {
		t.Errorf("%d OSC 52 copies of the code in %q, want 1", got, term.String())
	}

	// A message without a code says so and copies nothing.
	u.keys("j", "enter")
	u.waitText("Subject   Your receipt #1042")
	u.keys("c")
	u.waitText("this message has no verification code")
	if got := strings.Count(term.String(), "\x1b]52;"); got != 1 {
		t.Errorf("%d copies after a message without a code, want 1", got)
	}

	// Back in the confirmation, from its detail.
	u.keys("esc", "k", "enter")
	u.waitText("Subject   Confirm your account")
	u.keys("c")
	u.waitText("copied the code 482915 to the clipboard", "Codes (c copies the first)")
	if got := strings.Count(term.String(), want); got != 2 {
		t.Errorf("%d copies of the code, want 2", got)
	}

	// A request has none.
	u.keys("shift+tab", "shift+tab", "j")
	u.waitText("/hooks/a")
	u.keys("tab", "c")
	u.waitText("verification codes belong to messages")
}

// TestRandomKeys presses keys at random, resizing now and then, and checks
// that the screen keeps its size and the program keeps running.
func TestRandomKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	e.post("POST", "/hooks/a?x=1", "application/json", `{"a":[1,2,{"b":null}]}`)
	e.post("PUT", "/bin", "application/octet-stream", "\x00\xff")
	u := e.run(e.config())
	u.waitText("Confirm your account", "● live")
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"j", "k", "g", "G", "tab", "shift+tab", "enter", "esc", "/", "?", "h", "v", "o", "a",
		"d", "n", "y", "r", "c", "1", "2", "x", "up", "down"}
	sizes := [][2]int{{80, 24}, {120, 30}, {50, 12}, {100, 40}}
	size := sizes[0]
	for i := range 400 {
		if i%50 == 49 {
			size = sizes[rng.IntN(len(sizes))]
			u.tm.Send(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		}
		u.keys(keys[rng.IntN(len(keys))])
	}
	u.keys("esc", "esc")
	s := u.screen()
	lines := strings.Split(s, "\n")
	if len(lines) != size[1] {
		t.Fatalf("%d lines at %v:\n%s", len(lines), size, s)
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w != size[0] {
			t.Errorf("line %d is %d wide at %v: %q", i, w, size, l)
		}
	}
}
