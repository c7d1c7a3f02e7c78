package web

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/capturedev/capture/store"
)

type requestView struct {
	ID, Method, Path, Query, ContentType, Size, RemoteAddr string
	Received                                               timeView
	EndpointID, EndpointName, EndpointURL, SettingsURL     string
	DeleteURL                                              string
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

// maxBodyShown bounds the body shown on the page; the download has it all.
const (
	maxBodyShown   = 1 << 20
	maxBinaryShown = 16 << 10
)

func (h *Handler) requestPage(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	h.renderRequest(w, r, pc, http.StatusOK, nil)
}

// renderRequest shows a captured request. form, when set, is the Replay
// form as it was just sent, with what came of it; otherwise the form
// holds the request as captured.
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
		Received: timeOf(rq.ReceivedAt), EndpointID: e.ID, EndpointName: e.Name, EndpointURL: endpointURL(pid, e.ID),
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
	v.Body = bodyViewOf(rq.Body, maxBodyShown, r.URL.Query().Get("view"))
	v.Body.DownloadURL, v.Body.HexURL, v.Body.Base64URL = base+"/body", base+"?view=hex", base+"?view=base64"
	for i := len(rq.Deliveries) - 1; i >= 0; i-- {
		v.Deliveries = append(v.Deliveries, deliveryRowOf(rq.Deliveries[i]))
	}
	if form == nil {
		form = replayFormOf(rq)
	}
	form.URL, form.ResetURL = base+"/replay#replay", base+"#replay"
	if e.TargetURL != nil {
		form.Target = *e.TargetURL
	}
	v.Replay = form
	h.show(w, r, pc.session, pc, status, page{template: "request", title: rq.Method + " " + rq.Path,
		section: "captures", current: e.ID, view: v})
}

// bodyViewOf chooses how to show a body: JSON pretty-printed, text as it
// is (up to max bytes), anything else as a hex dump or, when view asks for
// it, base64, of its first maxBinaryShown bytes.
func bodyViewOf(body []byte, max int, view string) bodyView {
	var b bodyView
	switch {
	case len(body) == 0:
		b.Kind = "empty"
	case utf8.Valid(body):
		shown, cut := bytesPreview(body, max)
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
	back := projectURL(pid, "endpoints")
	if endpoint := r.PostFormValue("endpoint"); endpoint != "" {
		back = endpointURL(pid, url.PathEscape(endpoint))
	}
	err := h.store.DeleteRequest(r.Context(), pid, r.PathValue("rid"))
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Another tab, client or a purge got there first.
		redirect(w, r, back, "The request was already deleted.")
	case err != nil:
		h.fail(w, r, err)
	default:
		redirect(w, r, back, "Deleted the request.")
	}
}
