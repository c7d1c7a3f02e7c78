// Package api serves the read API under /api/v1: authentication, the error
// envelope, lists with cursors and long-poll waits, and replay.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"
	"golang.org/x/sync/semaphore"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/server/openapi"
	"github.com/capturedev/capture/server/replay"
	"github.com/capturedev/capture/store"
)

// Store is what the API needs from the database.
type Store interface {
	Authenticate(ctx context.Context, secret string) (store.Key, store.Project, error)
	// SettingsVersion moves whenever a key, a plan, an inbox or an
	// endpoint changes, by any process sharing the database.
	SettingsVersion(ctx context.Context) (int64, error)
	Usage(ctx context.Context, projectID string) (store.Usage, error)
	Watch(collectionID string) <-chan struct{}
	// AllowRequest and TakeWaitSlot count the per-key rate and the
	// per-project waits across every process serving the database.
	AllowRequest(ctx context.Context, keyID string, perSecond, burst int) (retry time.Duration, ok bool, err error)
	TakeWaitSlot(ctx context.Context, projectID string, slots int, hold time.Duration) (release func(), ok bool, err error)

	Inboxes(ctx context.Context, projectID string, p store.Page) (store.List[store.Inbox], error)
	Inbox(ctx context.Context, projectID, id string) (store.Inbox, error)
	Messages(ctx context.Context, inboxID string, f store.MessageFilter, p store.Page) (store.List[store.MessageSummary], error)
	MessageDetail(ctx context.Context, projectID, id string) (store.MessageDetail, error)
	MessageLinks(ctx context.Context, projectID, id string, f store.LinkFilter) ([]store.Link, bool, error)
	RawPart(ctx context.Context, projectID, id string) (*store.Part, error)
	AttachmentPart(ctx context.Context, projectID, messageID, attachmentID string) (store.Attachment, *store.Part, error)
	DeleteMessage(ctx context.Context, projectID, id string) error
	PurgeInbox(ctx context.Context, projectID, inboxID string) error

	Endpoints(ctx context.Context, projectID string, p store.Page) (store.List[store.Endpoint], error)
	Endpoint(ctx context.Context, projectID, id string) (store.Endpoint, error)
	Requests(ctx context.Context, endpointID string, f store.RequestFilter, p store.Page) (store.List[store.RequestSummary], error)
	Request(ctx context.Context, projectID, id string) (store.Request, error)
	RequestDetail(ctx context.Context, projectID, id string, admit func(size int64) (func(), error)) (store.RequestDetail, error)
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
	// Refused, if set, hears the code of every error answer.
	Refused func(code string)
}

// API is the read API handler.
type API struct {
	store  Store
	cfg    Config
	log    *slog.Logger
	router *httprouter.Router
	replay *replay.Replayer

	mu    sync.Mutex
	waits map[string]int // this process's active waits by project id

	// settings tells held waits that a key may have been revoked.
	settings *settingsBell

	// sliceReads holds what the slice queries running load (sliceBudget).
	sliceReads *semaphore.Weighted
}

// Prefix is where the API is mounted.
const Prefix = contract.Prefix

