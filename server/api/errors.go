package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/store"
)

// error answers a route's error with the envelope. This is the one place
// where the store's errors meet the API's codes; anything unexpected is
// logged and shown only as "internal error".
func (a *API) error(w http.ResponseWriter, r *http.Request, err error) {
	var e *contract.Error
	switch {
	case errors.As(err, &e):
	case errors.Is(err, store.ErrNotFound):
		e = &contract.Error{Code: contract.CodeNotFound, Message: detail(err, store.ErrNotFound)}
	case errors.Is(err, store.ErrInvalidCursor):
		e = &contract.Error{Code: contract.CodeInvalidCursor,
			Message: "invalid cursor: " + detail(err, store.ErrInvalidCursor) + "; list again without a cursor to get a new baseline"}
	case errors.Is(err, store.ErrQuotaExceeded):
		e = &contract.Error{Code: contract.CodeQuotaExceeded, Message: detail(err, store.ErrQuotaExceeded)}
	case errors.Is(err, store.ErrInvalid):
		e = &contract.Error{Code: contract.CodeInvalidParameter, Message: detail(err, store.ErrInvalid)}
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the reply.
		return
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

var errInternal = &contract.Error{Code: contract.CodeInternal, Message: "internal error"}

// detail strips the sentinel's own text from a wrapped error message.
func detail(err, sentinel error) string {
	return strings.TrimPrefix(err.Error(), sentinel.Error()+": ")
}
