package emailapi

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Postmark: POST /email and POST /email/batch, and their template
// counterparts POST /email/withTemplate and POST /email/batchWithTemplates;
// JSON with PascalCase fields, X-Postmark-Server-Token credential.
// Refusals are 422 with a Postmark error code; a batch answers 200 with
// one result per message.

// Postmark's API error codes.
const (
	pmBadToken     = 10
	pmMaintenance  = 100
	pmInvalidEmail = 300
	pmInvalidJSON  = 402
	pmWrongJSON    = 403
	pmTooManyBatch = 410
)

const (
	pmMaxBatch      = 500
	pmMaxRecipients = 50
)

var postmarkEmail = &provider{
	name:       "postmark",
	title:      "Postmark",
	route:      "POST /email",
	credential: postmarkCredential,
	decode: func(_ *http.Request, body []byte, _ *budget) ([]*outgoing, *apiError) {
		return decodePostmark(body, false)
	},
	reply: postmarkReply,
	fail:  postmarkFail,
}

var postmarkTemplate = &provider{
	name:       "postmark",
	title:      "Postmark template",
	route:      "POST /email/withTemplate",
	credential: postmarkCredential,
	decode: func(_ *http.Request, body []byte, _ *budget) ([]*outgoing, *apiError) {
		return decodePostmark(body, true)
	},
	reply: postmarkReply,
	fail:  postmarkFail,
}

var postmarkBatch = &provider{
	name:       "postmark",
	title:      "Postmark batch",
	route:      "POST /email/batch",
	credential: postmarkCredential,
	batch:      everyMessage,
	batchBody:  true,
	decode: func(_ *http.Request, body []byte, b *budget) ([]*outgoing, *apiError) {
		var ms []pmMessage
		if err := json.Unmarshal(body, &ms); err != nil {
			return nil, jsonError(err)
		}
		return postmarkEach(ms, false, b)
	},
	reply: postmarkBatchReply,
	fail:  postmarkFail,
}

var postmarkBatchTemplates = &provider{
	name:       "postmark",
	title:      "Postmark template batch",
	route:      "POST /email/batchWithTemplates",
	credential: postmarkCredential,
	batch:      everyMessage,
	batchBody:  true,
	decode: func(_ *http.Request, body []byte, b *budget) ([]*outgoing, *apiError) {
		var req struct{ Messages []pmMessage }
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, jsonError(err)
		}
		if len(req.Messages) == 0 {
			return nil, errMissing("Messages", "Messages must hold at least one message.")
		}
		return postmarkEach(req.Messages, true, b)
	},
	reply: postmarkBatchReply,
	fail:  postmarkFail,
}

// decodePostmark reads a single message's request.
func decodePostmark(body []byte, templated bool) ([]*outgoing, *apiError) {
	var m pmMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, jsonError(err)
	}
	o, apiErr := m.outgoing(templated)
	if apiErr != nil {
		return nil, apiErr
	}
	return []*outgoing{o}, nil
}

func postmarkReply(w http.ResponseWriter, out []*outgoing) {
	writeJSON(w, http.StatusOK, pmResult(out[0]))
}

// postmarkEach builds a batch's messages; one message's refusal is its
// own result, not the batch's: one over the plan's message limit too, and
// one past what the messages of a request may total (b), which spends
// nothing, so a smaller one after it may still fit.
func postmarkEach(ms []pmMessage, templated bool, b *budget) ([]*outgoing, *apiError) {
	if len(ms) > pmMaxBatch {
		return nil, &apiError{kind: tooMany, code: fmt.Sprint(pmTooManyBatch),
			msg: fmt.Sprintf("Too many batch messages: %d; a batch may hold at most %d.", len(ms), pmMaxBatch)}
	}
	out := make([]*outgoing, len(ms))
	for i, m := range ms {
		o, apiErr := m.outgoing(templated)
		if apiErr == nil {
			apiErr = b.fits(o)
		}
		if apiErr == nil {
			apiErr = b.spend(o)
		}
		if apiErr != nil {
			o = &outgoing{err: apiErr, echo: m.To}
		}
		out[i] = o
	}
	return out, nil
}

func postmarkBatchReply(w http.ResponseWriter, out []*outgoing) {
	results := make([]any, len(out))
	for i, o := range out {
		if o.err != nil {
			code, _ := pmStatus(o.err)
			results[i] = map[string]any{"ErrorCode": code, "Message": o.err.msg}
			continue
		}
		results[i] = pmResult(o)
	}
	writeJSON(w, http.StatusOK, results)
}

func postmarkCredential(r *http.Request) (credential, *apiError) {
	token := strings.TrimSpace(r.Header.Get("X-Postmark-Server-Token"))
	if token == "" {
		return credential{}, &apiError{kind: noCredential}
	}
	return credential{password: token}, nil
}

func pmResult(o *outgoing) map[string]any {
	return map[string]any{"To": o.echo, "SubmittedAt": time.Now().Format(time.RFC3339Nano),
		"MessageID": o.id, "ErrorCode": 0, "Message": "OK"}
}

