// Package api serves the read API under /api/v1: authentication, the error
// envelope, lists with cursors and long-poll waits, and replay.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"
	"golang.org/x/time/rate"

	"github.com/capturedev/capture/server/openapi"
	"github.com/capturedev/capture/store"
)

// Store is what the API needs from the database.
type Store interface {
	Authenticate(ctx context.Context, secret string) (store.Key, store.Project, error)
	Usage(ctx context.Context, projectID string) (store.Usage, error)
	Watch(collectionID string) <-chan struct{}

	Inboxes(ctx context.Context, projectID string, p store.Page) (store.List[store.Inbox], error)
	Inbox(ctx context.Context, projectID, id string) (store.Inbox, error)
	Messages(ctx context.Context, inboxID string, f store.MessageFilter, p store.Page) (store.List[store.MessageSummary], error)
	Message(ctx context.Context, projectID, id string) (store.Message, error)
	MessageLinks(ctx context.Context, projectID, id string, f store.LinkFilter) ([]store.Link, error)
	MessageRaw(ctx context.Context, projectID, id string) ([]byte, error)
	AttachmentData(ctx context.Context, projectID, messageID, attachmentID string) (store.Attachment, []byte, error)
	DeleteMessage(ctx context.Context, projectID, id string) error
	PurgeInbox(ctx context.Context, projectID, inboxID string) error

	Endpoints(ctx context.Context, projectID string, p store.Page) (store.List[store.Endpoint], error)
	Endpoint(ctx context.Context, projectID, id string) (store.Endpoint, error)
	Requests(ctx context.Context, endpointID string, f store.RequestFilter, p store.Page) (store.List[store.RequestSummary], error)
	Request(ctx context.Context, projectID, id string) (store.Request, error)
	AddDelivery(ctx context.Context, projectID, requestID string, d store.NewDelivery) (store.Delivery, error)
	DeleteRequest(ctx context.Context, projectID, id string) error
	PurgeEndpoint(ctx context.Context, projectID, endpointID string) error
}

var _ Store = (*store.Store)(nil)

// Config holds what the API reports about the other listeners.
type Config struct {
	SMTPHost      string
	StartTLSPorts []int
	TLSPorts      []int
	// CaptureBase is the public base URL of the capture listener, without a
	// trailing slash; an endpoint's capture URL is CaptureBase + "/" + id.
	CaptureBase string
	Logger      *slog.Logger
	// ReplayClient sends replays; nil means a client with the 10 s timeout.
	ReplayClient *http.Client
}

// API is the read API handler.
type API struct {
	store  Store
	cfg    Config
	log    *slog.Logger
	router *httprouter.Router
	replay *http.Client

	mu       sync.Mutex
	limiters map[string]*rate.Limiter // by key id
	waits    map[string]int           // active waits by project id
}

// Prefix is where the API is mounted.
const Prefix = "/api/v1"

