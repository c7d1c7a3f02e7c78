package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/store"
)

const maxJSONBody = 32 << 20

// decodeJSON reads a strict JSON body: unknown fields and trailing data are
// errors. An empty body leaves v as it is.
func decodeJSON(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxJSONBody+1))
	if err != nil {
		return contract.Invalid(map[string]string{"body": "could not read the body: " + err.Error()})
	}
	if len(body) > maxJSONBody {
		return contract.Invalid(map[string]string{"body": "larger than 32 MiB"})
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		field := "body"
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			field = typeErr.Field
		}
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return contract.Invalid(map[string]string{strings.Trim(name, `"`): "unknown field"})
		}
		return contract.Invalid(map[string]string{field: "bad JSON: " + err.Error()})
	}
	if dec.More() {
		return contract.Invalid(map[string]string{"body": "bad JSON: data after the object"})
	}
	return nil
}

func (a *API) replayRequest(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller, _ *query) error {
	var edits contract.ReplayEdits
	if err := decodeJSON(r, &edits); err != nil {
		return err
	}
	res, err := a.replay.Replay(r.Context(), c.project.ID, ps.ByName("id"), edits)
	if err != nil {
		return err
	}
	out := contract.Replay{Delivery: renderDelivery(res.Delivery),
		Request: contract.SentRequest{Method: res.Sent.Method, URL: res.Sent.URL, Headers: res.Sent.Header}}
	if resp := res.Response; resp != nil {
		out.Response = &contract.ReplayResponse{Status: resp.Status, Headers: resp.Header, Truncated: resp.Truncated}
		out.Response.Body, out.Response.BodyBase64 = contract.SplitBody(resp.Body)
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (a *API) recordDelivery(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller, _ *query) error {
	var rep contract.DeliveryReport
	if err := decodeJSON(r, &rep); err != nil {
		return err
	}
	bad := map[string]string{}
	if rep.TargetURL == nil || *rep.TargetURL == "" {
		bad["target_url"] = "required"
	} else if err := store.ValidateTarget(*rep.TargetURL); err != nil {
		bad["target_url"] = "must be an absolute http:// or https:// URL"
	}
	if rep.DurationMS == nil || *rep.DurationMS < 0 {
		bad["duration_ms"] = "required, a whole number of milliseconds ≥ 0"
	}
	if rep.ResponseStatus != nil && (*rep.ResponseStatus < 100 || *rep.ResponseStatus > 599) {
		bad["response_status"] = "must be an HTTP status from 100 to 599"
	}
	if rep.ResponseStatus == nil && (rep.Error == nil || *rep.Error == "") {
		bad["error"] = "required when there is no response_status"
	}
	if len(bad) > 0 {
		return contract.Invalid(bad)
	}
	d, err := a.store.AddDelivery(r.Context(), c.project.ID, ps.ByName("id"), store.NewDelivery{
		Kind: store.DeliveryForward, TargetURL: *rep.TargetURL, ResponseStatus: rep.ResponseStatus,
		Error: rep.Error, Duration: time.Duration(*rep.DurationMS) * time.Millisecond,
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, renderDelivery(d))
	return nil
}
