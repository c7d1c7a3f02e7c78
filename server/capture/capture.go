// Package capture is the webhook capture listener: every request to
// /whe_<id>[/path][?query] is stored exactly as it arrived and answered only
// once it is committed.
package capture

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/capturedev/capture/server/admission"
	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/server/bodyread"
	"github.com/capturedev/capture/server/outage"
	"github.com/capturedev/capture/store"
)

// Store is what the capture listener needs from the database.
//
// InsertRequest must not keep r.Body once it returns: the handler reuses
// the buffer for the next request.
type Store interface {
	Endpoint(ctx context.Context, projectID, id string) (store.Endpoint, error)
	Project(ctx context.Context, idOrName string) (store.Project, error)
	InsertRequest(ctx context.Context, r *store.NewRequest) (string, error)
	// SettingsVersion and SettingsSeen change whenever an endpoint or
	// plan does, in this process or another: the endpoint cache is good
	// while they stay. SettingsVersion reads it now; SettingsSeen is free
	// and, once InsertRequest has returned, counts every change made
	// before the request arrived.
	SettingsVersion(ctx context.Context) (int64, error)
	SettingsSeen() int64
}

var _ Store = (*store.Store)(nil)

type Config struct {
	Logger *slog.Logger
	// Budget bounds the request bodies held at once, together with what
	// else shares it (SMTP ingest). Nil means no bound.
	Budget *admission.Budget
	// AdmissionWait bounds how long a request waits for room in Budget
	// before it is refused with a 503. Default 20s: webhook senders
	// commonly give up after 30.
	AdmissionWait time.Duration
	// Refused, if set, hears the error code of every refused capture.
	Refused func(code string)
	// Stopping, closed when the server begins to stop, ends the endpoint's
	// response delays: their captures are committed, and a stop finishes
	// requests in flight without waiting them out. Nil: never.
	Stopping <-chan struct{}
}

// Handler captures webhook requests. It parses the raw request target
// itself: a ServeMux would clean "..", collapse slashes and redirect, and
// the path must be stored as the sender wrote it.
type Handler struct {
	store         Store
	log           *slog.Logger
	budget        *admission.Budget
	admissionWait time.Duration
	cache         endpointCache
	refused       func(code string)
	stopping      <-chan struct{}
	// outage logs the refusals of a database that cannot take captures
	// once for as long as that lasts.
	outage *outage.Log
}

// New returns the capture handler over st.
func New(st Store, cfg Config) *Handler {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	wait := cfg.AdmissionWait
	if wait <= 0 {
		wait = 20 * time.Second
	}
	return &Handler{store: st, log: log, budget: cfg.Budget, admissionWait: wait, refused: cfg.Refused,
		stopping: cfg.Stopping, outage: webhookOutage(log)}
}

func webhookOutage(log *slog.Logger) *outage.Log {
	return outage.New(log, "capture: webhooks refused", "capture: webhooks taken again", "refused")
}

// NewServer returns the server the capture handler runs in. The timeouts
// bound what a slow or stalled client can hold: headers must arrive within
// 10 s and the whole request within 60 s; the write timeout leaves room for
// a custom response delay of up to 10 s on top.
func NewServer(h http.Handler) *http.Server {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      70 * time.Second,
		IdleTimeout:       120 * time.Second,
		// net/http allows 4 KiB beyond this before it answers 431.
		MaxHeaderBytes: 64 << 10,
		// "OPTIONS *" would otherwise get net/http's own empty 200 instead
		// of the 404 every target outside /whe_<id> gets.
		DisableGeneralOptionsHandler: true,
	}
	if ch, ok := h.(*Handler); ok {
		srv.ErrorLog = slog.NewLogLogger(ch.log.Handler(), slog.LevelWarn)
	}
	return srv
}

const endpointPrefix = "/whe_"

// storeWeight is how many times its size a body holds while it is stored:
// the body, its pack (as large when the bytes do not compress), and
// SQLite's own copy of the bound value as it builds the row. Two 25 MiB
// bodies of random bytes stored at once took peak RSS to 272 MiB; weighed
// so, one stores at a time.
const storeWeight = 3

var (
	jsonContentType = []string{"application/json"}
	closeConnection = []string{"close"}
)

