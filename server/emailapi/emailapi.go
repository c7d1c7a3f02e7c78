// Package emailapi is the --email-api listener: it answers the send routes
// of the email providers' HTTP APIs (SendGrid, Postmark, Mailgun, Amazon
// SES v2 and v1, Resend) at their own paths, so an application whose provider SDK
// is pointed at capture sends into an inbox with no other change (SPEC
// §17).
//
// Each request is authenticated by the inbox's SMTP password (SES: a
// Signature V4 made with it), checked as the provider checks it, and turned
// into the MIME message the provider would have sent. That message is then
// parsed and stored exactly like an SMTP capture, and the provider's own
// success answer is sent only once it is committed. Refusals use each
// provider's own statuses and error bodies, so SDKs report them as they
// would report the provider's.
package emailapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/capturedev/capture/server/admission"
	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/server/bodyread"
	"github.com/capturedev/capture/server/ingest"
	"github.com/capturedev/capture/server/mailparse"
	"github.com/capturedev/capture/server/outage"
	"github.com/capturedev/capture/store"
)

// Store is what the email APIs need from the database.
type Store interface {
	Inbox(ctx context.Context, projectID, id string) (store.Inbox, error)
	InboxBySMTPPassword(ctx context.Context, password string) (store.Inbox, error)
	Project(ctx context.Context, idOrName string) (store.Project, error)
	InsertMessages(ctx context.Context, ms []*store.NewMessage) ([]string, error)
}

var _ Store = (*store.Store)(nil)

type Config struct {
	// Logger receives failures and, at debug level, a line per capture.
	// Default: discard.
	Logger *slog.Logger
	// Budget bounds the request bodies held at once, together with what
	// else shares it (webhooks, SMTP), so that concurrent large sends
	// queue instead of exhausting memory. Nil means no bound.
	Budget *admission.Budget
	// AdmissionWait bounds how long a request waits for room in Budget
	// before it is refused as unavailable. Default 20 s.
	AdmissionWait time.Duration
	// Refused, if set, hears the read API's code of each refused request,
	// and of each message refused alone within a batch (quota_exceeded,
	// unavailable, unauthorized, invalid_parameter), as SMTP's does.
	Refused func(code string)
}

// bodyOverhead is what a request may carry beside the message itself:
// JSON syntax, field names, the other messages of a small batch.
const bodyOverhead = 1 << 20

// holdWeight is how many times its body's size a request holds while it
// is decoded, composed, parsed and stored: the body, the fields decoded
// from it, the messages written from them and what parsing those
// allocates, as SMTP's parseWeight counts a message.
const holdWeight = 4

// Handler serves the providers' routes.
type Handler struct {
	store         Store
	log           *slog.Logger
	mux           *http.ServeMux
	budget        *admission.Budget
	admissionWait time.Duration
	refused       func(code string)
	// outage logs the refusals of a database that cannot take messages
	// (or look up a credential) once for as long as that lasts.
	outage *outage.Log
}

// New returns the email API handler over st.
func New(st Store, cfg Config) *Handler {
	h := &Handler{store: st, log: cfg.Logger, mux: http.NewServeMux(), budget: cfg.Budget, admissionWait: cfg.AdmissionWait,
		refused: cfg.Refused}
	if h.refused == nil {
		h.refused = func(string) {}
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.outage = messageOutage(h.log)
	if h.admissionWait <= 0 {
		h.admissionWait = 20 * time.Second
	}
	for _, p := range providers {
		h.mux.HandleFunc(p.route, h.handle(p))
		if p.alsoGET {
			h.mux.HandleFunc(http.MethodGet+strings.TrimPrefix(p.route, http.MethodPost), h.handle(p))
		}
	}
	return h
}

// providers are the send routes the listener serves.
var providers = []*provider{sendgrid, postmarkEmail, postmarkBatch, postmarkTemplate, postmarkBatchTemplates,
	mailgun, mailgunMIME, ses, sesBulk, sesV1, resend, resendBatch}

// ServeHTTP answers the providers' routes. Any other request is answered
// in capture's own error envelope, as the read API answers it: no
// provider's shape fits a route no provider has, and an SDK pointed at the
// wrong path should say so plainly.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// ServeMux would redirect a path that is not clean; the providers'
	// SDKs never send one, so it is no route. The path / alone is SES
	// v1's only for what an SES v1 SDK sends there: another provider's SDK
	// whose base URL lost its path hears it has no route, not an AWS
	// refusal.
	if p := r.URL.Path; path.Clean(p) == p && (p != "/" || sesV1Request(r)) {
		if _, pattern := h.mux.Handler(r); pattern != "" {
			// Served by the mux itself, which sets the path's wildcards.
			h.mux.ServeHTTP(w, r)
			return
		}
		post := r.Clone(r.Context())
		post.Method = http.MethodPost
		if _, pattern := h.mux.Handler(post); pattern != "" {
			contract.WriteError(w, contract.MethodNotAllowed(r, []string{http.MethodPost}))
			return
		}
	}
	contract.WriteError(w, contract.Errorf(contract.CodeNotFound, "capture's email API has no route %s %s; it serves %s",
		r.Method, r.URL.Path, routeList()))
}

