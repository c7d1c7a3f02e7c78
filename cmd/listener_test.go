package cmd

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Every error of serve's --http listener is the API's envelope, /mcp
// included, and a wait in progress at SIGTERM is told to come back, never
// given an empty 200 (SPEC §8, §12, §13).
func TestHTTPListenerErrorsThroughTheBinary(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cmd, banner := startServeProcess(t, dir)
	api, key := banner["Read API"], banner["API key"]
	base := strings.TrimSuffix(api, "/api/v1")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, url, key string, header map[string]string, body string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	code := func(b []byte) string {
		var env struct{ Error struct{ Code string } }
		json.Unmarshal(b, &env)
		return env.Error.Code
	}

	for _, tt := range []struct {
		method, url string
		status      int
		code, allow string
		emptyBody   bool
	}{
		{"GET", api + "/me/", 404, "not_found", "", false},
		{"GET", base + "//api/v1/me", 404, "not_found", "", false},
		{"GET", api + "//me", 404, "not_found", "", false},
		{"GET", base + "/nope", 404, "not_found", "", false},
		{"PUT", api + "/me", 405, "method_not_allowed", "GET", false},
		{"POST", base + "/downloads/capture-forward.py", 405, "method_not_allowed", "GET, HEAD", false},
		{"HEAD", api + "/me", 405, "", "GET", true}, // a reply to HEAD has no body
	} {
		resp, b := do(tt.method, tt.url, key, nil, "")
		if resp.StatusCode != tt.status || resp.Header.Get("Content-Type") != "application/json" ||
			(!tt.emptyBody && code(b) != tt.code) || (tt.emptyBody && len(b) != 0) || resp.Header.Get("Allow") != tt.allow {
			t.Errorf("%s %s: %d %v %s", tt.method, tt.url, resp.StatusCode, resp.Header, b)
		}
	}

	// An MCP session opened with one project's key is no one's with
	// another's: not_found, in the envelope.
	capture(t, "project", "create", "other", "--data-dir", dir)
	r := capture(t, "key", "create", "--project", "other", "--json", "--data-dir", dir)
	var other struct{ Key string }
	if json.Unmarshal([]byte(r.stdout), &other) != nil || other.Key == "" {
		t.Fatalf("key create: %+v", r)
	}
	mcpHeader := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	resp, b := do("POST", base+"/mcp", key, mcpHeader,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || session == "" {
		t.Fatalf("initialize: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	mcpHeader["Mcp-Session-Id"] = session
	mcpHeader["Mcp-Protocol-Version"] = "2025-06-18"
	resp, b = do("POST", base+"/mcp", other.Key, mcpHeader, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if resp.StatusCode != 404 || code(b) != "not_found" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("another project's key on the session: %d %v %s", resp.StatusCode, resp.Header, b)
	}

	// A request net/http cannot read (no Host) is answered in the
	// envelope too, on the capture listener as on this one.
	for _, listener := range []string{base, banner["Capture URL"]} {
		conn, err := net.Dial("tcp", strings.Split(strings.TrimPrefix(listener, "http://"), "/")[0])
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, "GET / HTTP/1.1\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/json" || code(b) != "invalid_parameter" {
			t.Errorf("%s, a request without Host: %d %v %s", listener, resp.StatusCode, resp.Header, b)
		}
	}

	// Five waits for the project's four slots: the first answer is the
	// refused one, once the four are held in the server.
	waitURL := api + "/endpoints/" + banner["Capture URL"][strings.LastIndex(banner["Capture URL"], "/")+1:] +
		"/requests?path=/never&wait=30"
	type answer struct {
		status     int
		retryAfter string
		code       string
	}
	got := make(chan answer, 5)
	for range 5 {
		go func() {
			req, _ := http.NewRequest("GET", waitURL, nil)
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				got <- answer{}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got <- answer{resp.StatusCode, resp.Header.Get("Retry-After"), code(b)}
		}()
	}
	if a := <-got; a.status != 429 || a.code != "too_many_waits" {
		t.Fatalf("first of five waits: %+v", a)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	for range 4 {
		if a := <-got; a.status != 503 || a.code != "unavailable" || a.retryAfter != "1" {
			t.Errorf("wait at SIGTERM: %+v, want 503 unavailable with Retry-After: 1", a)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve after SIGTERM: %v", err)
	}
}
