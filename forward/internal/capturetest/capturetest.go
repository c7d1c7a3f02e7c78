// Package capturetest runs a real capture server for the tests of the
// forwarding client and the API client: a SQLite file in a temporary dir,
// every listener on a free loopback port.
package capturetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capturedev/capture/forward"
	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/server"
	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/server/openapi/openapitest"
	"github.com/capturedev/capture/server/servertest"
	"github.com/capturedev/capture/store"
)

// Server is a running capture with its bootstrap objects.
type Server struct {
	Store      *store.Store
	ProjectID  string
	Key        string
	EndpointID string
	InboxID    string

	// APIBase ends in /api/v1; HTTPBase is the same listener's root, where
	// downloads are served; CaptureBase is where webhooks are posted.
	APIBase, HTTPBase, CaptureBase string

	cfg    server.Config
	cancel context.CancelFunc
	done   chan error
	web    *http.Client // for Post, with connections of its own
}

// Start runs a server until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	st, boot := servertest.Open(t, "free")
	cfg := servertest.Config(t)
	cfg.Downloads = map[string][]byte{forward.PythonClientName: forward.PythonClient}
	s := &Server{
		Store: st, ProjectID: boot.Project.ID, Key: boot.Secret, EndpointID: boot.Endpoint.ID, InboxID: boot.Inbox.ID,
		cfg: cfg, web: &http.Client{Transport: &http.Transport{}},
	}
	s.run(t)
	// Later starts reuse the ports, so that clients find the server again.
	s.cfg.HTTPAddr = strings.TrimPrefix(strings.TrimSuffix(s.APIBase, "/api/v1"), "http://")
	s.cfg.CaptureAddr = strings.TrimPrefix(s.CaptureBase, "http://")
	t.Cleanup(func() { s.Stop(t) })
	return s
}

func (s *Server) run(t testing.TB) {
	t.Helper()
	srv, err := server.Listen(s.Store, s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan error, 1)
	go func() { s.done <- srv.Run(ctx) }()
	s.APIBase = srv.APIBase()
	s.HTTPBase = strings.TrimSuffix(s.APIBase, "/api/v1")
	s.CaptureBase = srv.CaptureBase()
}

// Stop shuts the listeners down and waits for them; the store stays open.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	// A kept-alive connection to the stopped server would fail the first
	// request sent after a restart on the same port.
	defer s.web.CloseIdleConnections()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("server: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("server did not stop within 10 s")
	}
}

// Restart serves again on the same addresses over the same store.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop(t)
	s.run(t)
}

// Client is an API client with the bootstrap key.
func (s *Server) Client() *apiclient.Client { return apiclient.New(s.APIBase, s.Key, nil) }

// Post sends a webhook to the endpoint; target is the path with its query
// appended to the capture URL. It returns the capture's id.
func (s *Server) Post(t testing.TB, method, target string, header http.Header, body []byte) string {
	t.Helper()
	req, err := http.NewRequest(method, s.CaptureBase+"/"+s.EndpointID+target, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(body) == 0 {
		req.Body = http.NoBody
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := s.web.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return captureID(t, resp)
}

// PostRaw writes a raw HTTP/1.1 request to the capture listener, for
// headers an http.Client would not send as given. "{endpoint}" in raw is
// replaced by the endpoint id.
func (s *Server) PostRaw(t testing.TB, raw string) string {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.CaptureBase, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, strings.ReplaceAll(raw, "{endpoint}", s.EndpointID)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return captureID(t, resp)
}

func captureID(t testing.TB, resp *http.Response) string {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("capture answered %d: %s", resp.StatusCode, b)
	}
	var v struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(b, &v); err != nil || !strings.HasPrefix(v.ID, "req_") {
		t.Fatalf("capture answered %s", b)
	}
	return v.ID
}

// ClosedAddr is a loopback address nothing listens on.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Checked is a proxy to a server's read API that checks every exchange
// against the OpenAPI document: what a client sends and what it is
// answered. A difference fails the test.
type Checked struct {
	// APIBase is the proxy's read API base URL, for clients under test.
	APIBase string

	mu   sync.Mutex
	seen map[string]int
}

var ids = regexp.MustCompile(`/(inb|msg|att|whe|req)_[0-9A-Za-z]+`)

// CheckedAPI starts a Checked proxy to s until the test ends.
func (s *Server) CheckedAPI(t testing.TB) *Checked {
	t.Helper()
	v, err := openapitest.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	c := &Checked{seen: map[string]int{}}
	upstream := s.HTTPBase
	transport := &http.Transport{}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		out, err := http.NewRequestWithContext(r.Context(), r.Method, upstream+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			t.Errorf("checked API: %v", err)
			panic(http.ErrAbortHandler)
		}
		out.Header = r.Header.Clone()
		resp, err := transport.RoundTrip(out)
		if err != nil {
			// The client left, or the server is down: the client sees a
			// connection cut, as it would without the proxy.
			panic(http.ErrAbortHandler)
		}
		defer resp.Body.Close()
		answer, err := io.ReadAll(resp.Body)
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		// The request as the client sent it, its body readable again.
		sent, _ := http.NewRequest(r.Method, r.URL.RequestURI(), bytes.NewReader(body))
		sent.Header = r.Header
		if err := v.Check(sent, resp.StatusCode, resp.Header, answer); err != nil {
			t.Errorf("exchange differs from the OpenAPI document: %v\nrequest body: %s\nresponse body: %s", err, body, answer)
		}
		c.mu.Lock()
		c.seen[fmt.Sprintf("%s %s %d", r.Method, ids.ReplaceAllString(r.URL.Path, "/{id}"), resp.StatusCode)]++
		c.mu.Unlock()
		for k, vs := range resp.Header {
			if k != "Content-Length" && k != "Connection" && k != "Transfer-Encoding" {
				w.Header()[k] = vs
			}
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(answer)
	}))
	t.Cleanup(func() {
		proxy.Close()
		transport.CloseIdleConnections()
	})
	c.APIBase = proxy.URL + contract.Prefix
	return c
}

// Seen counts the exchanges of one kind, "GET /requests/{id} 200": method,
// path with every id as {id}, status.
func (c *Checked) Seen(exchange string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[exchange]
}
