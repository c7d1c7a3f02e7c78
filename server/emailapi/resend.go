package emailapi

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/mail"
	"reflect"
	"strconv"
	"strings"
)

// Resend: POST /emails, JSON with snake_case fields, Bearer credential,
// 200 {"id"}. Refusals are {"statusCode", "name", "message"}.
var resend = &provider{
	name:       "resend",
	title:      "Resend",
	route:      "POST /emails",
	credential: resendCredential,
	decode:     decodeResend,
	arrayBody:  true,
	reply: func(w http.ResponseWriter, out []*outgoing) {
		writeJSON(w, http.StatusOK, map[string]string{"id": out[0].id})
	},
	fail: resendFail,
}

// Resend's batch: POST /emails/batch, a JSON array of up to 100 emails
// without attachments or scheduled_at, answered {"data": [{"id"}, …]}. In
// the default strict validation the batch is stored whole or not at all;
// with X-Batch-Validation: permissive the valid emails are stored and the
// others listed in "errors" by index.
var resendBatch = &provider{
	name:       "resend",
	title:      "Resend batch",
	route:      "POST /emails/batch",
	credential: resendCredential,
	batch:      resendPermissive,
	batchBody:  true,
	decode:     decodeResendBatch,
	reply: func(w http.ResponseWriter, out []*outgoing) {
		data := []map[string]string{}
		var errs []map[string]any
		for i, o := range out {
			if o.err != nil {
				errs = append(errs, map[string]any{"index": i, "message": o.err.msg})
				continue
			}
			data = append(data, map[string]string{"id": o.id})
		}
		body := map[string]any{"data": data}
		if errs != nil {
			body["errors"] = errs
		}
		writeJSON(w, http.StatusOK, body)
	},
	fail: resendFail,
}

// resendPermissive reports whether a batch asks for permissive validation.
func resendPermissive(r *http.Request) bool {
	return strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Batch-Validation")), "permissive")
}

func resendCredential(r *http.Request) (credential, *apiError) {
	token, ok := bearer(r)
	if !ok {
		return credential{}, &apiError{kind: noCredential}
	}
	return credential{password: token}, nil
}

func resendFail(w http.ResponseWriter, e *apiError) {
	status, name, msg := http.StatusUnprocessableEntity, "validation_error", e.msg
	switch e.kind {
	case noCredential:
		status, name, msg = http.StatusUnauthorized, "missing_api_key", "Missing API key in the authorization header"
	case badCredential:
		status, name, msg = http.StatusForbidden, "invalid_api_key", "API key is invalid"
	case missing:
		name = "missing_required_field"
	case malformed:
		status = http.StatusBadRequest
	case tooLarge:
		status = http.StatusRequestEntityTooLarge
	case unavailable:
		status, name = http.StatusServiceUnavailable, "application_error"
	}
	if e.code != "" {
		name = e.code
	}
	writeJSON(w, status, map[string]any{"statusCode": status, "name": name, "message": msg})
}

const (
	resendMaxRecipients = 50
	resendMaxBatch      = 100
)

// stringOrList is a field that takes an address or a list of them.
type stringOrList []string

func (s *stringOrList) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		if one != "" {
			*s = []string{one}
		}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		// encoding/json fills in which field this was.
		return &json.UnmarshalTypeError{Value: "value", Type: reflect.TypeFor[[]string]()}
	}
	*s = list
	return nil
}

