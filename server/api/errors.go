package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/store"
)

// error answers a route's error with the envelope. This is the one place
// where the store's errors meet the API's codes; anything unexpected is
// logged and shown only as "internal error".
func (a *API) error(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && !errors.Is(context.Cause(r.Context()), ErrStopping) {
		// The client went away (a wait given up, a call cancelled): nobody
		// reads the answer and no server refused anything, whatever error
		// the cancelled call surfaced as (PostgreSQL's "query cancelled"
		// among them), so it is neither logged nor counted as a refusal.
		contract.WriteError(w, errUnavailable("the client went away"))
		return
	}
	var e *contract.Error
	var qe *store.QueryError
	switch {
	case errors.As(err, &e):
	case errors.As(err, &qe):
		// The store names the parameter it could not read; fields says
		// why, as for a parameter this package refuses itself.
		e = contract.Invalid(map[string]string{qe.Param: qe.Reason})
	case errors.Is(err, store.ErrNotFound):
		e = &contract.Error{Code: contract.CodeNotFound, Message: detail(err, store.ErrNotFound)}
	case errors.Is(err, store.ErrInvalidCursor):
		e = &contract.Error{Code: contract.CodeInvalidCursor,
			Message: "invalid cursor: " + detail(err, store.ErrInvalidCursor) + "; list again without a cursor to get a new baseline"}
	case errors.Is(err, store.ErrQuotaExceeded):
		e = &contract.Error{Code: contract.CodeQuotaExceeded, Message: detail(err, store.ErrQuotaExceeded)}
	case errors.Is(err, store.ErrInvalid):
		e = &contract.Error{Code: contract.CodeInvalidParameter, Message: detail(err, store.ErrInvalid)}
	case store.IsUnavailable(err):
		// A write the database could not take in time, or a read that
		// found it out of reach (PostgreSQL stopped, a lost connection):
		// try again, not an internal error. store.Why says which.
		a.log.Warn("API request refused: the database is unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		e = errUnavailable(store.Why(err))
	case r.Context().Err() != nil:
		// serve is shutting down: a wait in progress must say so, never
		// end as an empty 200.
		e = errUnavailable("the server is shutting down")
	default:
		a.log.Error("API request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		e = errInternal
	}
	a.writeError(w, e)
}

// writeError answers with e, counted by its code.
func (a *API) writeError(w http.ResponseWriter, e *contract.Error) {
	if a.cfg.Refused != nil {
		a.cfg.Refused(e.Code)
	}
	contract.WriteError(w, e)
}

// ErrStopping is the cause the server cancels a held request's context
// with when it begins to stop, to tell that from a client gone away.
var ErrStopping = errors.New("the server is stopping")

var errInternal = &contract.Error{Code: contract.CodeInternal, Message: "internal error"}

// retryUnavailable is how long a client is asked to wait after a 503: long
// enough for a lock holder or a restart, short enough for a test.
const retryUnavailable = time.Second

func errUnavailable(why string) *contract.Error {
	return &contract.Error{Code: contract.CodeUnavailable, Message: why + "; nothing was changed, retry after 1 s",
		RetryAfter: retryUnavailable}
}

// detail strips the sentinel's own text from a wrapped error message.
func detail(err, sentinel error) string {
	return strings.TrimPrefix(err.Error(), sentinel.Error()+": ")
}
