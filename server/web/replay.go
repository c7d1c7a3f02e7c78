package web

import (
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/server/api/resend"
	"github.com/capturedev/capture/server/replay"
	"github.com/capturedev/capture/store"
)

// replayForm is the Replay form of a captured request: the request as it
// will be sent, and what the last replay from the form gave.
type replayForm struct {
	URL, ResetURL, Target              string
	Method, Path, Query, Headers, Body string
	BodyEditable                       bool
	// Posted says the page answers the form: the script then gives the
	// page its own address back, so that a reload does not replay again.
	Posted bool
	// NoTarget is the no_target answer: the endpoint has no saved target.
	NoTarget string
	// Problems name each edit the replay refused; Invalid marks their
	// fields (method, path, query, headers, body).
	Problems []string
	Invalid  map[string]bool
	// Error is any other failure, in a sentence.
	Error  string
	Result *replayResult
}

// replayResult is one replay: the delivery it recorded, the request it
// sent, and what the target answered (nil when it did not answer).
type replayResult struct {
	Delivery    deliveryRow
	Method, URL string
	Sent        []fieldRow
	Response    *replayResponse
}

type replayResponse struct {
	Status  string // "202 Accepted"
	OK      bool
	Headers []fieldRow
	Body    bodyView
}

// replayFormOf is the form of a request not yet replayed from this page:
// what a replay without edits sends.
func replayFormOf(rq store.Request) *replayForm {
	f := &replayForm{Method: rq.Method, Path: rq.Path, Query: rq.Query, BodyEditable: utf8.Valid(rq.Body)}
	// Only the headers a replay resends are shown: Host, Content-Length and
	// the connection's own follow the new request.
	sendable := sendableHeader(rq)
	var lines strings.Builder
	for _, hd := range rq.Headers {
		name := http.CanonicalHeaderKey(hd.Name)
		values, ok := sendable[name]
		if !ok {
			continue
		}
		delete(sendable, name)
		for _, v := range values {
			lines.WriteString(name + ": " + v + "\n")
		}
	}
	f.Headers = lines.String()
	if f.BodyEditable {
		f.Body = string(rq.Body)
	}
	return f
}

// sendableHeader is the captured headers a replay without edits sends.
func sendableHeader(rq store.Request) http.Header {
	captured := http.Header{}
	for _, hd := range rq.Headers {
		name := http.CanonicalHeaderKey(hd.Name)
		captured[name] = append(captured[name], hd.Values...)
	}
	return resend.Header(captured)
}

// newlines turns a textarea's line breaks (CRLF, as browsers send them)
// into "\n", as people mean them; and a captured body's too, so that the
// Replay form's body compares with it.
func newlines(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
}

// untouched is a captured body as the Replay form's textarea gives it back
// when left alone: line breaks as "\n" (newlines), and each NUL as U+FFFD,
// which is what HTML parsing makes of it. A body posted as that is no
// edit, and is replayed byte for byte as captured.
func untouched(body string) string {
	return strings.ReplaceAll(newlines(body), "\x00", "\uFFFD")
}

