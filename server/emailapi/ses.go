package emailapi

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Amazon SES v2 SendEmail: POST /v2/email/outbound-emails, JSON (AWS
// restJson1), signed with AWS Signature Version 4. The access key id is
// the inbox id and the secret access key its SMTP password. Content is
// Simple (subject, bodies, headers, attachments), Raw (a whole MIME
// message, base64) or Template.
var ses = &provider{
	name:       "ses",
	title:      "Amazon SES v2",
	route:      "POST /v2/email/outbound-emails",
	credential: func(r *http.Request) (credential, *apiError) { return sesCredential(r, time.Now()) },
	decode:     decodeSES,
	reply: func(w http.ResponseWriter, out []*outgoing) {
		w.Header().Set("X-Amzn-Requestid", requestID())
		writeJSON(w, http.StatusOK, map[string]string{"MessageId": out[0].id})
	},
	fail: sesFail,
}

// SendBulkEmail: POST /v2/email/outbound-bulk-emails, one templated
// message for each BulkEmailEntry, answered with a result per entry. The
// request is checked whole before anything is stored.
var sesBulk = &provider{
	name:       "ses",
	title:      "Amazon SES v2 bulk",
	route:      "POST /v2/email/outbound-bulk-emails",
	credential: ses.credential,
	decode:     decodeSESBulk,
	reply: func(w http.ResponseWriter, out []*outgoing) {
		results := make([]map[string]string, len(out))
		for i, o := range out {
			results[i] = map[string]string{"Status": "SUCCESS", "MessageId": o.id}
		}
		w.Header().Set("X-Amzn-Requestid", requestID())
		writeJSON(w, http.StatusOK, map[string]any{"BulkEmailEntryResults": results})
	},
	fail: sesFail,
}

const (
	// AWS refuses signatures more than 15 minutes off its clock.
	sesMaxSkew       = 15 * time.Minute
	sesMaxRecipients = 50
	// SendBulkEmail takes at most this many entries.
	sesMaxBulkEntries = 50
	sigV4Algorithm    = "AWS4-HMAC-SHA256"
	sigV4TimeFormat   = "20060102T150405Z"
	sesService        = "ses"
)

func sesFail(w http.ResponseWriter, e *apiError) {
	status, code, msg := http.StatusBadRequest, "BadRequestException", e.msg
	switch e.kind {
	case noCredential:
		status, code, msg = http.StatusForbidden, "MissingAuthenticationTokenException", "Missing Authentication Token"
	case badCredential:
		status, code = http.StatusForbidden, "UnrecognizedClientException"
		if e.code == "" {
			msg = "The security token included in the request is invalid."
		}
	case tooLarge, tooMany:
		code = "MessageRejected"
	case unavailable:
		status, code = http.StatusServiceUnavailable, "ServiceUnavailableException"
	}
	if e.code != "" {
		code = e.code
	}
	// The AWS SDKs read the error's type from this header.
	w.Header().Set("X-Amzn-Errortype", code)
	w.Header().Set("X-Amzn-Requestid", requestID())
	writeJSON(w, status, map[string]string{"message": msg})
}

func requestID() string {
	var b [16]byte
	rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func errSignature(code, format string, args ...any) *apiError {
	return &apiError{kind: badCredential, code: code, msg: fmt.Sprintf(format, args...)}
}

// sesCredential reads the Signature V4 Authorization header. The
// signature itself is checked once the body is read (verify), with the
// inbox's password as the secret.
func sesCredential(r *http.Request, now time.Time) (credential, *apiError) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return credential{}, &apiError{kind: noCredential}
	}
	rest, ok := strings.CutPrefix(auth, sigV4Algorithm+" ")
	if !ok {
		return credential{}, errSignature("IncompleteSignatureException",
			"Authorization header must use the %s algorithm (AWS Signature Version 4).", sigV4Algorithm)
	}
	params := map[string]string{}
	for _, kv := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		params[k] = v
	}
	for _, p := range []string{"Credential", "SignedHeaders", "Signature"} {
		if params[p] == "" {
			return credential{}, errSignature("IncompleteSignatureException", "Authorization header requires '%s' parameter.", p)
		}
	}
	scope := strings.Split(params["Credential"], "/")
	if len(scope) != 5 || scope[0] == "" || scope[4] != "aws4_request" {
		return credential{}, errSignature("IncompleteSignatureException",
			"Credential must have the form <access key id>/<date>/<region>/ses/aws4_request.")
	}
	accessKey, region, service := scope[0], scope[2], scope[3]
	if service != sesService {
		return credential{}, errSignature("InvalidSignatureException", "Credential should be scoped to correct service: 'ses'.")
	}
	amzDate := r.Header.Get("X-Amz-Date")
	signedAt, err := time.Parse(sigV4TimeFormat, amzDate)
	if err != nil {
		return credential{}, errSignature("IncompleteSignatureException",
			"Authorization header requires existence of a valid 'X-Amz-Date' header.")
	}
	if d := now.Sub(signedAt); d > sesMaxSkew || d < -sesMaxSkew {
		return credential{}, errSignature("InvalidSignatureException",
			"Signature expired or not yet current: %s is more than 15 minutes from the server's time %s.",
			amzDate, now.UTC().Format(sigV4TimeFormat))
	}
	signedHeaders := strings.Split(params["SignedHeaders"], ";")
	verify := func(secret string, body []byte) *apiError {
		want, apiErr := signSES(r, body, signedHeaders, aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secret},
			region, signedAt)
		if apiErr != nil {
			return apiErr
		}
		if !hmac.Equal([]byte(want), []byte(params["Signature"])) {
			return errSignature("InvalidSignatureException", "The request signature we calculated does not match the signature you provided. "+
				"Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
		}
		return nil
	}
	return credential{inboxID: accessKey, verify: verify}, nil
}

