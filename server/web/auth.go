package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/store"
)

const (
	// The capture listener drops these from what it stores, by the same
	// names.
	sessionCookie = contract.SessionCookie
	// loginCookie holds the token that the sign-in forms echo back, since
	// there is no session yet to tie them to.
	loginCookie = contract.LoginCookie
	flashCookie = contract.FlashCookie
	csrfField   = "csrf"
	csrfHeader  = "X-CSRF-Token"
	// maxFormBytes bounds a form post; the largest field is an endpoint's
	// response body.
	maxFormBytes = 2 << 20
)

// session is a signed-in browser.
type session struct {
	token string
	// csrf is the token every state-changing request must carry. It is
	// derived from the session token, so it needs no storage, ends with the
	// session, and does not reveal the session token.
	csrf string
	// expires is when the session ends by itself.
	expires time.Time
}

func csrfFor(sessionToken string) string {
	sum := sha256.Sum256([]byte("capture web csrf\x00" + sessionToken))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func randomToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// isHTTPS reports whether the browser reached us over https, directly or
// through a proxy that says so; cookies are then marked Secure.
func isHTTPS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func setCookie(w http.ResponseWriter, r *http.Request, name, value, path string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: path, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: isHTTPS(r),
	})
}

// currentSession returns the browser's live session, or nil.
func (h *Handler) currentSession(r *http.Request) (*session, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return nil, nil
	}
	sess, err := h.store.CheckSession(r.Context(), c.Value)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		return nil, err
	}
	return &session{token: c.Value, csrf: csrfFor(c.Value), expires: sess.ExpiresAt}, nil
}

// auth lets signed-in browsers through to fn and checks the CSRF token of
// every request that changes something. Others are sent to sign in.
func (h *Handler) auth(fn func(http.ResponseWriter, *http.Request, *session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := h.currentSession(r)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if s == nil {
			switch {
			case r.Method == http.MethodGet && !wantsData(r):
				// A page: to the sign-in form, whatever the client (a
				// program following redirects lands on it too).
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			case !acceptsHTML(r):
				contract.WriteError(w, contract.Errorf(contract.CodeUnauthorized,
					"sign in first: the web interface takes the session cookie of a signed-in browser "+
						"(the read API at %s takes an API key)", contract.Prefix))
			default:
				h.errorPage(w, r, http.StatusUnauthorized, "You are signed out. Sign in again.")
			}
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			token := r.Header.Get(csrfHeader)
			if token == "" {
				token = r.PostFormValue(csrfField)
			}
			if !sameToken(token, s.csrf) {
				if refusedProgram(w, r, csrfField, "missing or not this session's token: send the csrf field "+
					"of one of its pages' forms, or the "+csrfHeader+" header") {
					return
				}
				h.errorPage(w, r, http.StatusForbidden,
					"This form has expired or did not come from this page. Go back, reload and try again.")
				return
			}
		}
		fn(w, r, s)
	})
}

// wantsData reports a request made by the page's script (a live list or a
// reveal), which gets a status rather than a redirect to the sign-in page.
func wantsData(r *http.Request) bool {
	return r.Header.Get("Accept") == "text/event-stream" || r.Header.Get(csrfHeader) != "" ||
		r.Header.Get("X-Requested-With") != ""
}

// openStreams lets a sign-out end the live lists its session has open on
// this server at once. A session ended elsewhere (another server on the
// same database, a new password) is found by the check each stream makes
// before it writes.
type openStreams struct {
	mu       sync.Mutex
	sessions map[string]*sessionStreams
}

type sessionStreams struct {
	ended chan struct{}
	open  int
}

func newOpenStreams() *openStreams { return &openStreams{sessions: map[string]*sessionStreams{}} }

// add counts a stream of the session; ended is closed when the session
// is ended here, and done is called when the stream ends.
func (o *openStreams) add(token string) (ended <-chan struct{}, done func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ss, ok := o.sessions[token]
	if !ok {
		ss = &sessionStreams{ended: make(chan struct{})}
		o.sessions[token] = ss
	}
	ss.open++
	return ss.ended, func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if ss.open--; ss.open == 0 && o.sessions[token] == ss {
			delete(o.sessions, token)
		}
	}
}

// end ends the session's open streams.
func (o *openStreams) end(token string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ss, ok := o.sessions[token]; ok {
		close(ss.ended)
		delete(o.sessions, token)
	}
}

// projectCtx is a signed-in request inside one project.
type projectCtx struct {
	*session
	project store.Project
}

// inProject resolves the {pid} of the path to a project.
func (h *Handler) inProject(fn func(http.ResponseWriter, *http.Request, *projectCtx)) http.Handler {
	return h.auth(func(w http.ResponseWriter, r *http.Request, s *session) {
		pid := r.PathValue("pid")
		p, err := h.store.Project(r.Context(), pid)
		// Pages address projects by id only, so that each has one address.
		if err == nil && p.ID != pid {
			err = store.ErrNotFound
		}
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				h.errorPage(w, r, http.StatusNotFound, "There is no such project.")
				return
			}
			h.fail(w, r, err)
			return
		}
		fn(w, r, &projectCtx{session: s, project: p})
	})
}

