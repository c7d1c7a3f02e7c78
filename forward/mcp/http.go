package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/server/api/contract"
)

// sessionTimeout closes sessions whose client went away without saying so.
const sessionTimeout = 30 * time.Minute

// maxSessionsPerKey bounds the sessions one key keeps open in a process:
// harnesses that start a client per test and never end its session would
// otherwise hold a goroutine and its buffers each for sessionTimeout.
// Opening one more closes the key's least recently used session; a later
// request of that one is still answered, without a session, as on a
// replica that never held it.
const maxSessionsPerKey = 32

// sessionUse is when each session this process opened last had a request,
// per key id.
type sessionUse struct {
	mu   sync.Mutex
	used map[string]map[string]time.Time
}

// touch notes a request of a session this process opened.
func (u *sessionUse) touch(keyID, sessionID string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if used, ok := u.used[keyID]; ok {
		if _, ok := used[sessionID]; ok {
			used[sessionID] = time.Now()
		}
	}
}

// opened notes a session the key just opened on server, forgets those
// that ended, and closes the least recently used past maxSessionsPerKey.
func (u *sessionUse) opened(server *mcpsdk.Server, keyID, sessionID string) {
	live := map[string]*mcpsdk.ServerSession{}
	for ss := range server.Sessions() {
		live[ss.ID()] = ss
	}
	var evict []*mcpsdk.ServerSession
	u.mu.Lock()
	used := u.used[keyID]
	if used == nil {
		used = map[string]time.Time{}
		u.used[keyID] = used
	}
	used[sessionID] = time.Now()
	for id := range used {
		if live[id] == nil {
			delete(used, id)
		}
	}
	for len(used) > maxSessionsPerKey {
		oldest := ""
		for id, at := range used {
			if oldest == "" || at.Before(used[oldest]) {
				oldest = id
			}
		}
		delete(used, oldest)
		evict = append(evict, live[oldest])
	}
	u.mu.Unlock()
	for _, ss := range evict {
		ss.Close()
	}
}

// maxEnded bounds how many sessions ended by DELETE this process
// remembers; past it, the longest ended is forgotten, and its id is then
// answered without a session like any this process does not hold.
const maxEnded = 4096

// endedSessions are the ids of the sessions ended here by DELETE, the most
// recent maxEnded of them. A session ended is gone for good (the MCP
// spec's streamable HTTP: its id then gets 404), though a request naming
// a session this process does not hold is otherwise served statelessly.
type endedSessions struct {
	mu    sync.Mutex
	ids   map[sessionDigest]bool
	order []sessionDigest // ring, the oldest at next once full
	next  int
}

// sessionDigest keeps an ended id in a fixed size: a caller may DELETE
// made-up ids as long as a header allows.
type sessionDigest [sha256.Size]byte

func (e *endedSessions) add(id string) {
	d := sessionDigest(sha256.Sum256([]byte(id)))
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ids[d] {
		return
	}
	if len(e.order) < maxEnded {
		e.order = append(e.order, d)
	} else {
		delete(e.ids, e.order[e.next])
		e.order[e.next] = d
		e.next = (e.next + 1) % maxEnded
	}
	e.ids[d] = true
}

func (e *endedSessions) has(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ids[sha256.Sum256([]byte(id))]
}

// caller is the checked key of one HTTP request.
type caller struct {
	client *apiclient.Client
	keyID  string
}

type callerKey struct{}