// signSES recomputes a request's signature with the AWS SDK's own signer:
// a copy of the request carrying only the headers the client signed is
// signed again with the secret, and the signature is read back.
func signSES(r *http.Request, body []byte, signedHeaders []string, creds aws.Credentials, region string, at time.Time) (string, *apiError) {
	payloadHash := sha256.Sum256(body)
	hash := hex.EncodeToString(payloadHash[:])
	if claimed := r.Header.Get("X-Amz-Content-Sha256"); claimed == "UNSIGNED-PAYLOAD" {
		hash = claimed
	} else if claimed != "" && claimed != hash {
		return "", &apiError{kind: invalid, code: "XAmzContentSHA256Mismatch",
			msg: "The provided 'x-amz-content-sha256' header does not match what was computed."}
	}
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	req := &http.Request{Method: r.Method, URL: &u, Host: r.Host, Header: http.Header{}}
	for _, name := range signedHeaders {
		switch name {
		case "host":
		case "content-length":
			// The signer signs the length itself, and only when set.
			req.ContentLength = int64(len(body))
		default:
			if vs := r.Header.Values(name); len(vs) > 0 {
				req.Header[http.CanonicalHeaderKey(name)] = vs
			}
		}
	}
	// A new signer each time: the SDK's caches signing keys by access key
	// id alone, and a rotated password must stop working at once.
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hash, sesService, region, at); err != nil {
		return "", errSignature("IncompleteSignatureException", "The signature cannot be computed: %v", err)
	}
	_, sig, _ := strings.Cut(req.Header.Get("Authorization"), "Signature=")
	return sig, nil
}

type sesContent struct{ Data, Charset string }

// sesField is a name and a value: a header field or a message tag.
type sesField struct{ Name, Value string }

type sesAttachment struct {
	RawContent              string
	FileName                string
	ContentDisposition      string
	ContentDescription      string
	ContentId               string
	ContentTransferEncoding string
	ContentType             string
}