// New builds the API over st.
func New(st Store, cfg Config) *API {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &API{
		store:      st,
		cfg:        cfg,
		log:        cfg.Logger,
		replay:     replay.New(st, cfg.ReplayClient),
		waits:      make(map[string]int),
		settings:   &settingsBell{version: st.SettingsVersion, every: settingsPoll},
		sliceReads: semaphore.NewWeighted(sliceBudget),
	}
	r := httprouter.New()
	// A route is its exact path: a trailing slash, a doubled slash or
	// another case is no route (404 in the envelope), never an HTML
	// redirect a client would have to follow.
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleMethodNotAllowed = true
	r.HandleOPTIONS = false
	// Every error answer goes through writeError, so that Refused hears
	// each one, the answers of the router's own included.
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		a.writeError(w, contract.NoRoute(req))
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// httprouter lists OPTIONS among the allowed methods, but OPTIONS
		// is not answered here.
		allow := slices.DeleteFunc(strings.Split(w.Header().Get("Allow"), ", "), func(m string) bool { return m == http.MethodOptions })
		a.writeError(w, contract.MethodNotAllowed(req, allow))
	})
	r.PanicHandler = func(w http.ResponseWriter, req *http.Request, v any) {
		if v == http.ErrAbortHandler {
			panic(v) // a response cut short on purpose; net/http closes the connection
		}
		a.log.Error("panic in API handler", "path", req.URL.Path, "panic", v)
		a.writeError(w, errInternal)
	}
	a.router = r

	page := []string{"limit", "before", "after"}
	r.GET(Prefix+"/schema/", a.schema)
	a.handle("GET", "/me", nil, a.me)
	a.handle("GET", "/inboxes", page, a.listInboxes)
	a.handle("GET", "/inboxes/:id/messages", append([]string{"to", "from", "subject", "q", "since", "wait"}, page...), a.listMessages)
	a.handle("DELETE", "/inboxes/:id/messages", nil, a.purgeInbox)
	a.handle("GET", "/messages/:id", nil, a.getMessage)
	a.handle("DELETE", "/messages/:id", nil, a.deleteMessage)
	a.handle("GET", "/messages/:id/links", []string{"match", "kind"}, a.messageLinks)
	a.handle("GET", "/messages/:id/raw", nil, a.messageRaw)
	a.handle("GET", "/messages/:id/attachments/:att", nil, a.messageAttachment)
	a.handle("GET", "/endpoints", page, a.listEndpoints)
	a.handle("GET", "/endpoints/:id/requests", append([]string{"method", "path", "q", "since", "wait"}, page...), a.listRequests)
	a.handle("DELETE", "/endpoints/:id/requests", nil, a.purgeEndpoint)
	a.handle("GET", "/requests/:id", nil, a.getRequest)
	a.handle("DELETE", "/requests/:id", nil, a.deleteRequest)
	a.handle("POST", "/requests/:id/replay", nil, a.replayRequest)
	a.handle("POST", "/requests/:id/deliveries", nil, a.recordDelivery)
	return a
}

// ServeHTTP serves the routes under Prefix. A path with an escaped slash
// in a segment is no route: ids never hold one, and the router, which
// matches the decoded path, would serve it as another route.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if contract.HasEncodedSlash(r) {
		a.writeError(w, contract.NoRoute(r))
		return
	}
	a.router.ServeHTTP(w, r)
}

// caller is the authenticated key and its project.
type caller struct {
	key     store.Key
	project store.Project
	// secret is the key as sent, to check again that it still holds.
	secret string
}

// route is one API route. It runs for an authenticated caller once the
// query holds only the route's parameters, all valid, and answers either by
// writing or by returning an error for API.error to answer.
type route func(w http.ResponseWriter, r *http.Request, p httprouter.Params, c caller, q *query) error

// handle registers h at Prefix+path; params are the query parameters the
// route takes, every other one is refused.
// HEAD is no route of the API (SPEC §8): on a GET path it is answered 405
// method_not_allowed, like any other method the path does not take.
func (a *API) handle(method, path string, params []string, h route) {
	serve := func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		c, err := a.authenticate(r)
		if err == nil {
			q := parseQuery(r, params...)
			if err = q.err(); err == nil {
				err = h(w, r, p, c, q)
			}
		}
		if err != nil {
			a.error(w, r, err)
		}
	}
	a.router.Handle(method, Prefix+path, serve)
}