// HTTPHandler serves MCP over streamable HTTP for the read API at apiBase
// (…/api/v1). Every request must carry `Authorization: Bearer cap_…`; the
// key is checked with GET /me, and the session it opens reads through a
// client with that same key, so it sees that key's project only.
//
// Sessions live in the process that opened them, but replicas behind a
// load balancer each see part of a client's requests (SPEC §19: every
// route works on any replica). A request naming a session this process
// does not hold is therefore answered as a request of its own, with no
// session (the SDK's stateless mode), as long as the session id is one of
// the caller's key: session ids begin with the id of the key that opened
// them, so another key's session is not_found on every replica alike. A
// session ended with DELETE is not_found from then on, on the replica
// that ended it (the others cannot know of it).
//
// stopping, closed when the serving process begins a graceful stop, ends
// the tools that wait (wait_for_message, a list with wait) with a tool
// error saying the server is stopping; every other call, a replay
// included, is finished and answered. nil: it never closes.
func HTTPHandler(apiBase string, version string, stopping <-chan struct{}) http.Handler {
	// The SDK asks for the server on every request, not once per session,
	// and building one infers every tool's schemas: keep one per key.
	var mu sync.Mutex
	servers := map[string]*mcpsdk.Server{}
	serverOf := func(r *http.Request) *mcpsdk.Server {
		c, ok := r.Context().Value(callerKey{}).(caller)
		if !ok {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		s := servers[c.keyID]
		if s == nil {
			s = newServer(c.client, version, func() string { return sessionIDFor(c.keyID) }, stopping)
			servers[c.keyID] = s
		}
		return s
	}

	// The SDK binds a session to the UserID of the request that opened it
	// and refuses the session's id from anyone else; the key id is that
	// user. The key itself was checked before this point. The request's
	// context goes along for endsWithRequest.
	perKey := auth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		c, ok := r.Context().Value(callerKey{}).(caller)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: c.keyID, Extra: map[string]any{httpRequestDone: r.Context()}}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	// The SDK refuses, as a guard against DNS rebinding, a request that
	// came in on a loopback address under any Host but localhost: every
	// request behind a reverse proxy that keeps the public Host. Here every
	// request needs the API key, which a page on a rebound name cannot
	// know, so the guard protects nothing and is off.
	sessions := perKey(mcpsdk.NewStreamableHTTPHandler(serverOf,
		&mcpsdk.StreamableHTTPOptions{SessionTimeout: sessionTimeout, DisableLocalhostProtection: true}))
	alone := perKey(mcpsdk.NewStreamableHTTPHandler(serverOf,
		&mcpsdk.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true, DisableLocalhostProtection: true}))

	use := &sessionUse{used: map[string]map[string]time.Time{}}
	ended := &endedSessions{ids: map[sessionDigest]bool{}}
	keys := &knownKeys{ids: map[sessionDigest]string{}}

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := contract.BearerToken(r.Header.Get("Authorization"))
		if !ok {
			contract.WriteError(w, contract.Errorf(contract.CodeUnauthorized,
				"missing or malformed API key: send Authorization: Bearer cap_…"))
			return
		}
		client := apiclient.New(apiBase, key, nil)
		sessionID := r.Header.Get("Mcp-Session-Id")
		// A tool call, which the key's rate counts through the tool's own
		// API calls (SPEC §5: one call, one request, as over stdio), is
		// told from the rest, which GET /me counts, by its body: read
		// only for a key GET /me has accepted already (or refused for
		// the rate alone), never for a key not checked, so that no one
		// without a key can make this process hold bodies. The body is
		// kept for a second reading by the stateless handler should this
		// process not hold the session (the SDK consumes it, through a
		// reader of its own). The SDK's own limit still applies.
		inSession := sessionID != "" && r.Method == http.MethodPost
		var body []byte
		keyID, known := keys.id(key)
		if known && inSession {
			if body = rereadable(w, r); body == nil {
				return
			}
		}
		call, isCall := toolCall(body)
		if !isCall || !known {
			me, err := client.Me(r.Context())
			if err != nil {
				var ae *contract.Error
				if !errors.As(err, &ae) || ae.Code == "" {
					ae = contract.Errorf(contract.CodeInternal, "cannot check the API key: %v", err)
				}
				if ae.Code == contract.CodeRateLimited && inSession {
					// A tool call is answered as a tool, as its own API
					// call would have been.
					if body == nil {
						if body = rereadable(w, r); body == nil {
							return
						}
						call, isCall = toolCall(body)
					}
					if isCall {
						writeToolFailure(w, call, ae)
						return
					}
				}
				contract.WriteError(w, ae)
				return
			}
			keyID = me.Key.ID
			keys.add(key, keyID)
		}
		if r.Method == http.MethodPost && body == nil {
			// The key checked now: a message in a session is kept for a
			// second reading, as above; one without a session must open
			// one (below).
			if body = rereadable(w, r); body == nil {
				return
			}
		}
		r = r.WithContext(context.WithValue(r.Context(), callerKey{}, caller{client: client, keyID: keyID}))
		if sessionID != "" && !strings.HasPrefix(sessionID, keyID+".") {
			// Another key's session, which the SDK refuses.
			serveEnveloped(sessions, w, r)
			return
		}
		if sessionID == "" && r.Method != http.MethodPost {
			serveEnveloped(sessions, w, r)
			return
		}
		if sessionID != "" && ended.has(sessionID) {
			contract.WriteError(w, noSession(sessionID))
			return
		}
		if sessionID == "" {
			// Without a session, the body must open one. The transport's rule (streamable HTTP): a message other than
			// initialize without a session is a bad request. The SDK
			// would open a session for it only to refuse the message with
			// an error code JSON-RPC does not define.
			if !opensSession(body) {
				contract.WriteError(w, contract.Invalid(map[string]string{"Mcp-Session-Id": "required: start a session with an initialize request first, then send its Mcp-Session-Id with every request"}))
				return
			}
			serveEnveloped(sessions, w, r)
			if id := w.Header().Get("Mcp-Session-Id"); id != "" {
				use.opened(serverOf(r), keyID, id)
			}
			return
		}
		use.touch(keyID, sessionID)
		ew := &envelopeWriter{ResponseWriter: w}
		sessions.ServeHTTP(ew, r)
		if !ew.sessionNotFound() {
			if r.Method == http.MethodDelete && ew.status < 300 {
				ended.add(sessionID)
			}
			ew.finish(r)
			return
		}
		// The session is the caller's, opened on another replica (or by
		// this process before a restart).
		h := w.Header()
		h.Del("Content-Type")
		h.Del("X-Content-Type-Options")
		if r.Method == http.MethodDelete {
			// Nothing of the session is here to end; the replica that
			// holds it lets it go after sessionTimeout. Here it has ended.
			ended.add(sessionID)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		serveEnveloped(alone, w, r)
	})
}