// replayRequest sends the request again with the form's edits, through
// the same replay as the read API's, and shows what came of it on the
// request's page.
func (h *Handler) replayRequest(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	pid := pc.project.ID
	rq, err := h.store.Request(r.Context(), pid, r.PathValue("rid"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	form := &replayForm{
		Method: strings.TrimSpace(r.PostFormValue("method")), Path: strings.TrimSpace(r.PostFormValue("path")),
		Query: strings.TrimSpace(r.PostFormValue("query")), Headers: newlines(r.PostFormValue("headers")),
		Body: newlines(r.PostFormValue("body")), BodyEditable: utf8.Valid(rq.Body), Posted: true,
	}
	edits, err := replayEditsOf(rq, form)
	var headerErr *contract.Error
	if errors.As(err, &headerErr) {
		// The other edits are checked too, so that every bad field is
		// told at once.
		var others *contract.Error
		if errors.As(replay.Check(rq, edits), &others) && others.Code == contract.CodeInvalidParameter {
			fields := maps.Clone(others.Fields)
			maps.Copy(fields, headerErr.Fields)
			err = contract.Invalid(fields)
		}
	}
	if err == nil {
		var res replay.Result
		if res, err = h.replay.Replay(r.Context(), pid, rq.ID, edits); err == nil {
			form.Result = replayResultOf(res)
		}
	}
	var refused *contract.Error
	switch {
	case err == nil:
		h.renderRequest(w, r, pc, http.StatusOK, form)
	case errors.As(err, &refused) && !acceptsHTML(r) &&
		(refused.Code == contract.CodeNoTarget || refused.Code == contract.CodeInvalidParameter):
		// A program gets the read API's own answer, fields and all.
		contract.WriteError(w, refused)
	case errors.As(err, &refused) && refused.Code == contract.CodeNoTarget:
		// The API's message tells a terminal user what to run; here the
		// alert's link to the settings says what to do.
		form.NoTarget = "This endpoint has no replay target, so nothing was sent."
		h.renderRequest(w, r, pc, refused.HTTPStatus(), form)
	case errors.As(err, &refused) && refused.Code == contract.CodeInvalidParameter:
		form.Problems, form.Invalid = problemsOf(refused.Fields)
		h.renderRequest(w, r, pc, refused.HTTPStatus(), form)
	default:
		h.fail(w, r, err)
	}
}

// replayEditsOf turns the form into the replay's edits: each field that
// differs from what a replay without edits sends is an edit, and a header
// left out of the form is removed.
func replayEditsOf(rq store.Request, f *replayForm) (contract.ReplayEdits, error) {
	var ed contract.ReplayEdits
	if f.Method != rq.Method {
		ed.Method = &f.Method
	}
	if f.Path != rq.Path {
		ed.Path = &f.Path
	}
	if q := strings.TrimPrefix(f.Query, "?"); q != rq.Query {
		ed.Query = &q
	}
	lines, err := headerLinesOf(f.Headers)
	if err != nil {
		return ed, contract.Invalid(map[string]string{"headers": strings.TrimPrefix(err.Error(), store.ErrInvalid.Error()+": ")})
	}
	sent := http.Header{}
	for _, l := range lines {
		sent[l.Name] = append(sent[l.Name], l.Value)
	}
	captured := sendableHeader(rq)
	headers := map[string]contract.HeaderEdit{}
	for name, values := range sent {
		if !slices.Equal(captured[name], values) {
			headers[name] = contract.HeaderEdit{Values: values}
		}
	}
	for name := range captured {
		if _, kept := sent[name]; !kept {
			headers[name] = contract.HeaderEdit{Remove: true}
		}
	}
	if len(headers) > 0 {
		ed.Headers = headers
	}
	if body := string(rq.Body); f.BodyEditable && f.Body != untouched(body) {
		edited := f.Body
		// The textarea knows only "\n"; a body that broke its lines with
		// CRLF keeps doing so.
		if strings.Contains(body, "\r\n") {
			edited = strings.ReplaceAll(edited, "\n", "\r\n")
		}
		ed.Body = &edited
	}
	return ed, nil
}

// problemsOf says in words what was wrong with each field of the form
// that the replay refused, and marks the fields.
func problemsOf(fields map[string]string) ([]string, map[string]bool) {
	var problems []string
	invalid := map[string]bool{}
	for _, field := range slices.Sorted(maps.Keys(fields)) {
		label, input := field, field
		switch {
		case field == "body" || field == "body_base64":
			label, input = "Body", "body"
		case strings.HasPrefix(field, "headers."):
			label, input = "Header "+strings.TrimPrefix(field, "headers."), "headers"
		default:
			label = strings.ToUpper(field[:1]) + field[1:]
		}
		invalid[input] = true
		problems = append(problems, label+": "+fields[field]+".")
	}
	return problems, invalid
}

func replayResultOf(res replay.Result) *replayResult {
	out := &replayResult{Delivery: deliveryRowOf(res.Delivery), Method: res.Sent.Method, URL: res.Sent.URL,
		Sent: headerRows(res.Sent.Header)}
	if resp := res.Response; resp != nil {
		out.Response = &replayResponse{Status: strconv.Itoa(resp.Status) + " " + http.StatusText(resp.Status),
			OK: resp.Status >= 200 && resp.Status <= 299, Headers: headerRows(resp.Header),
			Body: bodyViewOf(resp.Body, replay.MaxResponse, "")}
		out.Response.Body.Truncated = out.Response.Body.Truncated || resp.Truncated
	}
	return out
}

// headerRows lists a header one value a row, by name.
func headerRows(hd http.Header) []fieldRow {
	var rows []fieldRow
	for _, name := range slices.Sorted(maps.Keys(hd)) {
		for _, v := range hd[name] {
			rows = append(rows, fieldRow{Name: name, Value: v})
		}
	}
	return rows
}