// setFlash leaves a one-line message for the page the browser is
// redirected to.
func setFlash(w http.ResponseWriter, r *http.Request, msg string) {
	setCookie(w, r, flashCookie, base64.RawURLEncoding.EncodeToString([]byte(msg)), "/", 60)
}

// takeFlash reads and clears the message left by setFlash.
func takeFlash(w http.ResponseWriter, r *http.Request) string {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	setCookie(w, r, flashCookie, "", "/", -1)
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return ""
	}
	return string(b)
}

// redirect answers a successful form post by sending the browser to a page
// that shows the result (post/redirect/get), with a message.
func redirect(w http.ResponseWriter, r *http.Request, to, flash string) {
	if flash != "" {
		setFlash(w, r, flash)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// throttle slows down failed sign-ins per client: each failure is answered
// only after a delay that doubles up to maxSignInDelay, and one client's
// attempts run one at a time, so parallel guesses wait their turn too.
type throttle struct {
	mu      sync.Mutex
	clients map[string]*signInAttempts
}

type signInAttempts struct {
	turn     chan struct{}
	failures int
	last     time.Time
}

const (
	minSignInDelay = time.Second
	maxSignInDelay = 8 * time.Second
	// forgetAfter drops a client's failures once it has been quiet this
	// long, and bounds the table's memory.
	forgetAfter = time.Hour
)

func newThrottle() *throttle { return &throttle{clients: map[string]*signInAttempts{}} }

// maxTurnWait bounds how long an attempt waits behind the client's
// others, well within the listener's write timeout: past it, the attempt
// is refused (errSignInBusy) rather than left without any answer. A
// variable so tests can make it short.
var maxTurnWait = 10 * time.Second

// errSignInBusy refuses an attempt that waited maxTurnWait for its turn.
var errSignInBusy = errors.New("too many sign-in attempts at once from this address")

// acquire waits for the client's turn to try signing in.
func (t *throttle) acquire(ctx context.Context, client string) (*signInAttempts, error) {
	t.mu.Lock()
	a, ok := t.clients[client]
	if !ok {
		if len(t.clients) >= 10_000 {
			t.forgetQuiet()
		}
		a = &signInAttempts{turn: make(chan struct{}, 1)}
		t.clients[client] = a
	}
	t.mu.Unlock()
	timer := time.NewTimer(maxTurnWait)
	defer timer.Stop()
	select {
	case a.turn <- struct{}{}:
		return a, nil
	case <-timer.C:
		return nil, errSignInBusy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (t *throttle) forgetQuiet() {
	for k, a := range t.clients {
		if time.Since(a.last) > forgetAfter && len(a.turn) == 0 {
			delete(t.clients, k)
		}
	}
}

// release ends the client's attempt. A failed one first waits out its
// delay, which also holds back the client's next attempt.
func (t *throttle) release(ctx context.Context, a *signInAttempts, ok bool) {
	defer func() { <-a.turn }()
	t.mu.Lock()
	if time.Since(a.last) > forgetAfter {
		a.failures = 0
	}
	a.last = time.Now()
	if ok {
		a.failures = 0
		t.mu.Unlock()
		return
	}
	a.failures++
	delay := min(minSignInDelay<<min(a.failures-1, 8), maxSignInDelay)
	t.mu.Unlock()
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}

// clientOf names the client for the throttle: its address without the
// port. Forwarded-for headers are not trusted, since anyone can send one.
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// confirmView is the page that asks before a destructive form is acted on.
type confirmView struct {
	Question, Button, Action, Cancel string
	Fields                           []fieldRow
}

// confirmFirst acts on a destructive form (delete, purge, revoke, rotate)
// only once it is confirmed. The page's script asks in the browser and
// marks the form confirmed; without the script, this asks on a page of its
// own, with the same form again, marked.
func (h *Handler) confirmFirst(fn func(http.ResponseWriter, *http.Request, *projectCtx)) func(http.ResponseWriter, *http.Request, *projectCtx) {
	return func(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
		// auth has read the form already, for its CSRF token.
		if err := r.ParseForm(); err != nil {
			h.errorPage(w, r, http.StatusBadRequest, "The form could not be read.")
			return
		}
		if r.PostFormValue("confirmed") == "yes" {
			fn(w, r, pc)
			return
		}
		v := confirmView{Question: r.PostFormValue("question"), Button: r.PostFormValue("button"),
			Action: r.URL.Path, Cancel: sameSiteReferer(r)}
		if v.Question == "" {
			v.Question = "Go ahead? This cannot be undone."
		}
		if v.Button == "" {
			v.Button = "Go ahead"
		}
		for name, values := range r.PostForm {
			switch name {
			case csrfField, "confirmed", "question", "button":
				continue
			}
			for _, value := range values {
				v.Fields = append(v.Fields, fieldRow{Name: name, Value: value})
			}
		}
		h.show(w, r, pc.session, pc, http.StatusOK, page{template: "confirm", title: v.Button, view: v})
	}
}

// sameSiteReferer is the page the form was sent from, for Cancel to go
// back to: its path on this site, else the home page.
func sameSiteReferer(r *http.Request) string {
	u, err := url.Parse(r.Referer())
	if err != nil || u.Host != r.Host || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		return "/"
	}
	if u.RawQuery != "" {
		return u.Path + "?" + u.RawQuery
	}
	return u.Path
}