// maxKnownKeys bounds how many keys knownKeys remembers; past it, it
// forgets them all and learns again, each at the cost of one GET /me.
const maxKnownKeys = 4096

// knownKeys are the ids of the keys GET /me accepted in this process, by
// digest of the key. A key's id never changes; whether the key still
// holds is for each API call to say (revoked: unauthorized).
type knownKeys struct {
	mu  sync.Mutex
	ids map[sessionDigest]string
}

func (k *knownKeys) id(key string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	id, ok := k.ids[sha256.Sum256([]byte(key))]
	return id, ok
}

func (k *knownKeys) add(key, id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.ids) >= maxKnownKeys {
		clear(k.ids)
	}
	k.ids[sha256.Sum256([]byte(key))] = id
}

// toolCall reports whether body is one tools/call request (not a batch),
// and its id.
//
// Such a call is served without GET /me when the key is known: the key's
// rate is then counted once, by the API calls of the tool, and a key
// revoked since is refused by them, as a tool error. Any other message
// checks the key with GET /me, which counts a request of its rate too.
func toolCall(body []byte) (id json.RawMessage, ok bool) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &m) != nil {
		return nil, false
	}
	return m.ID, m.Method == "tools/call" && idKey(m.ID) != ""
}

// writeToolFailure answers the tools/call id with a tool error for err,
// as the tool would have answered it.
func writeToolFailure(w http.ResponseWriter, id json.RawMessage, err error) {
	res, mErr := json.Marshal(toolFailure(explain(err)))
	if mErr != nil {
		contract.WriteError(w, contract.Errorf(contract.CodeInternal, "mcp: %v", mErr))
		return
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
	}{"2.0", id, res})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// opensSession reports whether a POST body without a session is one the
// SDK should see: an initialize request, a ping (which the SDK answers
// before initialize, and clients use to probe a server), or a body that
// is not JSON-RPC at all, whose parse error the SDK answers in the
// protocol's own terms.
func opensSession(body []byte) bool {
	type message struct {
		Method string `json:"method"`
	}
	allowed := func(m message) bool { return m.Method == "initialize" || m.Method == "ping" }
	var one message
	if json.Unmarshal(body, &one) == nil {
		return allowed(one)
	}
	var batch []message
	if json.Unmarshal(body, &batch) == nil {
		return slices.ContainsFunc(batch, allowed)
	}
	return true
}

// httpRequestDone is the key, in a request's token info, of the HTTP
// request's context.
const httpRequestDone = "capture/http-request"

// endsWithRequest cancels a call when the HTTP request that carries it
// ends: its client went away, or cancelled the call by closing it. The
// answer could no longer reach the client (no event store keeps it), and
// the client's notification of the cancel may reach another replica, or
// no session at all: without this a wait given up would hold its slot of
// the project's four for up to 30 s.
func endsWithRequest(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
	return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
		if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
			if httpCtx, ok := extra.TokenInfo.Extra[httpRequestDone].(context.Context); ok {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
				defer context.AfterFunc(httpCtx, cancel)()
			}
		}
		return next(ctx, method, req)
	}
}

