// Package web serves capture's web interface at / on the HTTP listener:
// sign-in, the administration pages and a live capture browser. Pages are
// rendered on the server from embedded templates; one small script adds
// live updates, copy buttons and keyboard shortcuts, and every page works
// without it.
package web

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/server/replay"
	"github.com/capturedev/capture/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Store is what the web interface needs from the database: the same calls
// the administration commands and the read API make.
type Store interface {
	HasPassword(ctx context.Context) (bool, error)
	CheckPassword(ctx context.Context, password string) error
	UseLoginToken(ctx context.Context, token string) error
	CreateSession(ctx context.Context) (store.Session, error)
	CheckSession(ctx context.Context, token string) (store.Session, error)
	EndSession(ctx context.Context, token string) error
	// Secret signs the addresses of messages' inline parts.
	Secret(ctx context.Context, name string) ([]byte, error)

	Projects(ctx context.Context) ([]store.Project, error)
	Project(ctx context.Context, idOrName string) (store.Project, error)
	CreateProject(ctx context.Context, name, plan string) (store.Project, error)
	SetPlan(ctx context.Context, idOrName, plan string) (store.Project, error)
	Usage(ctx context.Context, projectID string) (store.Usage, error)

	Keys(ctx context.Context, projectID string) ([]store.Key, error)
	CreateKey(ctx context.Context, projectID string) (store.Key, string, error)
	RevokeKey(ctx context.Context, keyID string) (store.Key, error)

	Inboxes(ctx context.Context, projectID string, p store.Page) (store.List[store.Inbox], error)
	Inbox(ctx context.Context, projectID, id string) (store.Inbox, error)
	CreateInbox(ctx context.Context, projectID, name string) (store.Inbox, error)
	RotateInboxPassword(ctx context.Context, id string) (store.Inbox, error)

	Endpoints(ctx context.Context, projectID string, p store.Page) (store.List[store.Endpoint], error)
	Endpoint(ctx context.Context, projectID, id string) (store.Endpoint, error)
	CreateEndpoint(ctx context.Context, projectID, name string, target *string) (store.Endpoint, error)
	UpdateEndpoint(ctx context.Context, id string, u store.EndpointUpdate) (store.Endpoint, error)

	Watch(collectionID string) <-chan struct{}
	Messages(ctx context.Context, inboxID string, f store.MessageFilter, p store.Page) (store.List[store.MessageSummary], error)
	Message(ctx context.Context, projectID, id string) (store.Message, error)
	MessageRaw(ctx context.Context, projectID, id string) ([]byte, error)
	AttachmentData(ctx context.Context, projectID, messageID, attachmentID string) (store.Attachment, []byte, error)
	DeleteMessage(ctx context.Context, projectID, id string) error
	PurgeInbox(ctx context.Context, projectID, inboxID string) error

	Requests(ctx context.Context, endpointID string, f store.RequestFilter, p store.Page) (store.List[store.RequestSummary], error)
	Request(ctx context.Context, projectID, id string) (store.Request, error)
	DeleteRequest(ctx context.Context, projectID, id string) error
	PurgeEndpoint(ctx context.Context, projectID, endpointID string) error
	// The Replay form replays through the read API's own replay.
	replay.Store
}

var _ Store = (*store.Store)(nil)

// Config holds the live addresses the pages show, the same ones the read
// API reports.
type Config struct {
	SMTPHost      string
	StartTLSPorts []int
	TLSPorts      []int
	// CaptureBase is the public base URL of capture URLs, without a
	// trailing slash.
	CaptureBase string
	Logger      *slog.Logger
}

// Handler serves the web interface.
type Handler struct {
	store    Store
	cfg      Config
	log      *slog.Logger
	handler  http.Handler
	pages    map[string]*template.Template
	throttle *throttle
	replay   *replay.Replayer
	streams  *openStreams
	// assets maps a static file's name to its name with a content hash,
	// so that pages can let browsers cache assets for good.
	assets map[string]string
	static map[string][]byte
	// inlineKey signs the addresses of messages' inline parts (see
	// inlineSigningKey).
	inlineKey inlineKey
}