// pmStatus maps a refusal to Postmark's error code and HTTP status.
func pmStatus(e *apiError) (int, int) {
	switch e.kind {
	case noCredential, badCredential:
		return pmBadToken, http.StatusUnauthorized
	case malformed:
		return pmInvalidJSON, http.StatusUnprocessableEntity
	case mistyped:
		return pmWrongJSON, http.StatusUnprocessableEntity
	case tooMany:
		return pmTooManyBatch, http.StatusUnprocessableEntity
	case tooLarge:
		return pmInvalidEmail, http.StatusRequestEntityTooLarge
	case unavailable:
		return pmMaintenance, http.StatusServiceUnavailable
	}
	return pmInvalidEmail, http.StatusUnprocessableEntity
}

func postmarkFail(w http.ResponseWriter, e *apiError) {
	code, status := pmStatus(e)
	msg := e.msg
	switch e.kind {
	case noCredential:
		msg = "No Account or Server API tokens were supplied in the HTTP headers. " +
			"Please add a header for either X-Postmark-Server-Token or X-Postmark-Account-Token."
	case badCredential:
		msg = "The Server Token you provided in the X-Postmark-Server-Token request header was invalid. " +
			"Please verify that you are using a valid token."
	}
	writeJSON(w, status, map[string]any{"ErrorCode": code, "Message": msg})
}

type pmMessage struct {
	From        string
	To          string
	Cc          string
	Bcc         string
	Subject     string
	Tag         string
	HtmlBody    *string
	TextBody    *string
	ReplyTo     string
	Headers     []struct{ Name, Value string }
	TrackOpens  *bool
	TrackLinks  string
	Attachments []struct {
		Name        string
		Content     string
		ContentType string
		ContentID   string
	}
	// Metadata's values are strings, but numbers and booleans are taken
	// too: mrz1836/postmark types it map[string]interface{}.
	Metadata      map[string]json.RawMessage
	MessageStream string

	// The template fields, of /email/withTemplate and
	// /email/batchWithTemplates.
	TemplateId    json.Number
	TemplateAlias string
	TemplateModel json.RawMessage
	InlineCss     *bool
}

// Postmark's limits on custom metadata (its Custom metadata FAQ).
const (
	pmMaxMetadata      = 10
	pmMaxMetadataName  = 20
	pmMaxMetadataValue = 80
)

// pmMetadata checks Metadata as Postmark does and gives its values as
// text: a string as it is, a number or boolean as its JSON text, as
// Postmark keeps every value a string.
func pmMetadata(raw map[string]json.RawMessage) (map[string]string, *apiError) {
	if len(raw) > pmMaxMetadata {
		return nil, errInvalid("Metadata", "Metadata has %d fields; a message may have at most %d.", len(raw), pmMaxMetadata)
	}
	meta := make(map[string]string, len(raw))
	seen := make(map[string]string, len(raw))
	for _, name := range sortedKeys(raw) {
		field := "Metadata." + name
		if n := utf8.RuneCountInString(name); n > pmMaxMetadataName {
			return nil, errInvalid(field, "Metadata field name %q is %d characters long; at most %d are allowed.", name, n, pmMaxMetadataName)
		}
		if other, ok := seen[strings.ToLower(name)]; ok {
			return nil, errInvalid(field, "Metadata field names %q and %q differ only in case; duplicate names are not allowed.", other, name)
		}
		seen[strings.ToLower(name)] = name
		v := bytes.TrimSpace(raw[name])
		var value string
		switch {
		case len(v) > 0 && v[0] == '"':
			if json.Unmarshal(v, &value) != nil {
				return nil, errInvalid(field, "Metadata field %q is not a valid string.", name)
			}
		case len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9'), string(v) == "true", string(v) == "false":
			value = string(v)
		default:
			return nil, errInvalid(field, "Metadata field %q must be a string, number or boolean.", name)
		}
		if n := utf8.RuneCountInString(value); n > pmMaxMetadataValue {
			return nil, errInvalid(field, "Metadata field %q has a value %d characters long; at most %d are allowed.", name, n, pmMaxMetadataValue)
		}
		meta[name] = value
	}
	return meta, nil
}