// routeList names every send route, for a request that matched none.
func routeList() string {
	routes := make([]string, len(providers))
	for i, p := range providers {
		// "POST /{$}" is the path / alone.
		routes[i] = strings.TrimSuffix(p.route, "{$}") + " (" + p.title + ")"
	}
	return strings.Join(routes, ", ")
}

// NewServer returns the server the handler runs in. Headers must arrive
// within 10 s and a whole request within 2 min (a large attachment over a
// slow link), and connections idle for a minute are closed.
func NewServer(h *Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      2*time.Minute + 10*time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
	}
}

// provider is one provider's send route: how it carries its credential,
// how its body becomes messages, and how it answers.
type provider struct {
	name  string // as X-Capture-Provider names it
	title string // as people name it
	route string // a ServeMux pattern
	// credential reads the credential from the request's headers.
	credential func(r *http.Request) (credential, *apiError)
	// decode turns the body into messages, within the budget.
	decode func(r *http.Request, body []byte, b *budget) ([]*outgoing, *apiError)
	// reply sends the success answer once the messages are stored.
	reply func(w http.ResponseWriter, out []*outgoing)
	// fail sends a refusal in the provider's own shape.
	fail func(w http.ResponseWriter, e *apiError)
	// batch, when it says so for a request, has the route answer for each
	// message: one message's refusal is part of the reply and the others
	// are still stored. Otherwise the request stands or falls whole.
	batch func(r *http.Request) bool
	// batchBody says the body holds several messages side by side (a
	// Postmark or Resend batch), so it may be as large as the budget of a
	// request's messages, not one message's size.
	batchBody bool
	// formBody says the body is a URL-encoded form (SES v1), in which
	// %XX escapes may triple a message's bytes, not base64's four thirds.
	formBody bool
	// arrayBody says an attachment may come as a JSON array of byte values
	// (Resend), up to four characters ("255,") a byte, not base64's four
	// thirds.
	arrayBody bool
	// alsoGET says the route takes GET too, its parameters in the query
	// string (SES v1's Query API). The route list names only the POST.
	alsoGET bool
}

// everyMessage is batch for a route whose messages always stand alone.
func everyMessage(*http.Request) bool { return true }

// credential is either an SMTP password, which names the inbox, or (for a
// signed request) an inbox id whose password verify checks the signature
// with, once the body is read.
type credential struct {
	password string
	inboxID  string
	verify   func(secret string, body []byte) *apiError
}

// outgoing is one message of a request, ready to store.
type outgoing struct {
	raw  []byte
	from string   // envelope sender
	to   []string // envelope recipients, Bcc included
	// echo is how the reply names the recipients (Postmark's To).
	echo string
	// err refuses this message alone (an item of a batch).
	err *apiError
	// dryRun messages are checked but not stored (SendGrid's sandbox mode).
	dryRun bool
	// id is the stored message's id: chosen before composing when the
	// message names it, else set once stored.
	id string
	// action is the SES v1 action that sent it, which names its answer.
	action string
}