type sesDestination struct {
	ToAddresses, CcAddresses, BccAddresses []string
}

type sesTemplate struct {
	TemplateName, TemplateArn, TemplateData string
	TemplateContent                         *struct {
		Subject, Text, Html string
	}
	Headers     []sesField
	Attachments []sesAttachment
}

type sesRequest struct {
	FromEmailAddress string
	Destination      *sesDestination
	ReplyToAddresses []string
	Content          *struct {
		Simple *struct {
			Subject *sesContent
			Body    *struct {
				Text, Html *sesContent
			}
			Headers     []sesField
			Attachments []sesAttachment
		}
		Raw *struct {
			Data string
		}
		Template *sesTemplate
	}
	EmailTags                      []sesField
	ConfigurationSetName           string
	ListManagementOptions          json.RawMessage
	TenantName                     string
	FeedbackForwardingEmailAddress string
}

func decodeSES(_ *http.Request, b []byte, _ *budget) ([]*outgoing, *apiError) {
	var req sesRequest
	if err := json.Unmarshal(b, &req); err != nil {
		return nil, jsonError(err)
	}
	c := req.Content
	if c == nil {
		return nil, errMissing("Content", "Content is required.")
	}
	if n := btoi(c.Simple != nil) + btoi(c.Raw != nil) + btoi(c.Template != nil); n != 1 {
		return nil, errInvalid("Content", "Content must have exactly one of Simple, Raw or Template.")
	}
	e := &email{}
	if req.Destination != nil {
		if apiErr := req.Destination.fill(e, "Destination"); apiErr != nil {
			return nil, apiErr
		}
	}
	var apiErr *apiError
	if e.ReplyTo, apiErr = parseAddresses("ReplyToAddresses", req.ReplyToAddresses); apiErr != nil {
		return nil, apiErr
	}
	for i, t := range req.EmailTags {
		field := fmt.Sprintf("EmailTags[%d]", i)
		if apiErr := checkTag(field+".Name", field+".Value", t); apiErr != nil {
			return nil, apiErr
		}
		e.capture("Tag", t.Name+"="+t.Value)
	}
	e.capture("Configuration-Set", req.ConfigurationSetName)
	e.captureJSON("List-Management", req.ListManagementOptions)
	e.capture("Tenant", req.TenantName)

	if c.Raw != nil {
		return sesRaw(&req, e)
	}
	if e.From, apiErr = sesSender(req.FromEmailAddress); apiErr != nil {
		return nil, apiErr
	}
	if len(e.To)+len(e.Cc)+len(e.Bcc) == 0 {
		return nil, errMissing("Destination", "Destination must name at least one recipient.")
	}

	var headers []sesField
	var attachments []sesAttachment
	if s := c.Simple; s != nil {
		if s.Subject == nil {
			return nil, errMissing("Content.Simple.Subject", "Content.Simple.Subject is required.")
		}
		if s.Body == nil || (s.Body.Text == nil && s.Body.Html == nil) {
			return nil, errMissing("Content.Simple.Body", "Content.Simple.Body needs Text, Html or both.")
		}
		e.Subject = s.Subject.Data
		if s.Body.Text != nil {
			e.addBody("text/plain", &s.Body.Text.Data)
		}
		if s.Body.Html != nil {
			e.addBody("text/html", &s.Body.Html.Data)
		}
		headers, attachments = s.Headers, s.Attachments
	} else {
		if apiErr := c.Template.fill(e, "Content.Template", c.Template.TemplateData); apiErr != nil {
			return nil, apiErr
		}
		headers, attachments = c.Template.Headers, c.Template.Attachments
	}
	if apiErr := e.addSESParts("Content", headers, attachments); apiErr != nil {
		return nil, apiErr
	}
	return []*outgoing{e.outgoing("ses")}, nil
}