// New builds the web interface over st. Its templates and assets are
// embedded, so a broken one fails every test and panics here.
func New(st Store, cfg Config) *Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Handler{store: st, cfg: cfg, log: cfg.Logger, throttle: newThrottle(), replay: replay.New(st, nil),
		streams: newOpenStreams()}
	if err := h.loadStatic(); err != nil {
		panic(err)
	}
	if err := h.loadTemplates(); err != nil {
		panic(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /static/{name}", h.serveStatic)
	mux.HandleFunc("GET /login", h.loginPage)
	mux.HandleFunc("POST /login", h.login)
	mux.Handle("POST /logout", h.auth(h.logout))
	mux.Handle("GET /{$}", h.auth(h.home))

	mux.Handle("GET /projects", h.auth(h.projectsPage))
	mux.Handle("POST /projects", h.auth(h.createProject))
	mux.Handle("POST /projects/{pid}/plan", h.inProject(h.setPlan))

	mux.Handle("GET /projects/{pid}/keys", h.inProject(h.keysPage))
	mux.Handle("POST /projects/{pid}/keys", h.inProject(h.createKey))
	mux.Handle("POST /projects/{pid}/keys/{kid}/revoke", h.inProject(h.confirmFirst(h.revokeKey)))

	mux.Handle("GET /projects/{pid}/inboxes", h.inProject(h.inboxesPage))
	mux.Handle("POST /projects/{pid}/inboxes", h.inProject(h.createInbox))
	mux.Handle("GET /projects/{pid}/inboxes/{iid}/password", h.inProject(h.inboxPassword))
	mux.Handle("POST /projects/{pid}/inboxes/{iid}/rotate", h.inProject(h.confirmFirst(h.rotatePassword)))

	mux.Handle("GET /projects/{pid}/endpoints", h.inProject(h.endpointsPage))
	mux.Handle("POST /projects/{pid}/endpoints", h.inProject(h.createEndpoint))
	mux.Handle("GET /projects/{pid}/endpoints/{eid}/settings", h.inProject(h.endpointSettingsPage))
	mux.Handle("POST /projects/{pid}/endpoints/{eid}/settings", h.inProject(h.saveEndpoint))

	mux.Handle("GET /projects/{pid}/inboxes/{iid}", h.inProject(h.messagesPage))
	mux.Handle("GET /projects/{pid}/inboxes/{iid}/events", h.inProject(h.messageEvents))
	mux.Handle("POST /projects/{pid}/inboxes/{iid}/purge", h.inProject(h.confirmFirst(h.purgeInbox)))
	mux.Handle("GET /projects/{pid}/messages/{mid}", h.inProject(h.messagePage))
	mux.Handle("GET /projects/{pid}/messages/{mid}/html", h.inProject(h.messageHTML))
	// Asked for by a message's sandboxed frame, which sends no session
	// cookie: the address's signature is its permission.
	mux.HandleFunc("GET /projects/{pid}/messages/{mid}/inline/{aid}", h.messageInlinePart)
	mux.Handle("GET /projects/{pid}/messages/{mid}/raw", h.inProject(h.messageRaw))
	mux.Handle("GET /projects/{pid}/messages/{mid}/attachments/{aid}", h.inProject(h.messageAttachment))
	mux.Handle("POST /projects/{pid}/messages/{mid}/delete", h.inProject(h.confirmFirst(h.deleteMessage)))

	mux.Handle("GET /projects/{pid}/endpoints/{eid}", h.inProject(h.requestsPage))
	mux.Handle("GET /projects/{pid}/endpoints/{eid}/events", h.inProject(h.requestEvents))
	mux.Handle("POST /projects/{pid}/endpoints/{eid}/purge", h.inProject(h.confirmFirst(h.purgeEndpoint)))
	mux.Handle("GET /projects/{pid}/requests/{rid}", h.inProject(h.requestPage))
	mux.Handle("GET /projects/{pid}/requests/{rid}/body", h.inProject(h.requestBody))
	mux.Handle("POST /projects/{pid}/requests/{rid}/delete", h.inProject(h.confirmFirst(h.deleteRequest)))
	mux.Handle("POST /projects/{pid}/requests/{rid}/replay", h.inProject(h.replayRequest))

	routes := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			h.noRoute(w, r, allowedMethods(mux, r))
			return
		}
		mux.ServeHTTP(w, r)
	})

	// Browsers say where a state-changing request came from; one from
	// another site is refused before it reaches the token check.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refusedProgram(w, r, "Origin", "another site's: changes are taken only from this site's pages") {
			return
		}
		h.errorPage(w, r, http.StatusForbidden, "This form was sent from another site and was refused.")
	}))
	h.handler = securityHeaders(cop.Handler(routes))
	return h
}

