package tui

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/capturedev/capture/forward/apiclient"
)

// messageID is the id of the inbox's message with subject.
func (e *env) messageID(subject string) string {
	e.t.Helper()
	list, err := e.client.Messages(e.t.Context(), e.boot.Inbox.ID, apiclient.MessageQuery{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, m := range list.Items {
		if m.Subject == subject {
			return m.ID
		}
	}
	e.t.Fatalf("no message %q", subject)
	return ""
}

// TestDeletedElsewhereLeaves deletes a message that is not the newest
// through the API while the viewer lists it: the next refresh takes it
// off the list.
func TestDeletedElsewhereLeaves(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	u := e.run(e.config(), func(m *Model) { m.refreshEvery = 50 * time.Millisecond })
	u.waitText("Your receipt #1042", "● live")
	if err := e.client.DeleteMessage(t.Context(), e.messageID("Your receipt #1042")); err != nil {
		t.Fatal(err)
	}
	s := u.waitGone("Your receipt #1042")
	if !strings.Contains(s, "Confirm your account") || !strings.Contains(s, "Welcome to the Shop") {
		t.Errorf("the others went too:\n%s", s)
	}
}

// TestDeletedElsewhereActions opens and deletes messages deleted through
// the API before the viewer noticed: each leaves the list, and the
// status line says what happened.
func TestDeletedElsewhereActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	u := e.run(e.config(), func(m *Model) { m.refreshEvery = time.Hour })
	u.waitText("Your receipt #1042", "● live")
	receipt, welcome := e.messageID("Your receipt #1042"), e.messageID("Welcome to the Shop")
	for _, id := range []string{receipt, welcome} {
		if err := e.client.DeleteMessage(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	u.keys("j", "enter")
	s := u.waitText("deleted elsewhere")
	if strings.Contains(s, "Your receipt #1042") {
		t.Errorf("the receipt is still listed:\n%s", s)
	}
	u.keys("G", "d") // the detail closed: back in the list
	u.waitText("delete this message?")
	u.keys("y")
	s = u.waitText("already deleted " + welcome)
	if strings.Contains(s, "Welcome to the Shop") {
		t.Errorf("the welcome is still listed:\n%s", s)
	}
}

var listRowRE = regexp.MustCompile(`\d\d:\d\d:\d\d Shop `)

// TestTallListFills shows a long inbox on a tall terminal: older pages
// load until the list fills its pane, also after the terminal grows, and
// stop at the inbox's end where the pane is taller still.
func TestTallListFills(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	insertNumbered(e, 130)
	u := e.run(e.config())
	u.waitText("Message 129", "● live")
	for _, h := range []int{60, 100} {
		u.tm.Send(tea.WindowSizeMsg{Width: 300, Height: h})
		rows := h - 3 // the status bar and the list's frame
		u.waitFor(fmt.Sprintf("%d rows at 300×%d", rows, h), func(s string) bool {
			return len(listRowRE.FindAllString(s, -1)) == rows
		})
	}

	// Taller than the inbox is long: loading stops at its end.
	u.tm.Send(tea.WindowSizeMsg{Width: 300, Height: 200})
	s := u.waitFor("all 130 rows at 300×200", func(s string) bool {
		return len(listRowRE.FindAllString(s, -1)) == 130 && strings.Contains(s, " 1/130 ")
	})
	if strings.Contains(s, "loading older") || !strings.Contains(s, "Message 000") {
		t.Errorf("the list should end at the oldest, loading nothing more:\n%s", s)
	}
}

// TestDeletedElsewhereByPosition lists more captures than a refresh reads
// again, one of them received later than its place in the list says (a
// capture's time is taken before it is stored): deleting another takes
// only that one off the list.
func TestDeletedElsewhereByPosition(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 130 {
		m := mail{from: "noreply@shop.test", to: "bob@example.test", subject: fmt.Sprintf("Message %03d", i)}
		if i == 10 {
			m.at = time.Now().Add(time.Minute) // later than all, yet low in the list
		}
		e.insert(m)
	}
	u := e.run(e.config(), func(m *Model) { m.refreshEvery = 50 * time.Millisecond })
	u.tm.Send(tea.WindowSizeMsg{Width: 300, Height: 200})
	u.waitText("Message 000", "1/130", "● live")
	if err := e.client.DeleteMessage(t.Context(), e.messageID("Message 120")); err != nil {
		t.Fatal(err)
	}
	s := u.waitGone("Message 120")
	for i := range 130 {
		if want := fmt.Sprintf("Message %03d", i); i != 120 && !strings.Contains(s, want) {
			t.Errorf("%s went too:\n%s", want, s)
		}
	}
}

// TestDeletedOldestListed deletes the oldest capture listed: the next
// older page starts below it, and the cursor stays on its capture.
func TestDeletedOldestListed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ids := insertNumbered(e, 130)
	u := e.run(e.config(), func(m *Model) { m.refreshEvery = 50 * time.Millisecond })
	u.waitText("Message 129", "1/50+", "● live")
	if err := e.client.DeleteMessage(t.Context(), ids[80]); err != nil {
		t.Fatal(err)
	}
	u.waitText("1/49+")
	u.keys("G")
	s := u.waitText("49/99+")
	if !strings.Contains(row(t, s, "Message 081"), "›") {
		t.Errorf("the cursor should stay on the oldest listed:\n%s", s)
	}
	u.keys("j")
	s = u.waitText("50/99+")
	if !strings.Contains(row(t, s, "Message 079"), "›") {
		t.Errorf("the next older should follow the deleted one's place:\n%s", s)
	}
}

// TestRemovedRowsRefill fills a pane with the captures loaded exactly,
// then deletes one of them, through the API, found on opening it, and
// then with d: each time the next older page comes to fill the pane.
func TestRemovedRowsRefill(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ids := insertNumbered(e, 130)
	u := e.run(e.config(), func(m *Model) { m.refreshEvery = time.Hour })
	u.tm.Send(tea.WindowSizeMsg{Width: 300, Height: pageSize + 3}) // a page fills the list
	s := u.waitText("Message 129", "Message 080", "1/50+", "● live")
	if strings.Contains(s, "Message 079") {
		t.Fatalf("more than a page loaded:\n%s", s)
	}
	if err := e.client.DeleteMessage(t.Context(), ids[128]); err != nil {
		t.Fatal(err)
	}
	u.keys("j") // the detail beside the list follows, and finds it gone
	u.waitText("deleted elsewhere: "+ids[128], "Message 079", "/99+")

	u.tm.Send(tea.WindowSizeMsg{Width: 300, Height: 99 + 3}) // what is loaded fills the list
	s = u.waitText("Message 030", "/99+")
	if strings.Contains(s, "Message 029") {
		t.Fatalf("more than two pages loaded:\n%s", s)
	}
	u.keys("d")
	u.waitText("delete this message?")
	u.keys("y")
	u.waitText("deleted "+ids[127], "Message 029")
}

// TestDeletedElsewhereCountedOnce deletes a capture through the API that
// the refresh does not read again; the source's count, which the refresh
// does read, drops by one, and no more when opening the capture finds it
// gone.
func TestDeletedElsewhereCountedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ids := insertNumbered(e, 130)
	u := e.run(e.config(), func(m *Model) { m.refreshEvery = 200 * time.Millisecond })
	u.tm.Send(tea.WindowSizeMsg{Width: 300, Height: 200})
	u.waitText("Message 000", "1/130", "● live")
	if err := e.client.DeleteMessage(t.Context(), ids[5]); err != nil {
		t.Fatal(err)
	}
	count := func(s string) string { // the default inbox's row in the sources pane
		l, _, _ := strings.Cut(row(t, s, "› default"), "││")
		return l
	}
	u.waitFor("a count of 129", func(s string) bool { return strings.Contains(count(s), " 129") })
	u.keys("G", "k", "k", "k", "k", "k") // the detail beside the list follows
	s := u.waitText("deleted elsewhere: " + ids[5])
	if l := count(s); !strings.Contains(l, " 129") {
		t.Errorf("the deletion was counted twice: %q", l)
	}
}

// insertNumbered stores n messages, "Message 000" oldest, and returns
// their ids in that order.
func insertNumbered(e *env, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.insert(mail{from: "noreply@shop.test", to: "bob@example.test", subject: fmt.Sprintf("Message %03d", i)})
	}
	return ids
}
