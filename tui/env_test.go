package tui

import (
	"bytes"
	"cmp"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/server"
	"github.com/capturedev/capture/server/servertest"
	"github.com/capturedev/capture/store"
)

// env is a real capture server on loopback ports, over a store in a
// temporary directory, which a test may stop and start again on the same
// addresses.
type env struct {
	t      *testing.T
	st     *store.Store
	boot   store.Bootstrap
	cfg    server.Config
	srv    *server.Server
	stopFn context.CancelFunc
	done   chan error
	client *apiclient.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st, boot := servertest.Open(t, "team")
	cfg := servertest.Config(t)
	cfg.SMTPStartTLSAddrs = nil
	e := &env{t: t, st: st, boot: boot, cfg: cfg}
	e.start()
	// Later starts reuse the addresses so that the viewer finds the server
	// where it left it.
	e.cfg.HTTPAddr = e.srv.HTTPAddr().String()
	e.cfg.CaptureAddr = e.srv.CaptureAddr().String()
	e.client = apiclient.New(e.srv.APIBase(), boot.Secret, nil)
	t.Cleanup(e.stop)
	return e
}

func (e *env) start() {
	e.t.Helper()
	srv, err := server.Listen(e.st, e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.srv, e.stopFn, e.done = srv, cancel, make(chan error, 1)
	go func() { e.done <- srv.Run(ctx) }()
}

func (e *env) stop() {
	if e.stopFn == nil {
		return
	}
	e.stopFn()
	if err := <-e.done; err != nil {
		e.t.Errorf("server: %v", err)
	}
	e.stopFn = nil
}

// post sends a webhook to the default endpoint and returns the request id.
// header holds more header fields, as name, value, name, value.
func (e *env) post(method, path, contentType, body string, header ...string) string {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.CaptureBase()+"/"+e.boot.Endpoint.ID+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("X-Test", "yes")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		e.t.Fatalf("capture: %d %s", resp.StatusCode, b)
	}
	id := regexp.MustCompile(`req_[0-9A-Za-z]+`).FindString(string(b))
	if id == "" {
		e.t.Fatalf("capture answered %s", b)
	}
	return id
}

type mail struct {
	from, to, cc, subject, text, html string
	links                             []store.Link
	attachments                       []store.NewAttachment
	codes                             []store.Code
	at                                time.Time // when it was received; now when zero
}

// insert stores a message in the default inbox as the SMTP listener would.
func (e *env) insert(m mail) string {
	e.t.Helper()
	date := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	nm := &store.NewMessage{
		InboxID:      e.boot.Inbox.ID,
		ReceivedAt:   cmp.Or(m.at, time.Now()),
		EnvelopeFrom: m.from,
		EnvelopeTo:   []string{m.to},
		From:         &store.Address{Name: "Shop", Address: m.from},
		To:           []store.Address{{Address: m.to}},
		Subject:      m.subject,
		Date:         &date,
		MessageID:    "<x@shop.test>",
		Headers: []store.Header{
			{Name: "From", Values: []string{"Shop <" + m.from + ">"}},
			{Name: "To", Values: []string{m.to}},
			{Name: "Subject", Values: []string{m.subject}},
		},
		Links:       m.links,
		Codes:       m.codes,
		Attachments: m.attachments,
		Snippet:     m.text,
		Raw:         []byte("From: Shop <" + m.from + ">\r\nTo: " + m.to + "\r\nSubject: " + m.subject + "\r\n\r\n" + m.text + "\r\n"),
	}
	if m.cc != "" {
		nm.Cc = []store.Address{{Address: m.cc}}
	}
	if m.text != "" {
		nm.Text = &m.text
	}
	if m.html != "" {
		nm.HTML = &m.html
	}
	id, err := e.st.InsertMessage(e.t.Context(), nm)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// asciiRenderer draws without colour, as goldens need.
func asciiRenderer() *lipgloss.Renderer {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.Ascii)
	return r
}

func (e *env) config() Config {
	return Config{
		Client:   e.client,
		Output:   io.Discard,
		Renderer: asciiRenderer(),
		SaveDir:  e.t.TempDir(),
		Location: time.UTC,
		OpenURL:  func(string) error { return nil },
	}
}

// probe asks the running program for its screen, from inside its own
// loop, so that tests read exactly what Update and View agree on.
type probe struct{ reply chan string }

// harness wraps the model so that a test can read the screen while the
// program runs; everything else goes to the model untouched.
type harness struct{ m *Model }

func (h harness) Init() tea.Cmd { return h.m.Init() }

func (h harness) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if p, ok := msg.(probe); ok {
		p.reply <- h.m.View()
		return h, nil
	}
	_, cmd := h.m.Update(msg)
	return h, cmd
}