// outgoing builds the message. A templated one names a template instead
// of a subject and bodies: capture has no templates to render, so the
// template and its model are kept as X-Capture-Template and
// X-Capture-Template-Data, and the message has what the request gave.
func (m *pmMessage) outgoing(templated bool) (*outgoing, *apiError) {
	e := &email{}
	var apiErr *apiError
	if strings.TrimSpace(m.From) == "" {
		return nil, errMissing("From", "Invalid 'From' address: a From address is required.")
	}
	if e.From, apiErr = parseAddress("From", m.From); apiErr != nil {
		return nil, pmInvalidAddress("From", m.From)
	}
	if e.To, apiErr = parseAddressList("To", m.To); apiErr != nil {
		return nil, pmInvalidAddress("To", m.To)
	}
	if e.Cc, apiErr = parseAddressList("Cc", m.Cc); apiErr != nil {
		return nil, pmInvalidAddress("Cc", m.Cc)
	}
	if e.Bcc, apiErr = parseAddressList("Bcc", m.Bcc); apiErr != nil {
		return nil, pmInvalidAddress("Bcc", m.Bcc)
	}
	if e.ReplyTo, apiErr = parseAddressList("ReplyTo", m.ReplyTo); apiErr != nil {
		return nil, pmInvalidAddress("ReplyTo", m.ReplyTo)
	}
	switch n := len(e.To) + len(e.Cc) + len(e.Bcc); {
	case n == 0:
		return nil, errMissing("To", "Zero recipients specified")
	case n > pmMaxRecipients:
		return nil, errInvalid("To", "You may send to at most %d recipients (To, Cc and Bcc together); this message has %d.", pmMaxRecipients, n)
	}
	if templated {
		if apiErr := m.template(e); apiErr != nil {
			return nil, apiErr
		}
	} else {
		if strings.TrimSpace(m.Subject) == "" {
			return nil, errMissing("Subject", "A Subject is required.")
		}
		if (m.TextBody == nil || *m.TextBody == "") && (m.HtmlBody == nil || *m.HtmlBody == "") {
			return nil, errMissing("TextBody", "Provide either email TextBody or HtmlBody or both.")
		}
	}
	e.Subject = m.Subject
	e.addBody("text/plain", nonEmpty(m.TextBody))
	e.addBody("text/html", nonEmpty(m.HtmlBody))

	for i, h := range m.Headers {
		if apiErr := checkHeader(fmt.Sprintf("Headers[%d].Name", i), h.Name); apiErr != nil {
			return nil, apiErr
		}
		e.Headers = append(e.Headers, header{h.Name, h.Value})
	}
	for i, a := range m.Attachments {
		field := fmt.Sprintf("Attachments[%d]", i)
		if a.Name == "" {
			return nil, errMissing(field+".Name", field+": an attachment needs a Name.")
		}
		if a.ContentType == "" {
			return nil, errMissing(field+".ContentType", field+": an attachment needs a ContentType.")
		}
		cid := strings.TrimPrefix(strings.Trim(a.ContentID, "<>"), "cid:")
		att, apiErr := decodeAttachment(attachment{Filename: a.Name, ContentType: a.ContentType, ContentID: cid, Inline: cid != ""},
			a.Content, field+".Content", field+".ContentType")
		if apiErr != nil {
			return nil, apiErr
		}
		e.Attachments = append(e.Attachments, att)
	}

	switch m.TrackLinks {
	case "", "None", "HtmlAndText", "HtmlOnly", "TextOnly":
	default:
		return nil, errInvalid("TrackLinks", "TrackLinks must be None, HtmlAndText, HtmlOnly or TextOnly, not %q.", m.TrackLinks)
	}
	e.capture("Tag", m.Tag)
	if len(m.Metadata) > 0 {
		meta, apiErr := pmMetadata(m.Metadata)
		if apiErr != nil {
			return nil, apiErr
		}
		e.captureValue("Metadata", meta)
	}
	if m.TrackOpens != nil || m.TrackLinks != "" {
		tracking := map[string]any{}
		if m.TrackOpens != nil {
			tracking["TrackOpens"] = *m.TrackOpens
		}
		if m.TrackLinks != "" {
			tracking["TrackLinks"] = m.TrackLinks
		}
		e.captureValue("Tracking", tracking)
	}
	e.capture("Message-Stream", m.MessageStream)
	o := e.outgoing("postmark")
	o.echo = m.To
	return o, nil
}

// template checks a templated message's template fields and records them.
func (m *pmMessage) template(e *email) *apiError {
	id := m.TemplateId.String()
	switch {
	case id == "" && m.TemplateAlias == "":
		return errMissing("TemplateId", "Either TemplateId or TemplateAlias is required to send with a template.")
	case id != "" && m.TemplateAlias != "":
		return errInvalid("TemplateId", "Use either TemplateId or TemplateAlias, not both.")
	case id != "":
		if n, err := m.TemplateId.Int64(); err != nil || n <= 0 {
			return errInvalid("TemplateId", "TemplateId must be a positive whole number, not %s.", id)
		}
	}
	var model any
	if json.Unmarshal(m.TemplateModel, &model) != nil || model == nil {
		return errMissing("TemplateModel", "A TemplateModel object is required to send with a template.")
	}
	if _, ok := model.(map[string]any); !ok {
		return &apiError{kind: mistyped, field: "TemplateModel", msg: "TemplateModel must be a JSON object."}
	}
	e.capture("Template", cmp.Or(id, m.TemplateAlias))
	e.captureJSON("Template-Data", m.TemplateModel)
	if m.InlineCss != nil {
		e.capture("Inline-Css", strconv.FormatBool(*m.InlineCss))
	}
	return nil
}

func pmInvalidAddress(field, value string) *apiError {
	return errInvalid(field, "Invalid '%s' address: '%s'.", field, value)
}

func nonEmpty(s *string) *string {
	if s == nil || *s == "" {
		return nil
	}
	return s
}