// authenticate checks the Bearer key (never a cookie), then applies the
// key's rate limit.
func (a *API) authenticate(r *http.Request) (caller, error) {
	secret, ok := contract.BearerToken(r.Header.Get("Authorization"))
	if !ok {
		return caller{}, contract.Errorf(contract.CodeUnauthorized, "missing or malformed Authorization header: want \"Bearer cap_…\"")
	}
	c, err := a.keyOf(r.Context(), secret)
	if err != nil {
		return caller{}, err
	}
	wait, ok, err := a.allow(r.Context(), c.key.ID, c.project.Plan)
	if err != nil {
		return caller{}, err
	}
	if !ok {
		return caller{}, &contract.Error{Code: contract.CodeRateLimited,
			Message:    fmt.Sprintf("too many requests for this key; retry after %d s", wait),
			RetryAfter: time.Duration(wait) * time.Second}
	}
	return c, nil
}

// keyOf finds the active key secret and its project, now: a revoked key is
// unauthorized from the moment its revocation is committed.
func (a *API) keyOf(ctx context.Context, secret string) (caller, error) {
	key, project, err := a.store.Authenticate(ctx, secret)
	if errors.Is(err, store.ErrNotFound) {
		return caller{}, contract.Errorf(contract.CodeUnauthorized, "unknown or revoked API key")
	}
	if err != nil {
		return caller{}, err
	}
	return caller{key: key, project: project, secret: secret}, nil
}

// allow takes one token from the key's bucket, or says how many whole
// seconds to wait for one.
func (a *API) allow(ctx context.Context, keyID string, plan store.Plan) (int, bool, error) {
	delay, ok, err := a.store.AllowRequest(ctx, keyID, plan.RequestsPerSecond, plan.Burst())
	if err != nil || ok {
		return 0, ok, err
	}
	secs := int((delay + time.Second - 1) / time.Second)
	return max(secs, 1), false, nil
}

// holdWait takes one of the project's wait slots for a wait of up to wait,
// and listens for changed settings: settingsChanged is closed at the first
// change after the key was checked once more, here, so that no revocation
// goes unseen. release gives the slot back and stops listening.
func (a *API) holdWait(ctx context.Context, c caller, wait time.Duration) (release func(), settingsChanged <-chan struct{}, err error) {
	// A slot outlives its wait a little, so that one held by a process
	// that dies is free again soon after.
	free, ok, err := a.acquireWait(ctx, c.project, wait+5*time.Second)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, &contract.Error{Code: contract.CodeTooManyWaits,
			Message: "this project already has " + strconv.Itoa(c.project.Plan.ConcurrentWaits) +
				" waits in progress; retry after 1 s", RetryAfter: time.Second}
	}
	settingsChanged, stopListening, err := a.settings.hold(ctx)
	if err != nil {
		free()
		return nil, nil, err
	}
	release = func() {
		stopListening()
		free()
	}
	if _, err := a.keyOf(ctx, c.secret); err != nil {
		release()
		return nil, nil, err
	}
	return release, settingsChanged, nil
}

// acquireWait takes one of the project's concurrent wait slots for up to
// hold; release gives it back.
func (a *API) acquireWait(ctx context.Context, project store.Project, hold time.Duration) (release func(), ok bool, err error) {
	free, ok, err := a.store.TakeWaitSlot(ctx, project.ID, project.Plan.ConcurrentWaits, hold)
	if err != nil || !ok {
		return nil, false, err
	}
	a.mu.Lock()
	a.waits[project.ID]++
	a.mu.Unlock()
	return func() {
		// The slot first: once the count says a wait has ended, a new one
		// finds its slot free.
		free()
		a.mu.Lock()
		if a.waits[project.ID]--; a.waits[project.ID] <= 0 {
			delete(a.waits, project.ID)
		}
		a.mu.Unlock()
	}, true, nil
}

// WaitsByProject returns the waits in progress by project id.
func (a *API) WaitsByProject() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int, len(a.waits))
	for project, n := range a.waits {
		out[project] = n
	}
	return out
}

// schema needs no key; like every route it refuses parameters it does not
// take.
func (a *API) schema(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if err := parseQuery(r).err(); err != nil {
		a.error(w, r, err)
		return
	}
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
