package mcp

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"sync"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioTransport serves MCP over in and out, newline-delimited JSON, as
// `capture mcp` does over stdin and stdout.
//
// A script may write its calls and close its end at once
// (`printf '…' | capture mcp`). The SDK ends the connection when its input
// ends, and the answers to calls still running would be lost, so the end
// of in is held back until every call read from it has been answered (or
// cancelled by its client), or the connection is closed.
func StdioTransport(in io.Reader, out io.Writer) mcpsdk.Transport {
	c := &calls{pending: map[string]bool{}}
	c.cond = sync.NewCond(&c.mu)
	return &mcpsdk.IOTransport{
		Reader: &heldReader{in: in, calls: c},
		Writer: &answerWriter{out: out, calls: c},
	}
}

// calls are the ids of the calls read and not yet answered. An id a
// client sends again while its first call runs is one entry: the SDK
// answers only one of the two.
type calls struct {
	mu      sync.Mutex
	cond    *sync.Cond
	pending map[string]bool
	closed  bool
}

// message is what calls reads of a JSON-RPC message: a call has a method
// and an id, an answer an id only; a cancel names the call it gives up.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		RequestID json.RawMessage `json:"requestId"`
	} `json:"params"`
}

// lines hands each complete line of what passes to f.
type lines struct{ partial []byte }

func (l *lines) feed(b []byte, f func(line []byte)) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			l.partial = append(l.partial, b...)
			return
		}
		line := b[:i]
		if len(l.partial) > 0 {
			line = append(l.partial, line...)
			l.partial = l.partial[:0]
		}
		f(line)
		b = b[i+1:]
	}
}

// each calls f with every message of line: one object, or a batch.
func each(line []byte, f func(message)) {
	line = bytes.TrimSpace(line)
	if len(line) > 0 && line[0] == '[' {
		var batch []message
		if json.Unmarshal(line, &batch) == nil {
			for _, m := range batch {
				f(m)
			}
		}
		return
	}
	var m message
	if json.Unmarshal(line, &m) == nil {
		f(m)
	}
}

// idKey is an id as calls keys it. A JSON-RPC id is a number or a string,
// and the SDK writes back the value, not the text it read ("1.0" comes
// back as 1, "\u0041" as "A"), so the key is the decoded value.
func idKey(id json.RawMessage) string {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return ""
	}
	switch v := v.(type) {
	case float64:
		return "n" + strconv.FormatFloat(v, 'g', -1, 64)
	case string:
		return "s" + v
	}
	return "" // null, or not an id
}

func (c *calls) read(m message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch id := idKey(m.ID); {
	case m.Method == "notifications/cancelled":
		// A cancelled call may go unanswered.
		c.done(idKey(m.Params.RequestID))
	case m.Method != "" && id != "":
		c.pending[id] = true
	}
}

// done marks the call of id answered. Called with c.mu held.
func (c *calls) done(id string) {
	delete(c.pending, id)
	c.cond.Broadcast()
}

func (c *calls) answered(m message) {
	if m.Method != "" {
		return // the server's own call to the client
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done(idKey(m.ID))
}

// waitAnswered returns once no call is pending or the connection closed.
func (c *calls) waitAnswered() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.pending) > 0 && !c.closed {
		c.cond.Wait()
	}
}

func (c *calls) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.cond.Broadcast()
}

type heldReader struct {
	in    io.Reader
	calls *calls
	lines lines
}

func (r *heldReader) Read(b []byte) (int, error) {
	n, err := r.in.Read(b)
	r.lines.feed(b[:n], func(line []byte) { each(line, r.calls.read) })
	if err == io.EOF {
		// A last line without its newline is a message too.
		if len(r.lines.partial) > 0 {
			each(r.lines.partial, r.calls.read)
			r.lines.partial = nil
		}
		if n > 0 {
			return n, nil // the SDK reads what came first, then EOF again
		}
		r.calls.waitAnswered()
	}
	return n, err
}

func (r *heldReader) Close() error {
	r.calls.close()
	return nil
}

type answerWriter struct {
	out   io.Writer
	calls *calls
	lines lines
}

func (w *answerWriter) Write(b []byte) (int, error) {
	n, err := w.out.Write(b)
	// Only once written is an answer answered.
	w.lines.feed(b[:n], func(line []byte) { each(line, w.calls.answered) })
	return n, err
}

// Close leaves out open: it is the process's stdout.
func (w *answerWriter) Close() error { return nil }
