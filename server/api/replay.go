package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/server/weburl"
	"github.com/capturedev/capture/store"
)

// maxDeliveryBody bounds the body of POST /requests/{id}/deliveries: its
// capped fields, with room for JSON escapes.
const maxDeliveryBody = 64 << 10

// maxReplayBody bounds the body of POST /requests/{id}/replay for a plan:
// an edited body as large as the plan captures, in base64, with room for
// the other edits.
func maxReplayBody(p store.Plan) int64 { return p.RequestBodyBytes/3*4 + 1<<20 }

// decodeJSON reads a strict JSON body of at most limit bytes: unknown
// fields and trailing data are errors. An empty body leaves v as it is.
func decodeJSON(r *http.Request, v any, limit int64) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return contract.Invalid(map[string]string{"body": "could not read the body: " + err.Error()})
	}
	if int64(len(body)) > limit {
		return contract.Invalid(map[string]string{"body": "larger than " + strconv.FormatInt(limit, 10) + " bytes"})
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	// encoding/json would take both silently as U+FFFD, and a replay
	// would then send other bytes than the caller wrote.
	if !utf8.Valid(body) {
		return contract.Invalid(map[string]string{"body": "not valid UTF-8"})
	}
	if at := loneSurrogate(body); at >= 0 {
		return contract.Invalid(map[string]string{"body": fmt.Sprintf("bad JSON: the escape %s at byte %d is half of a UTF-16 surrogate pair", body[at:at+6], at)})
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			// Said in JSON's terms: Go's own names its types.
			field := typeErr.Field
			if field == "" {
				field = "body"
			}
			return contract.Invalid(map[string]string{field: "want " + jsonKind(typeErr.Type) + ", not " + article(typeErr.Value)})
		}
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return contract.Invalid(map[string]string{strings.Trim(name, `"`): "unknown field"})
		}
		return contract.Invalid(map[string]string{"body": "bad JSON: " + strings.TrimPrefix(err.Error(), "json: ")})
	}
	if dec.More() {
		return contract.Invalid(map[string]string{"body": "bad JSON: data after the object"})
	}
	return nil
}

// loneSurrogate returns where in the JSON text body a \uXXXX escape of a
// UTF-16 surrogate stands without its other half, or -1. Escapes appear
// only inside strings, so every backslash outside one is bad JSON that the
// decoder reports itself.
func loneSurrogate(body []byte) int {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(body) || body[i] != '\\' || body[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(body[i+2:i+6]), 16, 32)
		return rune(n), err == nil
	}
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		switch {
		case !ok:
			i++ // another escape: skip the character it escapes
		case r >= 0xD800 && r < 0xDC00:
			if low, ok := hex4(i + 6); !ok || low < 0xDC00 || low > 0xDFFF {
				return i
			}
			i += 11
		case r >= 0xDC00 && r <= 0xDFFF:
			return i
		default:
			i += 5
		}
	}
	return -1
}

// jsonKind names what JSON value a Go type is decoded from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another kind of value"
}

// article puts "a" or "an" before a JSON value's kind as encoding/json
// names it ("array", "number 1.5", "string").
func article(kind string) string {
	if kind != "" && strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}

func (a *API) replayRequest(w http.ResponseWriter, r *http.Request, ps httprouter.Params, c caller, _ *query) error {
	var edits contract.ReplayEdits
	if err := decodeJSON(r, &edits, maxReplayBody(c.project.Plan)); err != nil {
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
	if err := decodeJSON(r, &rep, maxDeliveryBody); err != nil {
		return err
	}
	bad := map[string]string{}
	switch {
	case rep.TargetURL == nil || *rep.TargetURL == "":
		bad["target_url"] = "required"
	case len(*rep.TargetURL) > contract.MaxDeliveryTargetURL:
		bad["target_url"] = "longer than " + strconv.Itoa(contract.MaxDeliveryTargetURL) + " bytes"
	case store.ValidateTarget(*rep.TargetURL) != nil:
		bad["target_url"] = "must be an absolute http:// or https:// URL"
	}
	if rep.DurationMS == nil || *rep.DurationMS < 0 || *rep.DurationMS > contract.MaxDeliveryDurationMS {
		bad["duration_ms"] = "required, a whole number of milliseconds from 0 to " + strconv.Itoa(contract.MaxDeliveryDurationMS)
	}
	if rep.ResponseStatus != nil && (*rep.ResponseStatus < 100 || *rep.ResponseStatus > 599) {
		bad["response_status"] = "must be an HTTP status from 100 to 599"
	}
	switch {
	case rep.ResponseStatus == nil && (rep.Error == nil || *rep.Error == ""):
		bad["error"] = "required when there is no response_status"
	case rep.Error != nil && len(*rep.Error) > contract.MaxDeliveryError:
		bad["error"] = "longer than " + strconv.Itoa(contract.MaxDeliveryError) + " bytes"
	}
	if len(bad) > 0 {
		return contract.Invalid(bad)
	}
	d, err := a.store.AddDelivery(r.Context(), c.project.ID, ps.ByName("id"), store.NewDelivery{
		// Kept as a URI, as replays' are, whatever the client wrote.
		Kind: store.DeliveryForward, TargetURL: contract.Clip(weburl.Escape(*rep.TargetURL), contract.MaxDeliveryTargetURL),
		ResponseStatus: rep.ResponseStatus,
		Error:          rep.Error, Duration: time.Duration(*rep.DurationMS) * time.Millisecond,
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, renderDelivery(d))
	return nil
}