type resendRequest struct {
	From        string            `json:"from"`
	To          stringOrList      `json:"to"`
	Subject     string            `json:"subject"`
	Cc          stringOrList      `json:"cc"`
	Bcc         stringOrList      `json:"bcc"`
	ReplyTo     stringOrList      `json:"reply_to"`
	HTML        *string           `json:"html"`
	Text        *string           `json:"text"`
	Headers     map[string]string `json:"headers"`
	Attachments []struct {
		// content is base64 text or, as Resend takes a Node Buffer and
		// resend-go sends its []byte (BytesToIntArray), an array of
		// byte values.
		Content     json.RawMessage `json:"content"`
		Filename    string          `json:"filename"`
		Path        string          `json:"path"`
		ContentType string          `json:"content_type"`
		ContentID   string          `json:"content_id"`
		// inline_content_id is resend-go's deprecated name for content_id,
		// which it still sends.
		InlineContentID string `json:"inline_content_id"`
	} `json:"attachments"`
	Tags []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"tags"`
	ScheduledAt string `json:"scheduled_at"`
	Template    *struct {
		ID        string          `json:"id"`
		Variables json.RawMessage `json:"variables"`
	} `json:"template"`
	TopicID string `json:"topic_id"`
}

func decodeResend(r *http.Request, body []byte, _ *budget) ([]*outgoing, *apiError) {
	var req resendRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, jsonError(err)
	}
	o, apiErr := req.outgoing(r)
	if apiErr != nil {
		return nil, apiErr
	}
	return []*outgoing{o}, nil
}

func decodeResendBatch(r *http.Request, body []byte, b *budget) ([]*outgoing, *apiError) {
	var reqs []resendRequest
	if err := json.Unmarshal(body, &reqs); err != nil {
		return nil, jsonError(err)
	}
	switch n := len(reqs); {
	case n == 0:
		return nil, errInvalid("body", "The batch must hold at least one email.")
	case n > resendMaxBatch:
		return nil, errInvalid("body", "Too many emails in the batch: %d; a batch may hold at most %d.", n, resendMaxBatch)
	}
	permissive := resendPermissive(r)
	out := make([]*outgoing, len(reqs))
	for i, req := range reqs {
		o, apiErr := req.batchItem(r)
		if apiErr == nil {
			apiErr = b.fits(o)
		}
		if apiErr == nil {
			apiErr = b.spend(o)
		}
		if apiErr != nil {
			// Resend names the email at fault by its index.
			apiErr.msg = fmt.Sprintf("emails[%d]: %s", i, apiErr.msg)
			if apiErr.field != "" {
				apiErr.field = fmt.Sprintf("emails[%d].%s", i, apiErr.field)
			}
			if !permissive {
				return nil, apiErr
			}
			o = &outgoing{err: apiErr}
		}
		out[i] = o
	}
	return out, nil
}

// batchItem builds one email of a batch, which may not carry what the
// batch route does not take.
func (req *resendRequest) batchItem(r *http.Request) (*outgoing, *apiError) {
	if len(req.Attachments) > 0 {
		return nil, &apiError{kind: invalid, code: "invalid_attachment", field: "attachments",
			msg: "Attachments are not supported in batch emails; send this one through POST /emails."}
	}
	if req.ScheduledAt != "" {
		return nil, errInvalid("scheduled_at", "`scheduled_at` is not supported in batch emails; send this one through POST /emails.")
	}
	return req.outgoing(r)
}

// outgoing builds the message of one email.
func (req *resendRequest) outgoing(r *http.Request) (*outgoing, *apiError) {
	e := &email{}
	var apiErr *apiError
	if strings.TrimSpace(req.From) == "" {
		return nil, errMissing("from", "Missing `from` field.")
	}
	if e.From, apiErr = parseAddress("from", req.From); apiErr != nil {
		return nil, resendInvalidAddress("from")
	}
	if len(req.To) == 0 {
		return nil, errMissing("to", "Missing `to` field.")
	}
	for _, f := range []struct {
		name string
		list []string
		dst  *[]mail.Address
	}{{"to", req.To, &e.To}, {"cc", req.Cc, &e.Cc}, {"bcc", req.Bcc, &e.Bcc}, {"reply_to", req.ReplyTo, &e.ReplyTo}} {
		for _, s := range f.list {
			a, apiErr := parseAddress(f.name, s)
			if apiErr != nil {
				return nil, resendInvalidAddress(f.name)
			}
			*f.dst = append(*f.dst, a)
		}
	}
	if len(e.To) > resendMaxRecipients {
		return nil, errInvalid("to", "Too many recipients in `to`: at most %d.", resendMaxRecipients)
	}
	if req.Subject == "" && req.Template == nil {
		return nil, errMissing("subject", "Missing `subject` field.")
	}
	e.Subject = req.Subject
	e.addBody("text/plain", nonEmpty(req.Text))
	e.addBody("text/html", nonEmpty(req.HTML))
	if len(e.Bodies) == 0 && req.Template == nil {
		return nil, errMissing("html", "Missing `html` or `text` field.")
	}
	for _, name := range sortedKeys(req.Headers) {
		if apiErr := checkHeader("headers", name); apiErr != nil {
			return nil, apiErr
		}
		e.Headers = append(e.Headers, header{name, req.Headers[name]})
	}
	for i, a := range req.Attachments {
		field := fmt.Sprintf("attachments[%d]", i)
		if a.Path != "" {
			// Resend downloads the file; capture fetches nothing from the
			// network on a sender's behalf.
			return nil, &apiError{kind: invalid, code: "invalid_attachment", field: field + ".path",
				msg: "capture does not download attachments by `path`; send the file's `content` instead."}
		}
		if len(a.Content) == 0 || string(a.Content) == "null" {
			return nil, &apiError{kind: invalid, code: "invalid_attachment", field: field,
				msg: "Attachment must have either a `content` or `path`."}
		}
		cid := strings.Trim(a.ContentID, "<>")
		if legacy := strings.Trim(a.InlineContentID, "<>"); legacy != "" {
			if cid != "" && cid != legacy {
				return nil, errInvalid(field+".inline_content_id",
					"`%s.inline_content_id` (%q) differs from `%s.content_id` (%q); give one.", field, legacy, field, cid)
			}
			cid = legacy
		}
		att := attachment{Filename: cmp.Or(a.Filename, "attachment"), ContentType: a.ContentType, ContentID: cid, Inline: cid != ""}
		var apiErr *apiError
		if a.Content[0] == '[' {
			att, apiErr = resendByteArray(att, a.Content, field+".content", field+".content_type")
		} else {
			var content string
			if json.Unmarshal(a.Content, &content) != nil {
				return nil, errInvalid(field+".content", "%s.content: expected base64 text or an array of byte values", field)
			}
			att, apiErr = decodeAttachment(att, content, field+".content", field+".content_type")
		}
		if apiErr != nil {
			return nil, apiErr
		}
		e.Attachments = append(e.Attachments, att)
	}
	for i, t := range req.Tags {
		for _, s := range []string{t.Name, t.Value} {
			if !resendTagText(s) {
				return nil, errInvalid(fmt.Sprintf("tags[%d]", i),
					"Tags should only contain ASCII letters, numbers, underscores, or dashes, up to 256 characters: %q.", s)
			}
		}
		e.capture("Tag", t.Name+"="+t.Value)
	}
	// Resend takes natural language here ("in 1 hour") as well as ISO 8601,
	// so the value is kept as given.
	e.capture("Send-At", req.ScheduledAt)
	if req.Template != nil {
		e.capture("Template", req.Template.ID)
		e.captureJSON("Template-Data", req.Template.Variables)
	}
	e.capture("Topic", req.TopicID)
	e.capture("Idempotency-Key", r.Header.Get("Idempotency-Key"))
	return e.outgoing("resend"), nil
}

// resendByteArray completes a from content given as a JSON array of byte
// values, each an integer from 0 to 255, as Resend reads a Buffer. The
// array is valid JSON (the body was decoded), so it is read in place rather
// than decoded value by value.
func resendByteArray(a attachment, raw json.RawMessage, contentField, typeField string) (attachment, *apiError) {
	data := make([]byte, 0, len(raw)/2)
	i := 1 // past '['
	for n := 0; ; n++ {
		for i < len(raw) && isJSONSpace(raw[i]) {
			i++
		}
		if i < len(raw) && raw[i] == ']' && n == 0 {
			break
		}
		start := i
		for i < len(raw) && strings.IndexByte("0123456789+-.eE", raw[i]) >= 0 {
			i++
		}
		v, ok := byteValue(raw[start:i])
		if !ok {
			return a, errInvalid(fmt.Sprintf("%s[%d]", contentField, n),
				"%s[%d]: expected a byte value, an integer from 0 to 255", contentField, n)
		}
		data = append(data, v)
		for i < len(raw) && isJSONSpace(raw[i]) {
			i++
		}
		if i >= len(raw) || raw[i] == ']' {
			break
		}
		i++ // ','
	}
	return withData(a, data, typeField)
}

// byteValue reads a JSON number that must be an integer from 0 to 255
// ("7", and as JSON allows, "7.0" or "7e0"); it is empty when the value
// is not a number.
func byteValue(num []byte) (byte, bool) {
	if len(num) > 0 && len(num) <= 3 && !bytes.ContainsFunc(num, func(r rune) bool { return r < '0' || r > '9' }) {
		v, _ := strconv.Atoi(string(num))
		return byte(v), v <= 255
	}
	v, err := strconv.ParseFloat(string(num), 64)
	if err != nil || v < 0 || v > 255 || v != math.Trunc(v) {
		return 0, false
	}
	return byte(v), true
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func resendInvalidAddress(field string) *apiError {
	return errInvalid(field, "Invalid `%s` field. The email address needs to follow the `email@example.com` or `Name <email@example.com>` format.", field)
}

func resendTagText(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