// sesSender reads FromEmailAddress, which a Simple or Template message
// must have.
func sesSender(from string) (mail.Address, *apiError) {
	if strings.TrimSpace(from) == "" {
		return mail.Address{}, errMissing("FromEmailAddress", "FromEmailAddress is required.")
	}
	return parseAddress("FromEmailAddress", from)
}

// fill sets e's recipients from a Destination.
func (d *sesDestination) fill(e *email, field string) *apiError {
	var apiErr *apiError
	for _, f := range []struct {
		field string
		list  []string
		dst   *[]mail.Address
	}{
		{field + ".ToAddresses", d.ToAddresses, &e.To},
		{field + ".CcAddresses", d.CcAddresses, &e.Cc},
		{field + ".BccAddresses", d.BccAddresses, &e.Bcc},
	} {
		if *f.dst, apiErr = parseAddresses(f.field, f.list); apiErr != nil {
			return apiErr
		}
	}
	if n := len(e.To) + len(e.Cc) + len(e.Bcc); n > sesMaxRecipients {
		return &apiError{kind: tooMany, field: field, msg: fmt.Sprintf("Recipient count exceeds %d.", sesMaxRecipients)}
	}
	return nil
}

// fill records a template on e. Stored templates do not exist in capture
// and are not rendered: the template's name and data are kept, and inline
// template content is used as given.
func (t *sesTemplate) fill(e *email, field, data string) *apiError {
	if t.TemplateName == "" && t.TemplateArn == "" && t.TemplateContent == nil {
		return errMissing(field, field+" needs TemplateName, TemplateArn or TemplateContent.")
	}
	if t.TemplateData != "" && !json.Valid([]byte(t.TemplateData)) {
		return errInvalid(field+".TemplateData", "%s.TemplateData must be a JSON object.", field)
	}
	e.capture("Template", cmp.Or(t.TemplateName, t.TemplateArn))
	e.captureJSON("Template-Data", json.RawMessage(data))
	if tc := t.TemplateContent; tc != nil {
		e.Subject = tc.Subject
		e.addBody("text/plain", nonEmpty(&tc.Text))
		e.addBody("text/html", nonEmpty(&tc.Html))
	}
	return nil
}

// addSESParts adds a Simple or Template message's headers and
// attachments, naming them under field in a refusal.
func (e *email) addSESParts(field string, headers []sesField, attachments []sesAttachment) *apiError {
	for i, h := range headers {
		if apiErr := checkHeader(fmt.Sprintf("%s.Headers[%d].Name", field, i), h.Name); apiErr != nil {
			return apiErr
		}
		e.Headers = append(e.Headers, header{h.Name, h.Value})
	}
	for i, a := range attachments {
		field := fmt.Sprintf("%s.Attachments[%d]", field, i)
		if a.FileName == "" {
			return errMissing(field+".FileName", field+".FileName is required.")
		}
		att := attachment{Filename: a.FileName, ContentType: a.ContentType, ContentID: strings.Trim(a.ContentId, "<>"),
			Description: a.ContentDescription}
		switch a.ContentDisposition {
		case "", "ATTACHMENT":
		case "INLINE":
			att.Inline = true
		default:
			return errInvalid(field+".ContentDisposition", "%s.ContentDisposition must be ATTACHMENT or INLINE.", field)
		}
		att, apiErr := decodeAttachment(att, a.RawContent, field+".RawContent", field+".ContentType")
		if apiErr != nil {
			return apiErr
		}
		e.Attachments = append(e.Attachments, att)
	}
	return nil
}

