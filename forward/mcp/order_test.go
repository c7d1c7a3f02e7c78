package mcp_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/forward/mcp/mcptest"
	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/store"
)

// Headers keep the order the read API gives them in (SPEC §8: "order
// kept"), on every transport, in the text content and in structuredContent
// alike: the order of a message's headers is the order they were received
// in, which a map would sort.
func TestHeadersKeepTheirOrder(t *testing.T) {
	e := mcptest.Start(t)
	before := contract.FormatTime(time.Now().Add(-time.Minute))
	msgHeaders := []store.Header{
		{Name: "From", Values: []string{"App <app@example.test>"}},
		{Name: "To", Values: []string{"user@example.test"}},
		{Name: "Cc", Values: []string{"boss@example.test"}},
		{Name: "Subject", Values: []string{"headers in order"}},
		{Name: "Mime-Version", Values: []string{"1.0"}},
		{Name: "Content-Type", Values: []string{"text/plain; charset=utf-8"}},
	}
	msgID := e.Message(t, e.InboxID, mcptest.Mail{Subject: "headers in order", Headers: msgHeaders})
	reqHeaders := []store.Header{
		{Name: "X-Zulu", Values: []string{"z"}},
		{Name: "Content-Type", Values: []string{"application/json"}},
		{Name: "Accept", Values: []string{"*/*"}},
		{Name: "X-Alpha", Values: []string{"a", "b"}},
	}
	reqID, err := e.Store.InsertRequest(t.Context(), &store.NewRequest{EndpointID: e.EndpointID, ReceivedAt: time.Now(),
		Method: "POST", Path: "/order", ContentType: "application/json", Headers: reqHeaders, Body: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	msgWant, reqWant := names(msgHeaders), names(reqHeaders)
	// The read API itself gives them in that order; MCP must not change it.
	if got := headerOrder(t, apiGet(t, e, "/messages/"+msgID)); !slices.Equal(got, msgWant) {
		t.Fatalf("read API message headers %q, want %q", got, msgWant)
	}
	if got := headerOrder(t, apiGet(t, e, "/requests/"+reqID)); !slices.Equal(got, reqWant) {
		t.Fatalf("read API request headers %q, want %q", got, reqWant)
	}

	calls := []struct {
		tool, args string
		want       []string
	}{
		{"get_message", fmt.Sprintf(`{"message_id":%q}`, msgID), msgWant},
		{"wait_for_message", fmt.Sprintf(`{"inbox_id":%q,"subject":"headers in order","since":%q}`, e.InboxID, before), msgWant},
		{"get_request", fmt.Sprintf(`{"request_id":%q}`, reqID), reqWant},
	}
	lines := initialize("2025-06-18")
	for i, c := range calls {
		lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, 10+i, c.tool, c.args))
	}

	t.Run("stdio", func(t *testing.T) {
		out, err := overStdio(t, e, lines...)
		if err != nil && err != io.EOF {
			t.Errorf("Run: %v", err)
		}
		byID := map[string]json.RawMessage{}
		for _, l := range out {
			var a answer
			if json.Unmarshal([]byte(l), &a) == nil && a.Result != nil {
				byID[string(a.ID)] = a.Result
			}
		}
		for i, c := range calls {
			checkResultOrder(t, c.tool, byID[fmt.Sprint(10+i)], c.want)
		}
		// The wait, given no timeout_seconds, waited with the default.
		var wait struct {
			StructuredContent struct {
				Query struct {
					TimeoutSeconds int `json:"timeout_seconds"`
				} `json:"query"`
			} `json:"structuredContent"`
		}
		if json.Unmarshal(byID["11"], &wait); wait.StructuredContent.Query.TimeoutSeconds != 20 {
			t.Errorf("wait_for_message without timeout_seconds: %s", byID["11"])
		}
	})

	t.Run("http", func(t *testing.T) {
		url := mcpURL(t, e)
		resp, _ := postJSONRPC(t, url, "", e.Key, lines[0])
		session := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != http.StatusOK || session == "" {
			t.Fatalf("initialize: %d %v", resp.StatusCode, resp.Header)
		}
		inSession := []string{"Mcp-Session-Id", session, "Mcp-Protocol-Version", "2025-06-18"}
		postJSONRPC(t, url, "", e.Key, lines[1], inSession...)
		for i, c := range calls {
			resp, b := postJSONRPC(t, url, "", e.Key, lines[2+i], inSession...)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d %s", c.tool, resp.StatusCode, b)
			}
			var a answer
			if err := json.Unmarshal(jsonRPCBody(resp, b), &a); err != nil {
				t.Fatalf("%s: %v: %s", c.tool, err, b)
			}
			checkResultOrder(t, c.tool, a.Result, c.want)
		}
	})
}

// checkResultOrder checks the header order of a tools/call result's text
// content and of its structuredContent, as written on the wire.
func checkResultOrder(t *testing.T, tool string, result json.RawMessage, want []string) {
	t.Helper()
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	}
	if err := json.Unmarshal(result, &res); err != nil || res.IsError || len(res.Content) != 1 || res.StructuredContent == nil {
		t.Fatalf("%s: %v %s", tool, err, result)
	}
	for _, part := range []struct {
		name string
		raw  []byte
	}{{"text content", []byte(res.Content[0].Text)}, {"structuredContent", res.StructuredContent}} {
		var out struct {
			UntrustedContent json.RawMessage `json:"untrusted_content"`
		}
		if err := json.Unmarshal(part.raw, &out); err != nil {
			t.Fatalf("%s %s: %v", tool, part.name, err)
		}
		if got := headerOrder(t, out.UntrustedContent); !slices.Equal(got, want) {
			t.Errorf("%s %s: headers %q, want %q", tool, part.name, got, want)
		}
	}
	// The text content is structuredContent, byte for byte.
	var compact bytes.Buffer
	json.Compact(&compact, res.StructuredContent)
	if res.Content[0].Text != compact.String() {
		t.Errorf("%s: text content differs from structuredContent:\n%s\n%s", tool, res.Content[0].Text, res.StructuredContent)
	}
}

// headerOrder is the names of a capture's headers object in the order
// written.
func headerOrder(t *testing.T, capture []byte) []string {
	t.Helper()
	var c struct {
		Headers json.RawMessage `json:"headers"`
	}
	if err := json.Unmarshal(capture, &c); err != nil {
		t.Fatalf("%v: %s", err, capture)
	}
	dec := json.NewDecoder(bytes.NewReader(c.Headers))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("headers are not an object: %s", c.Headers)
	}
	var order []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, tok.(string))
		var values []string
		if err := dec.Decode(&values); err != nil {
			t.Fatal(err)
		}
	}
	return order
}

func names(hs []store.Header) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Name
	}
	return out
}

// apiGet is the body of a GET of the read API at path, with e's key.
func apiGet(t *testing.T, e *mcptest.Env, path string) []byte {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.APIBase+path, nil)
	req.Header.Set("Authorization", "Bearer "+e.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return b
}

// jsonRPCBody is the JSON-RPC message of an answer to a POST: the body, or
// the data of its event when the server answered with an event stream.
func jsonRPCBody(resp *http.Response, body string) []byte {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return []byte(body)
	}
	var data []byte
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
			data = append(data, strings.TrimSpace(d)...)
		}
	}
	return data
}