func (h harness) View() string { return h.m.View() }

// tui runs the viewer at 80×24 the way teatest drives a program.
type tui struct {
	t  *testing.T
	tm *teatest.TestModel
	m  *Model
}

func (e *env) run(cfg Config, tune ...func(*Model)) *tui {
	e.t.Helper()
	m := NewModel(e.t.Context(), cfg)
	m.retryBase, m.retryMax = 100*time.Millisecond, 500*time.Millisecond
	for _, f := range tune {
		f(m)
	}
	tm := teatest.NewTestModel(e.t, harness{m}, teatest.WithInitialTermSize(80, 24))
	u := &tui{t: e.t, tm: tm, m: m}
	e.t.Cleanup(func() {
		tm.Quit()
		tm.WaitFinished(e.t, teatest.WithFinalTimeout(5*time.Second))
		m.stop()
	})
	return u
}

// screen is the current screen without styles.
func (u *tui) screen() string {
	u.t.Helper()
	reply := make(chan string, 1)
	u.tm.Send(probe{reply})
	select {
	case s := <-reply:
		return ansi.Strip(s)
	case <-time.After(5 * time.Second):
		u.t.Fatal("the program does not answer")
		return ""
	}
}

// waitFor waits until the screen satisfies ok, and returns it.
func (u *tui) waitFor(what string, ok func(string) bool) string {
	u.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var s string
	for time.Now().Before(deadline) {
		s = u.screen()
		if ok(s) {
			return s
		}
		time.Sleep(20 * time.Millisecond)
	}
	u.t.Fatalf("screen never showed %s; last screen:\n%s", what, s)
	return ""
}

func (u *tui) waitText(want ...string) string {
	u.t.Helper()
	return u.waitFor(strings.Join(want, ", "), func(s string) bool {
		for _, w := range want {
			if !strings.Contains(s, w) {
				return false
			}
		}
		return true
	})
}

// settled waits for want and for the project's name in the status bar,
// which comes by a call of its own, so that goldens do not race it.
func (u *tui) settled(want ...string) string {
	u.t.Helper()
	return u.waitFor(strings.Join(want, ", ")+" with the project", func(s string) bool {
		lines := strings.Split(s, "\n")
		if !strings.Contains(lines[len(lines)-1], " · default") {
			return false
		}
		for _, w := range want {
			if !strings.Contains(s, w) {
				return false
			}
		}
		return true
	})
}

func (u *tui) waitGone(gone string) string {
	u.t.Helper()
	return u.waitFor("no "+gone, func(s string) bool { return !strings.Contains(s, gone) })
}

// keys types each key in turn: single characters, or names such as
// "enter", "tab", "esc", "down".
func (u *tui) keys(keys ...string) {
	for _, k := range keys {
		switch k {
		case "enter":
			u.tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
		case "tab":
			u.tm.Send(tea.KeyMsg{Type: tea.KeyTab})
		case "shift+tab":
			u.tm.Send(tea.KeyMsg{Type: tea.KeyShiftTab})
		case "esc":
			u.tm.Send(tea.KeyMsg{Type: tea.KeyEsc})
		case "down":
			u.tm.Send(tea.KeyMsg{Type: tea.KeyDown})
		case "up":
			u.tm.Send(tea.KeyMsg{Type: tea.KeyUp})
		default:
			u.tm.Type(k)
		}
	}
}

var (
	idRE    = regexp.MustCompile(`\b(msg|req|whe|inb|att|dlv|proj|key)_[0-9A-Za-z]+`)
	clockRE = regexp.MustCompile(`\d\d:\d\d:\d\d`)
	dateRE  = regexp.MustCompile(`\d{4}-\d\d-\d\d`)
	portRE  = regexp.MustCompile(`127\.0\.0\.1:\d+`)
)

// mask replaces what changes from run to run with as many placeholder
// characters, so that the layout of the screen stays as it was.
func mask(s string) string {
	same := func(re *regexp.Regexp, keep int, with byte) func(string) string {
		return func(m string) string {
			return m[:keep] + string(bytes.Repeat([]byte{with}, len(m)-keep))
		}
	}
	s = idRE.ReplaceAllStringFunc(s, func(m string) string {
		i := strings.IndexByte(m, '_') + 1
		return same(idRE, i, 'x')(m)
	})
	s = clockRE.ReplaceAllStringFunc(s, func(string) string { return "hh:mm:ss" })
	s = dateRE.ReplaceAllStringFunc(s, func(string) string { return "YYYY-MM-DD" })
	s = portRE.ReplaceAllStringFunc(s, same(portRE, len("127.0.0.1:"), 'N'))
	return s
}
