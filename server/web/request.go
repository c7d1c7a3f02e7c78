package web

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/capturedev/capture/store"
)

// Replayer sends a captured request again to its endpoint's saved target,
// with edits, and records the outcome as a delivery of kind "replay": what
// POST /api/v1/requests/{id}/replay does.
type Replayer interface {
	Replay(ctx context.Context, projectID, requestID string, edits ReplayEdits) (store.Delivery, error)
}

// ReplayEdits change the replayed request; a nil field keeps what was
// captured.
type ReplayEdits struct {
	Method, Path, Query *string
	// Headers sets each named header to its value, or removes it when the
	// value is nil.
	Headers map[string]*string
	Body    []byte // nil keeps the captured body
}

type requestView struct {
	ID, Method, Path, Query, ContentType, Size, RemoteAddr string
	Received                                               timeView
	EndpointName, EndpointURL, SettingsURL, DeleteURL      string
	Headers, QueryParams                                   []fieldRow
	Body                                                   bodyView
	Deliveries                                             []deliveryRow
	Replay                                                 *replayForm
}

type bodyView struct {
	// Kind is "empty", "json", "text" or "binary".
	Kind string
	// Text is the body to show: pretty JSON, text, or a hex dump or base64
	// of a binary body, cut to a preview.
	Text        string
	Truncated   bool
	View        string // for binary bodies: "hex" or "base64"
	HexURL      string
	Base64URL   string
	DownloadURL string
}

type deliveryRow struct {
	Kind, TargetURL, Status, ResponseStatus, Error, Duration string
	OK                                                       bool
	Created                                                  timeView
}

type replayForm struct {
	URL, Target                        string
	Method, Path, Query, Headers, Body string
	BodyEditable                       bool
	Error                              string
}

// maxBodyShown bounds the body shown on the page; the download has it all.
const (
	maxBodyShown   = 1 << 20
	maxBinaryShown = 16 << 10
)

func (h *Handler) requestPage(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	h.renderRequest(w, r, pc, http.StatusOK, nil)
}