func (h *Handler) handle(prov *provider) http.HandlerFunc {
	p := *prov
	p.fail = func(w http.ResponseWriter, e *apiError) { // counted, then said
		h.refused(e.readAPICode())
		prov.fail(w, e)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		cred, apiErr := p.credential(r)
		if apiErr != nil {
			p.fail(w, apiErr)
			return
		}
		in, plan, apiErr := h.inbox(ctx, cred)
		if apiErr != nil {
			p.fail(w, apiErr)
			return
		}
		body, res, apiErr := h.readBody(w, r, plan, &p)
		if apiErr != nil {
			p.fail(w, apiErr)
			return
		}
		defer res.Release()
		if cred.verify != nil {
			if apiErr := cred.verify(in.SMTPPassword, body); apiErr != nil {
				p.fail(w, apiErr)
				return
			}
		}
		// What decoding holds is reserved before it starts (readBody has
		// mostly reserved it already, as the body arrived), and what the
		// messages a request expands to hold (SendGrid personalizations,
		// Mailgun batches) once they are written. The time the body took
		// to arrive is not waiting for room.
		admitCtx, cancel := admission.Within(ctx, h.admissionWait)
		defer cancel()
		if res.Grow(admitCtx, holdWeight*int64(len(body))) != nil {
			p.fail(w, errUnavailable)
			return
		}
		// The messages a request expands to are reserved as they are
		// written, so a small body cannot grow far past its reservation
		// before it is counted.
		// holding is what the request holds once messages of written bytes
		// in all are written (Grow never shrinks the reservation).
		holding := func(written int64) int64 { return int64(len(body)) + (holdWeight-1)*written }
		b := newBudget(plan)
		b.grow = func(written int64) error { return res.Grow(admitCtx, holding(written)) }
		out, apiErr := p.decode(r, body, b)
		if b.starved {
			// Refused whole, even by a batch that answers for each message.
			p.fail(w, errUnavailable)
			return
		}
		if apiErr != nil {
			p.fail(w, apiErr)
			return
		}
		var written int64
		for _, o := range out {
			written += int64(len(o.raw))
		}
		if res.Grow(admitCtx, holding(written)) != nil {
			p.fail(w, errUnavailable)
			return
		}

		batch := p.batch != nil && p.batch(r)
		var msgs []*store.NewMessage
		var stored []*outgoing
		for _, o := range out {
			if o.err == nil && int64(len(o.raw)) > plan.MessageBytes {
				o.err = errTooLarge(plan.MessageBytes, plan.Name)
			}
			if o.err != nil && !batch {
				p.fail(w, o.err)
				return
			}
			if o.err != nil {
				h.refused(o.err.readAPICode()) // refused alone, within a batch
			}
			if o.err != nil || o.dryRun {
				continue
			}
			m := ingest.NewMessage(in.ID, o.from, o.to, o.raw, mailparse.Parse(o.raw))
			// A message whose content names its own id (Mailgun's
			// Message-Id) is stored under it.
			m.ID = o.id
			msgs = append(msgs, m)
			stored = append(stored, o)
		}
		if ctx.Err() != nil {
			// Shutting down (or the client left): nothing new is stored.
			p.fail(w, errUnavailable)
			return
		}
		if len(msgs) > 0 {
			// Answered only once committed; the store honours ctx only
			// while the messages wait for the writer, so a commit is never
			// reported as a failure.
			ids, err := h.store.InsertMessages(ctx, msgs)
			if err != nil {
				if ctx.Err() == nil {
					h.outage.Failed(err, "email api: database", "at", "store messages", "provider", p.name, "inbox", in.ID)
				}
				p.fail(w, errNotStored(err))
				return
			}
			h.outage.Taken()
			for i, id := range ids {
				stored[i].id = id
			}
			h.log.Debug("email api: captured", "provider", p.name, "inbox", in.ID, "messages", len(ids), "first", ids[0])
		}
		p.reply(w, out)
	}
}

// budget bounds what one request may expand to: a SendGrid or Mailgun
// batch writes its bodies and attachments once for every recipient, so a
// small request could otherwise fill memory, and a Postmark or Resend
// batch carries many messages. Its messages may total twice the plan's
// message size.
type budget struct {
	left int64
	plan store.Plan
	// grow, when set, is told what the messages written so far total, so
	// that the request's share of the ingest budget grows with them as
	// they are written rather than once all are.
	grow    func(written int64) error
	written int64
	// starved says grow found no room: the request is refused whole as
	// unavailable.
	starved bool
}

func newBudget(plan store.Plan) *budget { return &budget{left: batchBytes(plan), plan: plan} }

// batchBytes is what the messages of one request may total.
func batchBytes(plan store.Plan) int64 { return 2 * plan.MessageBytes }

// fits refuses a message over the plan's message limit, which a batch
// answers for that message alone.
func (b *budget) fits(o *outgoing) *apiError {
	if int64(len(o.raw)) > b.plan.MessageBytes {
		return errTooLarge(b.plan.MessageBytes, b.plan.Name)
	}
	return nil
}

// spend counts a written message against the budget; one that does not
// fit is refused and spends nothing, so a smaller one after it may fit.
// A batch refuses it alone, any other request whole.
func (b *budget) spend(o *outgoing) *apiError {
	n := int64(len(o.raw))
	if n > b.left {
		return &apiError{kind: tooLarge, msg: fmt.Sprintf("the messages of this request total more than %d bytes, "+
			"twice the message limit of the %s plan; send fewer or smaller messages per request", batchBytes(b.plan), b.plan.Name)}
	}
	b.left -= n
	b.written += n
	if b.grow != nil && b.grow(b.written) != nil {
		b.starved = true
		return &apiError{kind: unavailable, msg: errUnavailable.msg}
	}
	return nil
}