// ServeHTTP answers only once InsertRequest has returned: an acknowledged
// capture must survive a crash of the process right after (SPEC §13).
//
// Every path ends in an answer written here: a handler that returned without
// one would let net/http send an empty 200, which a sender takes for a
// stored capture.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	id, path, query, ok := splitTarget(r.RequestURI)
	if !ok {
		h.writeError(w, &contract.Error{Code: contract.CodeNotFound, Message: "not a capture URL: expected /whe_<endpoint id>[/path]"})
		return
	}
	ep, err := h.cache.lookup(r.Context(), h.store, id)
	if err == nil && (r.ContentLength > smallestBodyLimit || r.ContentLength < 0) {
		// Whether such a body fits depends on the plan, which may have
		// changed a moment ago: ask the database.
		ep, err = h.cache.fresh(r.Context(), h.store, id)
	}
	if errors.Is(err, store.ErrNotFound) {
		h.writeError(w, &contract.Error{Code: contract.CodeNotFound, Message: "no endpoint " + strconv.Quote(id)})
		return
	}
	if err != nil {
		h.fail(w, r, "look up endpoint", id, err)
		return
	}

	// The body is held in memory until its commit, and reserves room in
	// the ingest budget before it is read: its first piece at once, the
	// rest once that piece has come (bodyread.Read), so that senders who
	// declare a large body and send nothing hold little. One declared
	// over the limit is refused at once, before any wait for room.
	admitCtx, cancel := admission.Within(r.Context(), h.admissionWait)
	defer cancel()
	body, reservation, buf, err := bodyread.Read(admitCtx, w, r, h.budget, ep.bodyLimit, storeWeight)
	defer reservation.Release()
	if buf != nil {
		defer bodyread.Put(buf)
	}
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.tooLarge(w, r, ep.bodyLimit)
			return
		}
		// Cut off (which also ends the request's context): told why.
		if errors.Is(err, bodyread.ErrTooSlow) {
			w.Header()["Connection"] = closeConnection
			h.writeError(w, &contract.Error{Code: contract.CodeInvalidParameter, Message: "request body arrived too slowly",
				Fields: map[string]string{"body": err.Error()}})
			return
		}
		if errors.Is(err, admission.ErrBusy) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			// No room for it, or abandoned while it waited for room: the
			// unread body is not worth draining.
			w.Header()["Connection"] = closeConnection
			h.fail(w, r, "admit body", id, err)
			return
		}
		// The client stopped sending or went away mid-body (which also
		// ends the request's context, though the server is not stopping):
		// nothing is stored, and most likely nobody reads this.
		h.log.Debug("capture: incomplete body", "endpoint", id, "remote", r.RemoteAddr, "err", err)
		h.writeError(w, &contract.Error{Code: contract.CodeInvalidParameter, Message: "incomplete request body",
			Fields: map[string]string{"body": "ended before its declared length"}})
		return
	}

	reqID, err := h.store.InsertRequest(r.Context(), &store.NewRequest{
		EndpointID:  id,
		ReceivedAt:  now,
		Method:      r.Method,
		Path:        path,
		Query:       query,
		ContentType: r.Header.Get("Content-Type"),
		RemoteAddr:  r.RemoteAddr,
		Headers:     requestHeaders(r),
		Body:        body,
	})
	if err != nil {
		// A database that could not take the write cannot say whether the
		// endpoint is gone either, and asking would wait out its lock
		// again: the sender is told to try again at once.
		if store.IsUnavailable(err) || errors.Is(err, admission.ErrBusy) {
			h.fail(w, r, "store request", id, err)
			return
		}
		if _, ferr := h.cache.fresh(r.Context(), h.store, id); errors.Is(ferr, store.ErrNotFound) {
			// Deleted while its settings were cached.
			h.writeError(w, &contract.Error{Code: contract.CodeNotFound, Message: "no endpoint " + strconv.Quote(id)})
			return
		}
		h.fail(w, r, "store request", id, err)
		return
	}
	h.outage.Taken()
	// The answer follows the settings in force when the request arrived,
	// even those changed by another process a moment before.
	if settled, err := h.cache.settled(r.Context(), h.store, id, ep); err == nil {
		ep = settled
	}
	if ep.custom == nil {
		writeID(w, reqID)
		return
	}
	h.writeCustom(w, r, ep.custom, reqID)
}

// smallestBodyLimit is the request body every plan accepts: whether a
// larger one fits depends on the endpoint's plan.
var smallestBodyLimit = func() int64 {
	smallest := int64(math.MaxInt64)
	for _, name := range store.PlanNames() {
		if p, err := store.LookupPlan(name); err == nil {
			smallest = min(smallest, p.RequestBodyBytes)
		}
	}
	return smallest
}()