// sesRaw stores a Raw message as given, only prepending capture's own
// fields. Its sender and recipients come from the request when it names
// them, else from the message's headers.
func sesRaw(req *sesRequest, e *email) ([]*outgoing, *apiError) {
	data, apiErr := decodeBase64("Content.Raw.Data", req.Content.Raw.Data)
	if apiErr != nil {
		return nil, apiErr
	}
	msg, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		return nil, errInvalid("Content.Raw.Data", "Content.Raw.Data is not a MIME message: %v", err)
	}
	from := req.FromEmailAddress
	if from == "" {
		from = msg.Header.Get("From")
	}
	if strings.TrimSpace(from) == "" {
		return nil, errMissing("FromEmailAddress", "The message has no From header and FromEmailAddress is not set.")
	}
	sender, apiErr := parseAddress("FromEmailAddress", from)
	if apiErr != nil {
		return nil, apiErr
	}
	e.From = sender
	if len(e.To)+len(e.Cc)+len(e.Bcc) == 0 {
		for _, f := range []struct {
			name string
			dst  *[]mail.Address
		}{{"To", &e.To}, {"Cc", &e.Cc}, {"Bcc", &e.Bcc}} {
			if v := msg.Header.Get(f.name); v != "" {
				if *f.dst, apiErr = parseAddressList("Content.Raw.Data", v); apiErr != nil {
					return nil, errInvalid("Content.Raw.Data", "the message's %s header is not a list of addresses", f.name)
				}
			}
		}
	}
	to := e.envelope()
	if len(to) == 0 {
		return nil, errMissing("Destination", "Neither Destination nor the message's headers name a recipient.")
	}
	if len(to) > sesMaxRecipients {
		return nil, &apiError{kind: tooMany, field: "Destination", msg: fmt.Sprintf("Recipient count exceeds %d.", sesMaxRecipients)}
	}
	var b bytes.Buffer
	writeField(&b, "X-Capture-Provider", "ses")
	for _, h := range e.Capture {
		writeField(&b, h.Name, h.Value)
	}
	// SES gives every message it sends a Message-ID, as a Simple one gets.
	if msg.Header.Get("Message-Id") == "" {
		writeField(&b, "Message-ID", newMessageID(sender.Address))
	}
	b.Write(data)
	return []*outgoing{{raw: b.Bytes(), from: sender.Address, to: to}}, nil
}

// sesMaxTagLength bounds a message tag's name and its value.
const sesMaxTagLength = 256

// checkTag refuses a message tag SES refuses: its name and its value are
// each required and may hold at most 256 ASCII letters, digits,
// underscores and dashes (the MessageTag type of SES v1 and v2).
func checkTag(nameField, valueField string, tag sesField) *apiError {
	for _, f := range []struct{ field, what, s string }{{nameField, "name", tag.Name}, {valueField, "value", tag.Value}} {
		switch {
		case f.s == "":
			return errInvalid(f.field, "%s is required: a message tag's %s is 1 to %d ASCII letters, digits, underscores (_) or dashes (-).",
				f.field, f.what, sesMaxTagLength)
		case len(f.s) > sesMaxTagLength:
			return errInvalid(f.field, "%s is %d characters long: a message tag's %s may have at most %d.",
				f.field, len(f.s), f.what, sesMaxTagLength)
		}
		for _, c := range []byte(f.s) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				return errInvalid(f.field, "%s %q: a message tag's %s may contain only ASCII letters, digits, underscores (_) or dashes (-).",
					f.field, f.s, f.what)
			}
		}
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

type sesBulkRequest struct {
	FromEmailAddress string
	ReplyToAddresses []string
	DefaultEmailTags []sesField
	DefaultContent   *struct {
		Template *sesTemplate
	}
	BulkEmailEntries []struct {
		Destination             *sesDestination
		ReplacementTags         []sesField
		ReplacementEmailContent *struct {
			ReplacementTemplate *struct {
				ReplacementTemplateData string
			}
		}
		ReplacementHeaders []sesField
	}
	ConfigurationSetName           string
	TenantName                     string
	FeedbackForwardingEmailAddress string
}