// inbox finds the inbox a credential names and its plan. Lookups read the
// database every time, so a rotated password takes effect at once.
func (h *Handler) inbox(ctx context.Context, c credential) (store.Inbox, store.Plan, *apiError) {
	var in store.Inbox
	var err error
	if c.inboxID != "" {
		in, err = h.store.Inbox(ctx, "", c.inboxID)
	} else {
		in, err = h.store.InboxBySMTPPassword(ctx, c.password)
	}
	if errors.Is(err, store.ErrNotFound) {
		return in, store.Plan{}, &apiError{kind: badCredential, msg: "the credential names no inbox"}
	}
	if err == nil {
		var p store.Project
		if p, err = h.store.Project(ctx, in.ProjectID); err == nil {
			return in, p.Plan, nil
		}
	}
	if ctx.Err() == nil {
		h.outage.Failed(err, "email api: database", "at", "read inbox")
	}
	return in, store.Plan{}, errNotStored(err)
}

// readBody reads the whole body, refusing one over what a message of the
// plan can take once base64 and JSON have grown it (a batch's body: what
// the messages of a request may total, so grown; a form's: once its %XX
// escapes have tripled it; an array of byte values': four times it). The
// message's own limit is enforced on the message once written.
//
// The body reserves room in the ingest budget as webhook bodies do
// (bodyread.Read): only a first piece before its first byte, the rest as
// it arrives, and holdWeight times it, what the request holds once it is
// decoded, so that the handler's first Grow finds it held, not a body
// already read waiting for room uncounted. A body that stops coming is cut
// off, so that clients who declare large bodies and stall hold little of
// the budget every capture shares, and not for long. The reservation
// holds the room until released.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request, plan store.Plan, p *provider) ([]byte, *admission.Reservation, *apiError) {
	limit := plan.MessageBytes/3*4 + bodyOverhead
	switch {
	case p.formBody:
		limit = 3*plan.MessageBytes + bodyOverhead
	case p.arrayBody:
		limit = 4*plan.MessageBytes + bodyOverhead
	}
	refusal := &apiError{kind: tooLarge, msg: fmt.Sprintf("the request body exceeds %d bytes, more than a message within "+
		"the %d-byte limit of the %s plan can need", limit, plan.MessageBytes, plan.Name)}
	if p.batchBody {
		limit, refusal = batchBytes(plan)/3*4+bodyOverhead, errBatchTooLarge(plan)
	}
	// A body declared over the limit is refused at once, before any wait
	// for room.
	admitCtx, cancel := admission.Within(r.Context(), h.admissionWait)
	defer cancel()
	// The body is left to the garbage collector, not handed back to
	// bodyread's pool: the messages decoded from it may hold slices of it.
	body, reservation, _, err := bodyread.Read(admitCtx, w, r, h.budget, limit, holdWeight)
	if err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			return nil, nil, refusal
		case errors.Is(err, bodyread.ErrTooSlow):
			// Cut off: the connection cannot be read any further.
			w.Header().Set("Connection", "close")
			return nil, nil, &apiError{kind: malformed, msg: "the request body arrived too slowly: " + err.Error() +
				" after its first " + bodyread.Grace.String()}
		case errors.Is(err, admission.ErrBusy) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			// No room for it, or abandoned while it waited for room: the
			// unread body is not worth draining. (A body that ended early,
			// its sender gone or half-closed, ends the request's context
			// too: it is told so below, not that capture is busy.)
			w.Header().Set("Connection", "close")
			return nil, nil, errUnavailable
		}
		return nil, nil, &apiError{kind: malformed, msg: "the request body ended before its declared length"}
	}
	return body, reservation, nil
}

func messageOutage(log *slog.Logger) *outage.Log {
	return outage.New(log, "email api: messages refused", "email api: messages taken again", "refused")
}

// errBatchTooLarge refuses a batch whose body is over what its messages
// may total, whatever their sizes one by one.
func errBatchTooLarge(plan store.Plan) *apiError {
	return &apiError{kind: tooLarge, msg: fmt.Sprintf("the batch exceeds the %d-byte total of a batch on the %s plan "+
		"(twice its %d-byte message limit, attachments counted in base64); send it as smaller batches",
		batchBytes(plan), plan.Name, plan.MessageBytes)}
}
