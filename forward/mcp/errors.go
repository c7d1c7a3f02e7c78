package mcp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/server/api/contract"
)

// toolError is what a model reads when a tool fails: the API's code, what
// went wrong, and what to do about it. It is returned as a tool result with
// isError set, never as a protocol failure, so the model can act on it.
type toolError struct {
	err  error
	text string
}

func (e *toolError) Error() string { return e.text }
func (e *toolError) Unwrap() error { return e.err }

func invalidParameter(name, why string) error {
	return contract.Invalid(map[string]string{name: why})
}

// explain turns any error of a tool into a toolError. This is the one place
// where API error codes meet advice.
func explain(err error) error {
	var te *toolError
	if errors.As(err, &te) {
		return err
	}
	var ae *contract.Error
	switch {
	case errors.As(err, &ae):
		return &toolError{err: err, text: explainAPI(ae)}
	case errors.Is(err, apiclient.ErrUnreachable):
		return &toolError{err: err, text: "unreachable: " + err.Error() +
			". What to do: the capture server is not answering; ask the user to check that `capture serve` is running, then call again."}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &toolError{err: err, text: "cancelled: the call ended before the API answered. What to do: call again if still needed."}
	}
	return &toolError{err: err, text: "error: " + err.Error()}
}

func explainAPI(e *contract.Error) string {
	code := e.Code
	if code == "" {
		code = "http_error"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (HTTP %d)", code, e.HTTPStatus())
	if e.Message != "" {
		b.WriteString(": " + strings.TrimSuffix(e.Message, "."))
	}
	// The API's message usually names the fields already; add any it left out.
	for _, name := range slices.Sorted(maps.Keys(e.Fields)) {
		if !strings.Contains(e.Message, name+":") {
			fmt.Fprintf(&b, "; %s: %s", name, e.Fields[name])
		}
	}
	b.WriteString(". What to do: ")
	switch code {
	case contract.CodeNotFound:
		b.WriteString("the id does not exist in this API key's project (an id of another project is reported the same way). " +
			"Check the id; list_inboxes, list_endpoints, list_messages and list_requests show the current ones.")
	case contract.CodeInvalidCursor:
		b.WriteString("the before/after cursor names no capture of this inbox or endpoint (it may have been deleted or pruned). " +
			"Call again without before and after to get a fresh first page, and page from there.")
	case contract.CodeInvalidParameter:
		b.WriteString("fix the parameters named above and call again.")
	case contract.CodeTooManyWaits:
		fmt.Fprintf(&b, "this project already has the most waits open at once (4). Retry in %s, or call without wait.", retryIn(e))
	case contract.CodeRateLimited:
		fmt.Fprintf(&b, "too many API calls with this key. Retry in %s.", retryIn(e))
	case contract.CodeUnavailable:
		fmt.Fprintf(&b, "the capture server is shutting down or cannot reach its database right now. Retry in %s; "+
			"if it keeps failing, ask the user to check that `capture serve` is running.", retryIn(e))
	case contract.CodeNoTarget:
		b.WriteString("the endpoint has no saved target URL to replay to. Ask the user to set one " +
			"(`capture endpoint set whe_… --target URL`, or in the web interface), then replay again.")
	case contract.CodeUnauthorized:
		b.WriteString("the API key was rejected (revoked or unknown). Ask the user for a valid key.")
	case contract.CodeQuotaExceeded:
		b.WriteString("a plan quota is exceeded; ask the user to free space or raise the plan.")
	default:
		b.WriteString("the capture server failed; retrying may help, otherwise tell the user.")
	}
	return b.String()
}

// retryIn says how long the API asked to wait, in whole seconds.
func retryIn(e *contract.Error) string {
	d := e.RetryAfter
	if d <= 0 {
		d = time.Second
	}
	return fmt.Sprintf("%d s", int(math.Ceil(d.Seconds())))
}