// New builds the API over st.
func New(st Store, cfg Config) *API {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &API{
		store:    st,
		cfg:      cfg,
		log:      cfg.Logger,
		replay:   cfg.ReplayClient,
		limiters: make(map[string]*rate.Limiter),
		waits:    make(map[string]int),
	}
	if a.replay == nil {
		a.replay = newReplayClient()
	}
	r := httprouter.New()
	r.HandleMethodNotAllowed = true
	r.HandleOPTIONS = false
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, &Error{Status: http.StatusNotFound, Code: "not_found", Message: "no such route"})
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
			Message: "method " + req.Method + " is not allowed here"})
	})
	r.PanicHandler = func(w http.ResponseWriter, req *http.Request, v any) {
		a.log.Error("panic in API handler", "path", req.URL.Path, "panic", v)
		writeError(w, errInternal)
	}

	r.GET(Prefix+"/schema/", a.schema)
	r.GET(Prefix+"/me", a.auth(a.me))
	r.GET(Prefix+"/inboxes", a.auth(a.listInboxes))
	r.GET(Prefix+"/inboxes/:id/messages", a.auth(a.listMessages))
	r.DELETE(Prefix+"/inboxes/:id/messages", a.auth(a.purgeInbox))
	r.GET(Prefix+"/messages/:id", a.auth(a.getMessage))
	r.DELETE(Prefix+"/messages/:id", a.auth(a.deleteMessage))
	r.GET(Prefix+"/messages/:id/links", a.auth(a.messageLinks))
	r.GET(Prefix+"/messages/:id/raw", a.auth(a.messageRaw))
	r.GET(Prefix+"/messages/:id/attachments/:att", a.auth(a.messageAttachment))
	r.GET(Prefix+"/endpoints", a.auth(a.listEndpoints))
	r.GET(Prefix+"/endpoints/:id/requests", a.auth(a.listRequests))
	r.DELETE(Prefix+"/endpoints/:id/requests", a.auth(a.purgeEndpoint))
	r.GET(Prefix+"/requests/:id", a.auth(a.getRequest))
	r.DELETE(Prefix+"/requests/:id", a.auth(a.deleteRequest))
	r.POST(Prefix+"/requests/:id/replay", a.auth(a.replayRequest))
	r.POST(Prefix+"/requests/:id/deliveries", a.auth(a.recordDelivery))
	a.router = r
	return a
}

// ServeHTTP serves the routes under Prefix.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.router.ServeHTTP(w, r) }

// caller is the authenticated key and its project.
type caller struct {
	key     store.Key
	project store.Project
}

type handler func(w http.ResponseWriter, r *http.Request, p httprouter.Params, c caller)

// auth authenticates the Bearer key (never a cookie), then applies the
// key's rate limit.
func (a *API) auth(h handler) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		secret, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			writeError(w, errUnauthorized("missing or malformed Authorization header: want \"Bearer cap_…\""))
			return
		}
		key, project, err := a.store.Authenticate(r.Context(), secret)
		if errors.Is(err, store.ErrNotFound) {
			writeError(w, errUnauthorized("unknown or revoked API key"))
			return
		}
		if err != nil {
			a.fail(w, r, err)
			return
		}
		if wait, ok := a.allow(key.ID, project.Plan); !ok {
			writeError(w, &Error{Status: http.StatusTooManyRequests, Code: "rate_limited",
				Message:    "too many requests for this key; retry after " + strconv.Itoa(wait) + " s",
				RetryAfter: wait})
			return
		}
		h(w, r, p, caller{key: key, project: project})
	}
}

func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// allow takes one token from the key's bucket, or says how many whole
// seconds to wait for one.
func (a *API) allow(keyID string, plan store.Plan) (int, bool) {
	a.mu.Lock()
	lim, ok := a.limiters[keyID]
	if !ok || lim.Limit() != rate.Limit(plan.RequestsPerSecond) {
		lim = rate.NewLimiter(rate.Limit(plan.RequestsPerSecond), plan.Burst())
		a.limiters[keyID] = lim
	}
	a.mu.Unlock()
	now := time.Now()
	res := lim.ReserveN(now, 1)
	delay := res.DelayFrom(now)
	if delay == 0 {
		return 0, true
	}
	res.CancelAt(now)
	secs := int((delay + time.Second - 1) / time.Second)
	return max(secs, 1), false
}

// acquireWait takes one of the project's concurrent wait slots.
func (a *API) acquireWait(project store.Project) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.waits[project.ID] >= project.Plan.ConcurrentWaits {
		return false
	}
	a.waits[project.ID]++
	return true
}

// ActiveWaits is how many list calls of the project are holding for new
// captures right now.
func (a *API) ActiveWaits(projectID string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.waits[projectID]
}

func (a *API) releaseWait(projectID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.waits[projectID]--
	if a.waits[projectID] <= 0 {
		delete(a.waits, projectID)
	}
}

func (a *API) schema(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openapi.Document)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