func decodeSESBulk(_ *http.Request, body []byte, b *budget) ([]*outgoing, *apiError) {
	var req sesBulkRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, jsonError(err)
	}
	if req.DefaultContent == nil || req.DefaultContent.Template == nil {
		return nil, errMissing("DefaultContent.Template", "DefaultContent.Template is required: bulk email is sent from a template.")
	}
	t := req.DefaultContent.Template
	switch n := len(req.BulkEmailEntries); {
	case n == 0:
		return nil, errMissing("BulkEmailEntries", "BulkEmailEntries must have at least one entry.")
	case n > sesMaxBulkEntries:
		return nil, &apiError{kind: tooMany, field: "BulkEmailEntries",
			msg: fmt.Sprintf("BulkEmailEntries may have at most %d entries; this request has %d.", sesMaxBulkEntries, n)}
	}
	from, apiErr := sesSender(req.FromEmailAddress)
	if apiErr != nil {
		return nil, apiErr
	}
	replyTo, apiErr := parseAddresses("ReplyToAddresses", req.ReplyToAddresses)
	if apiErr != nil {
		return nil, apiErr
	}
	for i, tag := range req.DefaultEmailTags {
		field := fmt.Sprintf("DefaultEmailTags[%d]", i)
		if apiErr := checkTag(field+".Name", field+".Value", tag); apiErr != nil {
			return nil, apiErr
		}
	}

	out := make([]*outgoing, 0, len(req.BulkEmailEntries))
	for i, entry := range req.BulkEmailEntries {
		field := fmt.Sprintf("BulkEmailEntries[%d]", i)
		e := &email{From: from, ReplyTo: replyTo}
		if entry.Destination == nil {
			return nil, errMissing(field+".Destination", field+".Destination is required.")
		}
		if apiErr := entry.Destination.fill(e, field+".Destination"); apiErr != nil {
			return nil, apiErr
		}
		if len(e.To)+len(e.Cc)+len(e.Bcc) == 0 {
			return nil, errMissing(field+".Destination", field+".Destination must name at least one recipient.")
		}
		for j, tag := range entry.ReplacementTags {
			field := fmt.Sprintf("%s.ReplacementTags[%d]", field, j)
			if apiErr := checkTag(field+".Name", field+".Value", tag); apiErr != nil {
				return nil, apiErr
			}
		}
		// An entry's replacements take the place of the defaults of the
		// same name.
		for _, tag := range replaceByName(req.DefaultEmailTags, entry.ReplacementTags) {
			e.capture("Tag", tag.Name+"="+tag.Value)
		}
		e.capture("Configuration-Set", req.ConfigurationSetName)
		e.capture("Tenant", req.TenantName)
		data := t.TemplateData
		if c := entry.ReplacementEmailContent; c != nil && c.ReplacementTemplate != nil && c.ReplacementTemplate.ReplacementTemplateData != "" {
			data = c.ReplacementTemplate.ReplacementTemplateData
			if !json.Valid([]byte(data)) {
				return nil, errInvalid(field+".ReplacementEmailContent.ReplacementTemplate.ReplacementTemplateData",
					"%s.ReplacementEmailContent.ReplacementTemplate.ReplacementTemplateData must be a JSON object.", field)
			}
		}
		if apiErr := t.fill(e, "DefaultContent.Template", data); apiErr != nil {
			return nil, apiErr
		}
		headers := replaceByName(t.Headers, entry.ReplacementHeaders)
		if apiErr := e.addSESParts("DefaultContent.Template", headers, t.Attachments); apiErr != nil {
			return nil, apiErr
		}
		o := e.outgoing("ses")
		if apiErr := b.spend(o); apiErr != nil {
			return nil, apiErr
		}
		out = append(out, o)
	}
	return out, nil
}

// replaceByName is defaults with each replacement put in place of the
// default of the same name (compared without case), or added after them.
func replaceByName(defaults, replacements []sesField) []sesField {
	out := slices.Clone(defaults)
	for _, r := range replacements {
		i := slices.IndexFunc(out, func(d sesField) bool { return strings.EqualFold(d.Name, r.Name) })
		if i >= 0 {
			out[i] = r
		} else {
			out = append(out, r)
		}
	}
	return out
}
