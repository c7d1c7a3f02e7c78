package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
//
// The SDK also ends the connection at the first line it cannot read as a
// JSON-RPC message, unanswered calls and all. A line like that is answered
// here with the JSON-RPC error for it and skipped, as JSON-RPC asks, and
// the connection carries on.
func StdioTransport(in io.Reader, out io.Writer) mcpsdk.Transport {
	t, _ := stdioTransport(in, out)
	return t
}

// stdioTransport is StdioTransport and the calls it has read and not yet
// answered.
func stdioTransport(in io.Reader, out io.Writer) (mcpsdk.Transport, *calls) {
	c := &calls{pending: map[string]bool{}}
	c.cond = sync.NewCond(&c.mu)
	w := &answerWriter{out: out, calls: c}
	return &mcpsdk.IOTransport{
		Reader: &heldReader{in: in, calls: c, refuse: w.refuse, chunk: make([]byte, 32<<10)},
		Writer: w,
	}, c
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
		RequestID       json.RawMessage `json:"requestId"`
		ProtocolVersion string          `json:"protocolVersion"`
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

// maxLine is the longest line passed on, the SDK's own limit: a longer
// one is refused rather than held in memory.
const maxLine = mcpsdk.DefaultMaxLineLength

// heldReader passes in on to the SDK a whole line at a time, only lines
// that are JSON-RPC messages, and holds back the end of in (see
// StdioTransport).
type heldReader struct {
	in     io.Reader
	calls  *calls
	refuse func(id json.RawMessage, code int, message string)
	chunk  []byte

	lines    lines
	skipping bool   // inside a line past maxLine, dropped up to its end
	ready    []byte // whole lines for the SDK
	err      error  // in's error, once ready is handed over
	version  string // the protocol version the client asked for
}

func (r *heldReader) Read(b []byte) (int, error) {
	for len(r.ready) == 0 {
		if r.err == io.EOF {
			r.calls.waitAnswered()
		}
		if r.err != nil {
			return 0, r.err
		}
		n, err := r.in.Read(r.chunk)
		r.take(r.chunk[:n])
		if err == io.EOF && len(r.lines.partial) > 0 {
			// A last line without its newline is a message too.
			r.line(r.lines.partial)
			r.lines.partial = nil
		}
		r.err = err
	}
	n := copy(b, r.ready)
	r.ready = r.ready[n:]
	return n, nil
}

// take passes on the lines completed by what was read, and drops a line
// growing past maxLine, answering it once.
func (r *heldReader) take(b []byte) {
	r.lines.feed(b, r.line)
	if len(r.lines.partial) > maxLine {
		if !r.skipping {
			r.refuse(nil, codeInvalidRequest, fmt.Sprintf("Invalid Request: a line longer than %d MiB was skipped; send smaller messages", maxLine>>20))
		}
		r.lines.partial, r.skipping = nil, true
	}
}

// JSON-RPC 2.0's codes for what cannot be read as a call.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// line passes on a line that holds a JSON-RPC message (or a batch), and
// answers any other with its error.
func (r *heldReader) line(l []byte) {
	if r.skipping {
		// The end of the line too long to pass on.
		r.skipping = false
		return
	}
	l = bytes.TrimSpace(l)
	if len(l) == 0 {
		return
	}
	if len(l) > maxLine {
		r.refuse(nil, codeInvalidRequest, fmt.Sprintf("Invalid Request: a line longer than %d MiB was skipped; send smaller messages", maxLine>>20))
		return
	}
	if !json.Valid(l) {
		r.refuse(nil, codeParseError, "Parse error: a line that is not JSON was skipped; send one JSON-RPC message per line")
		return
	}
	if l[0] == '[' {
		if !r.batch(l) {
			return
		}
	} else if _, err := jsonrpc.DecodeMessage(l); err != nil {
		var m message
		json.Unmarshal(l, &m)
		if idKey(m.ID) == "" {
			m.ID = nil
		}
		r.refuse(m.ID, codeInvalidRequest, "Invalid Request: the line is JSON but not a JSON-RPC 2.0 message, and was skipped")
		return
	}
	each(l, func(m message) {
		if m.Method == "initialize" {
			r.version = m.Params.ProtocolVersion
		}
		r.calls.read(m)
	})
	r.ready = append(append(r.ready, l...), '\n')
}

// batch says whether a batch line can be passed on, and answers it when
// not: the SDK would end the connection.
func (r *heldReader) batch(l []byte) bool {
	var batch []json.RawMessage
	json.Unmarshal(l, &batch)
	// MCP dropped batches in 2025-06-18; protocol versions are dates.
	if r.version >= "2025-06-18" {
		r.refuse(nil, codeInvalidRequest, fmt.Sprintf("Invalid Request: protocol version %s has no batches; send one message per line", r.version))
		return false
	}
	if len(batch) == 0 {
		r.refuse(nil, codeInvalidRequest, "Invalid Request: an empty batch was skipped")
		return false
	}
	ids := map[string]bool{}
	for _, raw := range batch {
		if _, err := jsonrpc.DecodeMessage(raw); err != nil {
			r.refuse(nil, codeInvalidRequest, "Invalid Request: a batch holding something other than JSON-RPC 2.0 messages was skipped")
			return false
		}
		var m message
		json.Unmarshal(raw, &m)
		if id := idKey(m.ID); m.Method != "" && id != "" {
			if ids[id] {
				r.refuse(nil, codeInvalidRequest, "Invalid Request: a batch using one id twice was skipped")
				return false
			}
			ids[id] = true
		}
	}
	return true
}

func (r *heldReader) Close() error {
	r.calls.close()
	return nil
}

// answerWriter writes the SDK's messages and the refusals of lines it
// never saw, one whole line at a time.
type answerWriter struct {
	mu    sync.Mutex
	out   io.Writer
	calls *calls
	lines lines
}

func (w *answerWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.out.Write(b)
	// Only once written is an answer answered.
	w.lines.feed(b[:n], func(line []byte) { each(line, w.calls.answered) })
	return n, err
}

// refuse answers a line that is not a call with JSON-RPC's error for it;
// id is null unless the line had one.
func (w *answerWriter) refuse(id json.RawMessage, code int, message string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	type rpcError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{code, message}})
	w.mu.Lock()
	defer w.mu.Unlock()
	w.out.Write(append(b, '\n'))
}

// Close leaves out open: it is the process's stdout.
func (w *answerWriter) Close() error { return nil }