// renderRequest shows a captured request; form, when set, is a replay form
// that failed and is shown again as it was sent.
func (h *Handler) renderRequest(w http.ResponseWriter, r *http.Request, pc *projectCtx, status int, form *replayForm) {
	pid := pc.project.ID
	rq, err := h.store.Request(r.Context(), pid, r.PathValue("rid"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	e, err := h.store.Endpoint(r.Context(), pid, rq.EndpointID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	base := requestURL(pid, rq.ID)
	v := requestView{
		ID: rq.ID, Method: rq.Method, Path: rq.Path, Query: rq.Query, Size: size(rq.Size), RemoteAddr: rq.RemoteAddr,
		Received: timeOf(rq.ReceivedAt), EndpointName: e.Name, EndpointURL: endpointURL(pid, e.ID),
		SettingsURL: endpointURL(pid, e.ID) + "/settings", DeleteURL: base + "/delete",
	}
	if rq.ContentType != nil {
		v.ContentType = *rq.ContentType
	}
	for _, hd := range rq.Headers {
		for _, val := range hd.Values {
			v.Headers = append(v.Headers, fieldRow{Name: hd.Name, Value: val})
		}
	}
	if params, err := url.ParseQuery(rq.Query); err == nil {
		for _, kv := range strings.Split(rq.Query, "&") {
			k, _, _ := strings.Cut(kv, "=")
			if name, err := url.QueryUnescape(k); err == nil && params.Has(name) {
				for _, val := range params[name] {
					v.QueryParams = append(v.QueryParams, fieldRow{Name: name, Value: val})
				}
				delete(params, name)
			}
		}
	}
	v.Body = bodyViewOf(rq.Body, v.ContentType, r.URL.Query().Get("view"), base)
	for i := len(rq.Deliveries) - 1; i >= 0; i-- {
		v.Deliveries = append(v.Deliveries, deliveryRowOf(rq.Deliveries[i]))
	}
	if h.cfg.Replayer != nil {
		if form == nil {
			form = replayFormOf(rq)
		}
		form.URL = base + "/replay"
		if e.TargetURL != nil {
			form.Target = *e.TargetURL
		}
		v.Replay = form
	}
	l, err := h.frame(w, r, pc.session, pc, rq.Method+" "+rq.Path, "captures", e.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	l.Page = v
	h.render(w, r, status, "request", l)
}

// bodyViewOf chooses how to show a body: JSON pretty-printed, text as it
// is, anything else as a hex dump or base64.
func bodyViewOf(body []byte, contentType, view, base string) bodyView {
	b := bodyView{DownloadURL: base + "/body", HexURL: base + "?view=hex", Base64URL: base + "?view=base64"}
	switch {
	case len(body) == 0:
		b.Kind = "empty"
	case utf8.Valid(body):
		shown, cut := bytesPreview(body, maxBodyShown)
		b.Kind, b.Text, b.Truncated = "text", string(shown), cut
		var pretty bytes.Buffer
		if !cut && json.Valid(body) && json.Indent(&pretty, body, "", "  ") == nil {
			b.Kind, b.Text = "json", pretty.String()
		}
	default:
		b.Kind = "binary"
		shown, cut := body, false
		if len(shown) > maxBinaryShown {
			shown, cut = shown[:maxBinaryShown], true
		}
		b.Truncated = cut
		b.View = "hex"
		if view == "base64" {
			b.View = "base64"
			b.Text = wrap(base64.StdEncoding.EncodeToString(shown), 76)
		} else {
			b.Text = hex.Dump(shown)
		}
	}
	return b
}

func wrap(s string, width int) string {
	var out strings.Builder
	for len(s) > width {
		out.WriteString(s[:width] + "\n")
		s = s[width:]
	}
	out.WriteString(s)
	return out.String()
}

func deliveryRowOf(d store.Delivery) deliveryRow {
	row := deliveryRow{Kind: d.Kind, TargetURL: d.TargetURL, Status: d.Status, OK: d.Status == store.DeliveryDelivered,
		Duration: strconv.FormatInt(d.DurationMS, 10) + " ms", Created: timeOf(d.CreatedAt)}
	if d.ResponseStatus != nil {
		row.ResponseStatus = strconv.Itoa(*d.ResponseStatus)
	}
	if d.Error != nil {
		row.Error = *d.Error
	}
	return row
}

func replayFormOf(rq store.Request) *replayForm {
	f := &replayForm{Method: rq.Method, Path: rq.Path, Query: rq.Query, BodyEditable: utf8.Valid(rq.Body)}
	var hs strings.Builder
	for _, hd := range rq.Headers {
		for _, val := range hd.Values {
			hs.WriteString(hd.Name + ": " + val + "\n")
		}
	}
	f.Headers = hs.String()
	if f.BodyEditable {
		f.Body = string(rq.Body)
	}
	return f
}

func (h *Handler) requestBody(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	rq, err := h.store.Request(r.Context(), pc.project.ID, r.PathValue("rid"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	download(w, rq.ID+".bin", "application/octet-stream", rq.Body)
}

func (h *Handler) deleteRequest(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	pid := pc.project.ID
	rq, err := h.store.Request(r.Context(), pid, r.PathValue("rid"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.store.DeleteRequest(r.Context(), pid, rq.ID); err != nil {
		h.fail(w, r, err)
		return
	}
	redirect(w, r, endpointURL(pid, rq.EndpointID), "Deleted the request.")
}

// replayRequest sends the request again with the form's edits: fields that
// differ from the captured request become edits; a captured header left
// out of the form is removed.
func (h *Handler) replayRequest(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	if h.cfg.Replayer == nil {
		h.errorPage(w, r, http.StatusNotFound, "Replay is not available on this server.")
		return
	}
	pid := pc.project.ID
	rq, err := h.store.Request(r.Context(), pid, r.PathValue("rid"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	unCRLF := func(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }
	form := &replayForm{
		Method: strings.TrimSpace(r.PostFormValue("method")), Path: strings.TrimSpace(r.PostFormValue("path")),
		Query: strings.TrimSpace(r.PostFormValue("query")), Headers: unCRLF(r.PostFormValue("headers")),
		Body: unCRLF(r.PostFormValue("body")), BodyEditable: utf8.Valid(rq.Body),
	}
	edits, err := replayEditsOf(rq, form)
	if err != nil {
		_, form.Error = userMessage(err)
		h.renderRequest(w, r, pc, http.StatusBadRequest, form)
		return
	}
	d, err := h.cfg.Replayer.Replay(r.Context(), pid, rq.ID, edits)
	if err != nil {
		status, msg := userMessage(err)
		if status == http.StatusInternalServerError {
			msg = err.Error()
		}
		form.Error = "Replay failed: " + msg
		h.renderRequest(w, r, pc, http.StatusBadGateway, form)
		return
	}
	result := "Replayed to " + d.TargetURL + ": "
	if d.ResponseStatus != nil {
		result += "status " + strconv.Itoa(*d.ResponseStatus)
	} else if d.Error != nil {
		result += *d.Error
	}
	redirect(w, r, requestURL(pid, rq.ID), result+" in "+strconv.FormatInt(d.DurationMS, 10)+" ms.")
}

func replayEditsOf(rq store.Request, f *replayForm) (ReplayEdits, error) {
	var ed ReplayEdits
	if f.Method != rq.Method {
		if !store.ValidHeaderName(f.Method) {
			return ed, fmt.Errorf("%w: the method must be an HTTP method such as POST", store.ErrInvalid)
		}
		ed.Method = &f.Method
	}
	if f.Path != rq.Path {
		ed.Path = &f.Path
	}
	if f.Query != rq.Query {
		q := strings.TrimPrefix(f.Query, "?")
		ed.Query = &q
	}
	captured := map[string]string{}
	for _, hd := range rq.Headers {
		captured[http.CanonicalHeaderKey(hd.Name)] = strings.Join(hd.Values, ", ")
	}
	lines, err := headerLinesOf(f.Headers)
	if err != nil {
		return ed, err
	}
	sent := map[string]string{}
	for _, h := range lines {
		if prev, ok := sent[h.Name]; ok {
			h.Value = prev + ", " + h.Value
		}
		sent[h.Name] = h.Value
	}
	ed.Headers = map[string]*string{}
	for name, value := range sent {
		if captured[name] != value {
			ed.Headers[name] = &value
		}
	}
	for name := range captured {
		if _, ok := sent[name]; !ok {
			ed.Headers[name] = nil
		}
	}
	if f.BodyEditable && f.Body != strings.ReplaceAll(string(rq.Body), "\r\n", "\n") {
		ed.Body = []byte(f.Body)
	}
	return ed, nil
}