// sessionIDFor names a new session of the key keyID.
func sessionIDFor(keyID string) string {
	return keyID + "." + rand.Text()
}

// serveEnveloped serves r with h, its plain-text errors in the API's
// envelope.
func serveEnveloped(h http.Handler, w http.ResponseWriter, r *http.Request) {
	ew := &envelopeWriter{ResponseWriter: w}
	h.ServeHTTP(ew, r)
	ew.finish(r)
}

// envelopeWriter passes the SDK's answers through, except its plain-text
// HTTP errors, which it holds back so that finish answers them in the API's
// error envelope like every other error of serve (SPEC §8). JSON-RPC errors
// (application/json) are the protocol's own and pass unchanged.
type envelopeWriter struct {
	http.ResponseWriter
	wroteHeader bool
	// status is the status written, held back or not.
	status int
	// held is the status of a plain-text error being held back, 0 if none.
	held int
	text []byte
}

// sessionNotFound reports that the SDK held no session of the request's
// id: its plain-text 404, never the JSON-RPC one of an unknown method.
func (w *envelopeWriter) sessionNotFound() bool {
	return w.held == http.StatusNotFound && strings.TrimSpace(string(w.text)) == "session not found"
}

// noSuchSession reports that the SDK refused the request's session id: it
// holds no such session, the session is closing, or it is another key's
// (the SDK's 403). Any other refusal of the SDK is about the request.
func (w *envelopeWriter) noSuchSession() bool {
	text := strings.TrimSpace(string(w.text))
	switch w.held {
	case http.StatusNotFound:
		return text == "session not found" || text == "session is closing"
	case http.StatusForbidden:
		return text == "session user mismatch"
	}
	return false
}

func (w *envelopeWriter) WriteHeader(status int) {
	if w.wroteHeader {
		return
	}
	w.wroteHeader = true
	w.status = status
	if status >= 400 && !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		w.held = status
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *envelopeWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.held != 0 {
		if room := 512 - len(w.text); room > 0 {
			w.text = append(w.text, b[:min(room, len(b))]...)
		}
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Flush keeps server-sent events streaming through the wrapper.
func (w *envelopeWriter) Flush() {
	if w.held == 0 {
		http.NewResponseController(w.ResponseWriter).Flush()
	}
}

func (w *envelopeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// noSession is the answer to a request naming a session that does not
// exist for its key: never opened, another key's, or ended.
func noSession(id string) *contract.Error {
	return contract.Errorf(contract.CodeNotFound,
		"mcp: no session %q for this API key; start a new session (initialize without Mcp-Session-Id)", id)
}

// finish answers a held-back error with the code its status means.
func (w *envelopeWriter) finish(r *http.Request) {
	if w.held == 0 {
		return
	}
	h := w.Header()
	h.Del("X-Content-Type-Options")
	text := strings.TrimSpace(string(w.text))
	var e *contract.Error
	switch {
	case w.held == http.StatusUnauthorized:
		e = contract.Errorf(contract.CodeUnauthorized, "mcp: %s", text)
	case w.noSuchSession():
		// A session id of another key is answered as an unknown one: the
		// session does not exist for this key (SPEC §8, another project's
		// objects are not_found).
		e = noSession(r.Header.Get("Mcp-Session-Id"))
	case w.held == http.StatusMethodNotAllowed:
		allow := strings.Split(h.Get("Allow"), ", ")
		e = contract.MethodNotAllowed(r, allow)
	default:
		if w.held >= 500 {
			e = contract.Errorf(contract.CodeInternal, "mcp: %s", text)
		} else {
			e = contract.Errorf(contract.CodeInvalidParameter, "mcp: %s", text)
		}
	}
	contract.WriteError(w.ResponseWriter, e)
}

// rereadable reads r's body (up to the SDK's own limit, and one byte past
// it for the SDK to refuse) and puts it back to be read again; nil, the
// failure answered, when it cannot be read.
func rereadable(w http.ResponseWriter, r *http.Request) []byte {
	b, err := io.ReadAll(io.LimitReader(r.Body, mcpsdk.DefaultMaxRequestBodyBytes+1))
	if err != nil {
		contract.WriteError(w, contract.Errorf(contract.CodeInvalidParameter, "mcp: cannot read the request: %v", err))
		return nil
	}
	if b == nil {
		b = []byte{}
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b
}