// ServeHTTP serves the web interface.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.handler.ServeHTTP(w, r) }

// noRoute answers a request for no page: 404, or 405 with Allow when the
// path is a page that takes other methods (allow). People get a page to
// read; anything that does not ask for HTML gets the read API's error
// envelope, as every error on the listener is (SPEC §8).
func (h *Handler) noRoute(w http.ResponseWriter, r *http.Request, allow []string) {
	if !acceptsHTML(r) {
		if len(allow) > 0 {
			contract.WriteError(w, contract.MethodNotAllowed(r, allow))
		} else {
			contract.WriteError(w, contract.NoRoute(r))
		}
		return
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		h.errorPage(w, r, http.StatusMethodNotAllowed, "This page does not take "+r.Method+" requests.")
		return
	}
	h.errorPage(w, r, http.StatusNotFound, "There is no page at this address.")
}

// apiError is the read API's error for an error page's status and
// message, which a program gets instead of the page. A status SPEC §8's
// table lacks takes the code of its kind: a refused form (409, 413) is
// invalid_parameter, a fault internal.
func apiError(status int, msg string) *contract.Error {
	code := contract.CodeInvalidParameter
	switch {
	case status == http.StatusUnauthorized:
		code = contract.CodeUnauthorized
	case status == http.StatusForbidden:
		// userMessage's only 403: a plan's quota. A refused CSRF token
		// or origin is answered by refusedProgram.
		code = contract.CodeQuotaExceeded
	case status == http.StatusNotFound:
		code = contract.CodeNotFound
	case status == http.StatusTooManyRequests:
		code = contract.CodeRateLimited
	case status == http.StatusServiceUnavailable:
		code = contract.CodeUnavailable
	case status >= 500:
		code = contract.CodeInternal
	}
	return &contract.Error{Code: code, Message: msg}
}

// refusedProgram answers a program's state-changing request that failed a
// check of where it came from (field: its CSRF token, its Origin), and
// reports whether it did; a browser's is left to the caller's page. The
// status stays 403, as for a browser, the one every CSRF refusal has; SPEC
// §8's table has no code for it (its 403 is quota_exceeded), so the code
// is the one for a bad parameter, and fields names it.
func refusedProgram(w http.ResponseWriter, r *http.Request, field, why string) bool {
	if acceptsHTML(r) {
		return false
	}
	e := contract.Invalid(map[string]string{field: why})
	e.Status = http.StatusForbidden
	contract.WriteError(w, e)
	return true
}

// allowedMethods lists, in order, the methods the routes of mux take at
// r's path; none when the path is no page at all.
func allowedMethods(mux *http.ServeMux, r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodDelete, http.MethodGet, http.MethodHead, http.MethodOptions,
		http.MethodPatch, http.MethodPost, http.MethodPut} {
		other := *r
		other.Method = m
		if _, pattern := mux.Handler(&other); pattern != "" {
			allow = append(allow, m)
		}
	}
	return allow
}

// acceptsHTML reports whether the request's Accept header takes
// text/html, as a browser's navigation does. No Accept header at all is
// a program's request.
func acceptsHTML(r *http.Request) bool {
	for _, accept := range r.Header.Values("Accept") {
		for _, item := range strings.Split(accept, ",") {
			mediaType, params, err := mime.ParseMediaType(strings.TrimSpace(item))
			if err != nil || mediaType != "text/html" {
				continue
			}
			if q, err := strconv.ParseFloat(params["q"], 64); err == nil && q == 0 {
				continue
			}
			return true
		}
	}
	return false
}

