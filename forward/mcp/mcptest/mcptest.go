// Package mcptest runs a real capture server and checks an MCP transport
// of it end to end with the SDK's own client. The tests of the HTTP
// transport (forward/mcp) and of the stdio one (`capture mcp`) share it, so
// both are held to the same behaviour.
package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capturedev/capture/forward/mcp"
	"github.com/capturedev/capture/server"
	"github.com/capturedev/capture/server/servertest"
	"github.com/capturedev/capture/store"
)

// Env is a running capture server with two projects: the one under test
// and another whose objects the first must not see.
type Env struct {
	Store                *store.Store
	APIBase, CaptureBase string

	ProjectID, Key, InboxID, EndpointID string
	// Other is the other project's key and objects.
	Other struct {
		Key, InboxID, EndpointID, MessageID, RequestID string
	}

	stop func() error
}

// Stop stops the server gracefully, as SIGTERM stops serve, and returns
// once it has: what Run returned, or an error if the stop ran into its
// timeout. Later calls return the same.
func (e *Env) Stop() error { return e.stop() }

// HeldWaits is how many waits the API holds for the project under test,
// as its /metrics says.
func (e *Env) HeldWaits() (int, error) {
	resp, err := http.Get(strings.TrimSuffix(e.APIBase, "/api/v1") + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	series := fmt.Sprintf("capture_active_waits{project=%q} ", e.ProjectID)
	for line := range strings.Lines(string(b)) {
		if n, ok := strings.CutPrefix(strings.TrimSpace(line), series); ok {
			return strconv.Atoi(n)
		}
	}
	return 0, nil
}

// lockedBuffer is a log the server writes from many goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Start runs a server until the test ends. Both projects are on the team
// plan, so that many quick calls meet no rate limit.
func Start(t testing.TB) *Env {
	t.Helper()
	ctx := context.Background()
	st, boot := servertest.Open(t, "team")
	cfg := servertest.Config(t)
	cfg.SMTPStartTLSAddrs = nil
	cfg.ShutdownTimeout = 5 * time.Second
	// A stop that runs into its timeout says so only in the log.
	warnings := &lockedBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(warnings, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.MCP = func(apiBase string, stopping <-chan struct{}) http.Handler {
		return mcp.HTTPHandler(apiBase, "test", stopping)
	}
	srv, err := server.Listen(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx) }()
	stop := sync.OnceValue(func() error {
		cancel()
		select {
		case err := <-done:
			if err == nil && strings.Contains(warnings.String(), "shutdown timed out") {
				err = errors.New("the stop ran into its timeout: something in flight held it up")
			}
			return err
		case <-time.After(10 * time.Second):
			return errors.New("server did not stop within 10 s")
		}
	})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("server: %v", err)
		}
	})

	e := &Env{
		Store: st, APIBase: srv.APIBase(), CaptureBase: srv.CaptureBase(),
		ProjectID: boot.Project.ID, Key: boot.Secret, InboxID: boot.Inbox.ID, EndpointID: boot.Endpoint.ID,
		stop: stop,
	}

	other, err := st.CreateProject(ctx, "other", "team")
	if err != nil {
		t.Fatal(err)
	}
	_, e.Other.Key, err = st.CreateKey(ctx, other.ID)
	if err != nil {
		t.Fatal(err)
	}
	inbox, err := st.CreateInbox(ctx, other.ID, "other")
	if err != nil {
		t.Fatal(err)
	}
	ep, err := st.CreateEndpoint(ctx, other.ID, "other", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Other.InboxID, e.Other.EndpointID = inbox.ID, ep.ID
	e.Other.MessageID = e.Message(t, inbox.ID, Mail{Subject: "other project's mail"})
	e.Other.RequestID = e.Post(t, ep.ID, "POST", "/other", nil, []byte("other project's request"))
	return e
}

// Mail is what Message stores; zero fields get plain defaults.
type Mail struct {
	To, Subject, Text, HTML string
	Links                   []string
	// Kinds are the kinds of Links by URL, as ingest judged them; a link
	// not in it is other.
	Kinds map[string]string
	// Codes are the verification codes ingest found, most likely first.
	Codes []store.Code
	// Headers are the message's headers in the order received; nil: a
	// Subject header alone.
	Headers []store.Header
	// LinksTruncated says the message had more links than Links, as
	// ingest says past its cap.
	LinksTruncated bool
	Attachments    []store.NewAttachment
}

// Message stores a message in an inbox, as the SMTP listener would after
// parsing it, and returns its id.
func (e *Env) Message(t testing.TB, inboxID string, m Mail) string {
	t.Helper()
	id, err := e.message(inboxID, m)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// message is Message for goroutines, which must not call t.Fatal.
func (e *Env) message(inboxID string, m Mail) (string, error) {
	if m.To == "" {
		m.To = "user@example.test"
	}
	if m.Text == "" {
		m.Text = "Hello."
	}
	links := make([]store.Link, len(m.Links))
	for i, u := range m.Links {
		text := "link " + u
		links[i] = store.Link{URL: u, Text: &text, Origin: origin(u), Kind: m.Kinds[u]}
	}
	if m.Headers == nil {
		m.Headers = []store.Header{{Name: "Subject", Values: []string{m.Subject}}}
	}
	raw := "From: App <app@example.test>\r\nTo: " + m.To + "\r\nSubject: " + m.Subject + "\r\n\r\n" + m.Text + "\r\n"
	nm := &store.NewMessage{
		InboxID: inboxID, ReceivedAt: time.Now(),
		EnvelopeFrom: "app@example.test", EnvelopeTo: []string{m.To},
		From: &store.Address{Name: "App", Address: "app@example.test"}, To: []store.Address{{Address: m.To}},
		Subject: m.Subject, Text: &m.Text, Links: links, Codes: m.Codes, Snippet: m.Text,
		Headers: m.Headers, Raw: []byte(raw), LinksTruncated: m.LinksTruncated, Attachments: m.Attachments,
	}
	if m.HTML != "" {
		nm.HTML = &m.HTML
	}
	return e.Store.InsertMessage(context.Background(), nm)
}

func origin(u string) string {
	scheme, rest, _ := strings.Cut(u, "://")
	host, _, _ := strings.Cut(rest, "/")
	return scheme + "://" + host
}

// Post sends a webhook to an endpoint's capture URL with target (path and
// query) appended, and returns the capture's id.
func (e *Env) Post(t testing.TB, endpointID, method, target string, header http.Header, body []byte) string {
	t.Helper()
	id, err := e.post(endpointID, method, target, header, body)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// post is Post for goroutines, which must not call t.Fatal.
func (e *Env) post(endpointID, method, target string, header http.Header, body []byte) (string, error) {
	req, err := http.NewRequest(method, e.CaptureBase+"/"+endpointID+target, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v struct {
		ID string `json:"id"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &v) != nil || !strings.HasPrefix(v.ID, "req_") {
		return "", fmt.Errorf("capture answered %d: %s", resp.StatusCode, b)
	}
	return v.ID, nil
}