// splitTarget takes the endpoint id, the path after it ("/" when empty) and
// the raw query from a request target as it came off the wire.
func splitTarget(uri string) (id, path, query string, ok bool) {
	if !strings.HasPrefix(uri, "/") {
		// Absolute form ("http://host/whe_…"), as proxies send it.
		_, rest, found := strings.Cut(uri, "://")
		if !found {
			return "", "", "", false
		}
		// The authority ends at the first of these; only a path may follow.
		i := strings.IndexAny(rest, "/?#")
		if i < 0 || rest[i] != '/' {
			return "", "", "", false
		}
		uri = rest[i:]
	}
	uri, query, _ = strings.Cut(uri, "?")
	if !strings.HasPrefix(uri, endpointPrefix) {
		return "", "", "", false
	}
	end := len(uri)
	if i := strings.IndexByte(uri[1:], '/'); i >= 0 {
		end = i + 1
	}
	id, path = uri[1:end], uri[end:]
	if !validID(id) {
		return "", "", "", false
	}
	if path == "" {
		path = "/"
	}
	return id, path, query, true
}

// validID keeps the database out of it when a target cannot be an id.
func validID(id string) bool {
	suffix := strings.TrimPrefix(id, "whe_")
	if suffix == "" || len(suffix) > 64 {
		return false
	}
	for i := 0; i < len(suffix); i++ {
		c := suffix[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// requestHeaders returns the headers in a stable order. net/http moves two
// received headers out of the map: Host into r.Host and Transfer-Encoding
// into r.TransferEncoding; both are put back.
func requestHeaders(r *http.Request) []store.Header {
	hs := make([]store.Header, 0, len(r.Header)+2)
	if r.Host != "" {
		hs = append(hs, store.Header{Name: "Host", Values: []string{r.Host}})
	}
	if len(r.TransferEncoding) > 0 {
		hs = append(hs, store.Header{Name: "Transfer-Encoding", Values: []string{strings.Join(r.TransferEncoding, ", ")}})
	}
	for name, values := range r.Header {
		if name == "Cookie" {
			if values = withoutWebCookies(values); len(values) == 0 {
				continue
			}
		}
		hs = append(hs, store.Header{Name: name, Values: values})
	}
	slices.SortFunc(hs, func(a, b store.Header) int { return strings.Compare(a.Name, b.Name) })
	return hs
}

// withoutWebCookies drops the web interface's sign-in cookies from Cookie
// header values (contract.IsWebCookie says why); a value without them is
// kept byte for byte, and one left empty goes.
func withoutWebCookies(values []string) []string {
	var kept []string
	for i, v := range values {
		if !strings.Contains(v, "capture_") {
			if kept != nil {
				kept = append(kept, v)
			}
			continue
		}
		if kept == nil {
			kept = append(make([]string, 0, len(values)), values[:i]...)
		}
		var pairs []string
		dropped := false
		for pair := range strings.SplitSeq(v, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(pair), "=")
			if contract.IsWebCookie(name) {
				dropped = true
			} else {
				pairs = append(pairs, strings.TrimSpace(pair))
			}
		}
		if dropped {
			v = strings.Join(pairs, "; ")
		}
		if v != "" {
			kept = append(kept, v)
		}
	}
	if kept == nil {
		return values
	}
	return kept
}

// writeID sends the default answer, {"id":"req_…"}. Ids are base62, so the
// JSON needs no escaping.
func writeID(w http.ResponseWriter, id string) { writeIDStatus(w, id, http.StatusOK) }

// writeIDStatus is writeID with another status.
func writeIDStatus(w http.ResponseWriter, id string, status int) {
	b := make([]byte, 0, len(id)+9)
	b = append(b, `{"id":"`...)
	b = append(b, id...)
	b = append(b, `"}`...)
	hdr := w.Header()
	hdr["Content-Type"] = jsonContentType
	hdr["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	w.Write(b)
}

// writeCustom sends the endpoint's own response after its delay. The
// capture is committed already, so a client that leaves during the delay
// loses only the answer, and once the server begins to stop the answer
// goes at once rather than after the delay.
func (h *Handler) writeCustom(w http.ResponseWriter, r *http.Request, resp *store.Response, reqID string) {
	if resp.Delay > 0 {
		// The store refuses longer delays; the bound also keeps the
		// answer inside the server's write timeout.
		t := time.NewTimer(min(resp.Delay, store.MaxResponseDelay))
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		case <-h.stopping:
			t.Stop()
		}
	}
	hdr := w.Header()
	for name, value := range resp.Headers {
		// net/http frames the body itself; a stored length that disagrees
		// with the body would break the connection.
		if strings.EqualFold(name, "Content-Length") || strings.EqualFold(name, "Transfer-Encoding") {
			continue
		}
		hdr.Set(name, value)
	}
	_, typed := hdr["Content-Type"]
	if resp.Body == "" && !typed && bodyAllowed(resp.Status) {
		// A response that sets no body of its own answers with the
		// default one, naming the capture: a delay, a status or a header
		// alone changes only itself.
		writeIDStatus(w, reqID, resp.Status)
		return
	}
	if !typed {
		// Send exactly the headers configured: no sniffed Content-Type.
		hdr["Content-Type"] = nil
	}
	w.WriteHeader(resp.Status)
	io.WriteString(w, resp.Body)
}

// bodyAllowed reports whether HTTP lets an answer of status carry a body.
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// retryAfter is what a refused sender is asked to wait before trying again.
const retryAfter = 5 * time.Second

// fail answers a capture that was not stored. What may pass (the server
// stopping, the database locked, too much ingest at once) is a 503 that
// asks the sender to retry; anything else is a 500. Either way the sender
// is told: it must never take silence for an acknowledgement.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, what, endpointID string, err error) {
	switch {
	case r.Context().Err() != nil:
		// A stop cut short, or the client went away: nothing was stored,
		// and whoever still listens must try again. Only a stop is said
		// to be one.
		h.log.Debug("capture: "+what+" abandoned", "endpoint", endpointID, "remote", r.RemoteAddr, "err", err)
		if h.isStopping() {
			h.unavailable(w, "the server is shutting down; nothing was stored, try again")
		} else {
			h.unavailable(w, "the request ended before it was stored; nothing was stored, try again")
		}
	case errors.Is(err, admission.ErrBusy):
		h.log.Warn("capture: "+what+" refused", "endpoint", endpointID, "remote", r.RemoteAddr, "err", err)
		h.unavailable(w, "too much is being captured at once; nothing was stored, try again")
	case errors.Is(err, store.ErrDiskFull):
		h.outage.Refused(store.Why(err), err, "at", what, "endpoint", endpointID, "remote", r.RemoteAddr)
		h.unavailable(w, "the disk is full; nothing was stored, try again once there is room")
	case store.IsUnavailable(err):
		// A stalled or locked database, one that cannot be written, or
		// cannot be reached (PostgreSQL stopped): the sender is to try
		// again, told why. Logged once while it lasts: a full disk would
		// otherwise fill the log with a line per capture.
		h.outage.Refused(store.Why(err), err, "at", what, "endpoint", endpointID, "remote", r.RemoteAddr)
		h.unavailable(w, store.Why(err)+"; nothing was stored, try again")
	default:
		h.log.Error("capture: "+what+" failed", "endpoint", endpointID, "method", r.Method, "remote", r.RemoteAddr, "err", err)
		h.writeError(w, &contract.Error{Code: contract.CodeInternal, Message: "internal error"})
	}
}

// isStopping reports whether the server has begun to stop.
func (h *Handler) isStopping() bool {
	select {
	case <-h.stopping: // never, when nil
		return true
	default:
		return false
	}
}

// A refused body of up to maxDiscard bytes is read and thrown away, for
// at most discardTime, before the answer. Clients that send the whole
// body before reading the answer (Python's http.client, under urllib and
// requests) otherwise find the connection reset under them, and report
// that instead of the 413: closing a socket with unread data resets it.
const (
	maxDiscard  = 64 << 20
	discardTime = 10 * time.Second
)

// discardBody reads what is left of r's body into nothing, unless the
// client waits for "100 Continue" before sending it (reading would ask
// for the body), or declared more than is worth reading.
func discardBody(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Expect") != "" || r.ContentLength > maxDiscard {
		return
	}
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(discardTime))
	io.CopyN(io.Discard, r.Body, maxDiscard)
}

// writeError answers a refused capture with the error envelope, and
// counts it.
func (h *Handler) writeError(w http.ResponseWriter, e *contract.Error) {
	if h.refused != nil {
		h.refused(e.Code)
	}
	contract.WriteError(w, e)
}

func (h *Handler) unavailable(w http.ResponseWriter, message string) {
	h.writeError(w, &contract.Error{Code: contract.CodeUnavailable, Message: message, RetryAfter: retryAfter})
}

func (h *Handler) tooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	discardBody(w, r)
	w.Header()["Connection"] = closeConnection
	h.writeError(w, &contract.Error{Code: contract.CodeQuotaExceeded, Status: http.StatusRequestEntityTooLarge,
		Message: "request body over the plan's limit of " + strconv.FormatInt(limit, 10) + " bytes"})
}