// pageCSP is the policy of every page of the interface: its own script and
// styles only, no inline script, no plugins, no framing by other sites.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", pageCSP)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		hd.Set("Cross-Origin-Resource-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

func (h *Handler) loadStatic() error {
	h.assets = map[string]string{}
	h.static = map[string][]byte{}
	return fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := staticFS.ReadFile(p)
		if err != nil {
			return err
		}
		name := path.Base(p)
		sum := sha256.Sum256(b)
		ext := path.Ext(name)
		hashed := strings.TrimSuffix(name, ext) + "." + hex.EncodeToString(sum[:6]) + ext
		h.assets[name] = "/static/" + hashed
		h.static[hashed] = b
		return nil
	})
}

var staticTypes = map[string]string{
	".css": "text/css; charset=utf-8",
	".js":  "text/javascript; charset=utf-8",
	".svg": "image/svg+xml",
}

func (h *Handler) serveStatic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	b, ok := h.static[name]
	if !ok {
		h.noRoute(w, r, nil)
		return
	}
	w.Header().Set("Content-Type", staticTypes[path.Ext(name)])
	// The name carries the content's hash, so it never changes.
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	w.Write(b)
}

func (h *Handler) loadTemplates() error {
	funcs := template.FuncMap{
		"asset":        func(name string) string { return h.assets[name] },
		"liveRowsKept": func() int { return liveRowsKept },
	}
	base, err := template.New("layout").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/_*.html")
	if err != nil {
		return fmt.Errorf("web templates: %w", err)
	}
	pages, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return err
	}
	h.pages = map[string]*template.Template{}
	for _, p := range pages {
		name := strings.TrimSuffix(path.Base(p), ".html")
		if name == "layout" || strings.HasPrefix(name, "_") {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(templateFS, p)
		if err != nil {
			return fmt.Errorf("web template %s: %w", name, err)
		}
		h.pages[name] = t
	}
	return nil
}

// userMessage turns a store error into a sentence for the page, and the
// status that goes with it. Quota errors keep their code's name.
func userMessage(err error) (int, string) {
	msg := err.Error()
	switch {
	case errors.Is(err, store.ErrQuotaExceeded):
		return http.StatusForbidden, msg
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, capitalize(strings.TrimPrefix(msg, store.ErrNotFound.Error()+": "))
	case errors.Is(err, store.ErrExists):
		return http.StatusConflict, capitalize(strings.TrimPrefix(msg, store.ErrExists.Error()+": ") + " already exists")
	case errors.Is(err, store.ErrInvalid):
		return http.StatusBadRequest, capitalize(strings.TrimPrefix(msg, store.ErrInvalid.Error()+": "))
	case errors.Is(err, store.ErrDiskFull):
		return http.StatusServiceUnavailable, "The disk capture stores its data on is full: nothing was changed. Free some space and try again."
	case store.IsUnavailable(err):
		return http.StatusServiceUnavailable, capitalize(store.Why(err)) + " Nothing was changed; try again in a moment."
	}
	return http.StatusInternalServerError, ""
}

// capitalize makes a store message a sentence: a capital first, a full
// stop last.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// formFailed answers a form post the store refused: bad input shows the
// form again, through show, with the store's message; anything else is an
// error page.
func (h *Handler) formFailed(w http.ResponseWriter, r *http.Request, err error, show func(status int, msg string)) {
	status, msg := userMessage(err)
	if status == http.StatusInternalServerError || status == http.StatusNotFound {
		h.fail(w, r, err)
		return
	}
	show(status, msg)
}

// fail shows an error page for err: the store's words for bad input and
// missing things, "Internal error" (and a log line) for anything else.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return
	}
	status, msg := userMessage(err)
	switch status {
	case http.StatusInternalServerError:
		h.log.Error("web request failed", "path", r.URL.Path, "err", err)
		msg = "Internal error. The server log says more."
	case http.StatusServiceUnavailable:
		h.log.Warn("web request refused: the database is unavailable", "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "1")
	}
	h.errorPage(w, r, status, msg)
}

// LoginURL is the one-time sign-in link for a token, on the web interface at
// base (scheme://host:port).
func LoginURL(base, token string) string { return base + "/login?token=" + token }
