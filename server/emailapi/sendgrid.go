package emailapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/capturedev/capture/store"
)

// SendGrid v3 Mail Send: POST /v3/mail/send, JSON, Bearer credential, 202
// with an empty body. One message per personalization, each with its own
// recipients, subject, headers and substitutions.
var sendgrid = &provider{
	name:  "sendgrid",
	title: "SendGrid",
	route: "POST /v3/mail/send",
	credential: func(r *http.Request) (credential, *apiError) {
		token, ok := bearer(r)
		if !ok {
			return credential{}, &apiError{kind: noCredential}
		}
		return credential{password: token}, nil
	},
	decode: decodeSendGrid,
	reply: func(w http.ResponseWriter, out []*outgoing) {
		// Sandbox mode checks a request without sending it, and SendGrid
		// says so with 200 instead of 202. A send has one X-Message-Id
		// however many personalizations it has, as SendGrid answers: the
		// id of the first one's message, which every message of the send
		// carries in X-Capture-Send-Id. One header per message would pass
		// the header limits of HTTP clients (Python's 100, Node's 16 KiB)
		// long before SendGrid's 1,000 personalizations.
		if out[0].dryRun {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("X-Message-Id", out[0].id)
		w.WriteHeader(http.StatusAccepted)
	},
	fail: func(w http.ResponseWriter, e *apiError) {
		status, msg := http.StatusBadRequest, e.msg
		switch e.kind {
		case noCredential:
			status, msg = http.StatusUnauthorized, "authorization required"
		case badCredential:
			status, msg = http.StatusUnauthorized, "The provided authorization grant is invalid, expired, or revoked"
		case tooLarge:
			status = http.StatusRequestEntityTooLarge
		case unavailable:
			status = http.StatusServiceUnavailable
		}
		var field any
		if e.field != "" {
			field = e.field
		}
		writeJSON(w, status, map[string]any{"errors": []map[string]any{{"message": msg, "field": field, "help": nil}}})
	},
}

type sgAddress struct {
	Email string `json:"email"`
	Name  string `json:"name"`
}

type sgPersonalization struct {
	To                  []sgAddress       `json:"to"`
	Cc                  []sgAddress       `json:"cc"`
	Bcc                 []sgAddress       `json:"bcc"`
	From                *sgAddress        `json:"from"`
	Subject             *string           `json:"subject"`
	Headers             map[string]string `json:"headers"`
	Substitutions       map[string]string `json:"substitutions"`
	DynamicTemplateData json.RawMessage   `json:"dynamic_template_data"`
	CustomArgs          map[string]any    `json:"custom_args"`
	SendAt              *int64            `json:"send_at"`
}

type sgRequest struct {
	Personalizations []sgPersonalization `json:"personalizations"`
	From             *sgAddress          `json:"from"`
	ReplyTo          *sgAddress          `json:"reply_to"`
	ReplyToList      []sgAddress         `json:"reply_to_list"`
	Subject          string              `json:"subject"`
	Content          []struct {
		Type  string `json:"type"`
		Value string `json:"value"`
	} `json:"content"`
	Attachments []struct {
		Content     string `json:"content"`
		Type        string `json:"type"`
		Filename    string `json:"filename"`
		Disposition string `json:"disposition"`
		ContentID   string `json:"content_id"`
	} `json:"attachments"`
	TemplateID       string            `json:"template_id"`
	Headers          map[string]string `json:"headers"`
	Sections         map[string]string `json:"sections"`
	Categories       []string          `json:"categories"`
	CustomArgs       map[string]any    `json:"custom_args"`
	SendAt           *int64            `json:"send_at"`
	BatchID          string            `json:"batch_id"`
	Asm              json.RawMessage   `json:"asm"`
	IPPoolName       string            `json:"ip_pool_name"`
	MailSettings     json.RawMessage   `json:"mail_settings"`
	TrackingSettings json.RawMessage   `json:"tracking_settings"`
}

const (
	sgMaxPersonalizations = 1000
	sgMaxRecipients       = 1000
	// SendGrid schedules at most 72 hours ahead.
	sgMaxSchedule = 72 * time.Hour
)

func decodeSendGrid(_ *http.Request, body []byte, b *budget) ([]*outgoing, *apiError) {
	var req sgRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, jsonError(err)
	}
	shared, apiErr := req.shared()
	if apiErr != nil {
		return nil, apiErr
	}
	var sandbox struct {
		SandboxMode struct {
			Enable bool `json:"enable"`
		} `json:"sandbox_mode"`
	}
	if len(req.MailSettings) > 0 {
		if err := json.Unmarshal(req.MailSettings, &sandbox); err != nil {
			return nil, errInvalid("mail_settings", "mail_settings: %v", jsonError(err))
		}
	}

	switch n := len(req.Personalizations); {
	case n == 0:
		return nil, errMissing("personalizations", "The personalizations field is required and must have at least one personalization.")
	case n > sgMaxPersonalizations:
		return nil, &apiError{kind: tooMany, field: "personalizations",
			msg: fmt.Sprintf("The personalizations field may have at most %d personalizations.", sgMaxPersonalizations)}
	}
	recipients := 0
	// The send's id is its first message's, chosen now so that every
	// message can name it.
	sendID := store.NewID("msg_")
	out := make([]*outgoing, 0, len(req.Personalizations))
	for i, p := range req.Personalizations {
		e, apiErr := p.email(fmt.Sprintf("personalizations.%d", i), &req, shared)
		if apiErr != nil {
			return nil, apiErr
		}
		e.capture("Send-Id", sendID)
		if recipients += len(e.To) + len(e.Cc) + len(e.Bcc); recipients > sgMaxRecipients {
			return nil, &apiError{kind: tooMany, field: "personalizations",
				msg: fmt.Sprintf("A request may name at most %d recipients across all personalizations.", sgMaxRecipients)}
		}
		o := e.outgoing("sendgrid")
		if apiErr := b.spend(o); apiErr != nil {
			return nil, apiErr
		}
		o.dryRun = sandbox.SandboxMode.Enable
		out = append(out, o)
	}
	out[0].id = sendID
	return out, nil
}

// sgShared is what every personalization's message takes from the
// request's top level.
type sgShared struct {
	from        *mail.Address
	replyTo     []sgReplyTo
	attachments []attachment
	headers     map[string]string
	// bodies are the content blocks, their values before substitution.
	bodies []alternative
}

// sgReplyTo is a reply-to address as given, and its field.
type sgReplyTo struct {
	field string
	sgAddress
}

func (req *sgRequest) shared() (sgShared, *apiError) {
	var s sgShared
	if req.From != nil {
		a, apiErr := req.From.address("from.email")
		if apiErr != nil {
			return s, apiErr
		}
		s.from = &a
	}
	if req.ReplyTo != nil && len(req.ReplyToList) > 0 {
		return s, errInvalid("reply_to_list", "Use either reply_to or reply_to_list, not both.")
	}
	// The reply-to addresses are read once each personalization's
	// substitutions are applied to them.
	if req.ReplyTo != nil {
		s.replyTo = []sgReplyTo{{"reply_to.email", *req.ReplyTo}}
	}
	for i, r := range req.ReplyToList {
		s.replyTo = append(s.replyTo, sgReplyTo{fmt.Sprintf("reply_to_list.%d.email", i), r})
	}

	if len(req.Content) == 0 && req.TemplateID == "" {
		return s, errMissing("content", "Unless a valid template_id is provided, the content parameter is required. "+
			"There must be at least one defined content block.")
	}
	// A type may carry parameters ("text/html; charset=UTF-8",
	// "text/calendar; method=REQUEST"): the media type says which body it
	// is, and the parameters other than charset go with it.
	for i, c := range req.Content {
		field := fmt.Sprintf("content.%d", i)
		t, params, apiErr := parseContentType(field+".type", c.Type)
		if apiErr != nil {
			return s, errInvalid(field+".type", "The content type must be a MIME type such as text/plain or text/html.")
		}
		if c.Value == "" {
			return s, errInvalid(field+".value", "The content value must be a string at least one character in length.")
		}
		if slices.ContainsFunc(s.bodies, func(b alternative) bool { return b.ContentType == t }) {
			return s, errInvalid(field+".type", "Each content type may be given only once; %s is repeated.", t)
		}
		afterText := i == 1 && s.bodies[0].ContentType == "text/plain"
		if (t == "text/plain" && i != 0) || (t == "text/html" && i != 0 && !afterText) {
			return s, errInvalid(field+".type", "If present, text/plain content must be first, followed by text/html, then any other types.")
		}
		delete(params, "charset")
		s.bodies = append(s.bodies, alternative{ContentType: t, Params: params, Content: c.Value})
	}

	for i, a := range req.Attachments {
		field := fmt.Sprintf("attachments.%d", i)
		if a.Content == "" {
			return s, errMissing(field+".content", "The attachment content is required and must be base64 encoded.")
		}
		if a.Filename == "" {
			return s, errMissing(field+".filename", "The attachment filename is required.")
		}
		att := attachment{Filename: a.Filename, ContentType: a.Type, ContentID: a.ContentID}
		switch a.Disposition {
		case "", "attachment":
		case "inline":
			att.Inline = true
			if a.ContentID == "" {
				return s, errMissing(field+".content_id", "The content_id parameter is required if the attachment disposition is inline.")
			}
		default:
			return s, errInvalid(field+".disposition", "The disposition must be inline or attachment, not %q.", a.Disposition)
		}
		att, apiErr := decodeAttachment(att, a.Content, field+".content", field+".type")
		if apiErr != nil {
			return s, apiErr
		}
		s.attachments = append(s.attachments, att)
	}
	for _, name := range sortedKeys(req.Headers) {
		if apiErr := checkHeader("headers", name); apiErr != nil {
			return s, apiErr
		}
	}
	s.headers = req.Headers
	return s, nil
}

func (a sgAddress) address(field string) (mail.Address, *apiError) {
	if strings.TrimSpace(a.Email) == "" {
		return mail.Address{}, errMissing(field, "The email address is required.")
	}
	parsed, err := mail.ParseAddress(a.Email)
	if err != nil || parsed.Name != "" {
		return mail.Address{}, errInvalid(field, "Does not contain a valid address.")
	}
	return mail.Address{Name: a.Name, Address: parsed.Address}, nil
}

func sgAddresses(field string, list []sgAddress) ([]mail.Address, *apiError) {
	out := make([]mail.Address, 0, len(list))
	for i, a := range list {
		addr, apiErr := a.address(fmt.Sprintf("%s.%d.email", field, i))
		if apiErr != nil {
			return nil, apiErr
		}
		out = append(out, addr)
	}
	return out, nil
}

// email builds the message of one personalization.
func (p *sgPersonalization) email(field string, req *sgRequest, shared sgShared) (*email, *apiError) {
	e := &email{Attachments: shared.attachments}
	var apiErr *apiError
	if len(p.To) == 0 {
		return nil, errMissing(field+".to", "The to array is required for all personalization objects, and must have at least one email object with a valid email address.")
	}
	if e.To, apiErr = sgAddresses(field+".to", p.To); apiErr != nil {
		return nil, apiErr
	}
	if e.Cc, apiErr = sgAddresses(field+".cc", p.Cc); apiErr != nil {
		return nil, apiErr
	}
	if e.Bcc, apiErr = sgAddresses(field+".bcc", p.Bcc); apiErr != nil {
		return nil, apiErr
	}
	seen := map[string]string{}
	for _, list := range []struct {
		name string
		as   []mail.Address
	}{{"to", e.To}, {"cc", e.Cc}, {"bcc", e.Bcc}} {
		for _, a := range list.as {
			key := strings.ToLower(a.Address)
			if first, dup := seen[key]; dup {
				return nil, errInvalid(field, "Each email address in the personalization block should be unique between to, cc, and bcc. "+
					"We found the first duplicate instance of [%s] in the %s.%s field.", a.Address, field, first)
			}
			seen[key] = list.name
		}
	}

	switch {
	case p.From != nil:
		if e.From, apiErr = p.From.address(field + ".from.email"); apiErr != nil {
			return nil, apiErr
		}
	case shared.from != nil:
		e.From = *shared.from
	default:
		return nil, errMissing("from.email", "The from object must be provided for every email send. "+
			"It is an object that requires the email parameter, but may also contain a name parameter.")
	}

	// Substitutions apply to the subject, the content and the reply-to
	// address and name, as SendGrid applies them.
	subst := substitutions(p.Substitutions, req.Sections)
	for _, r := range shared.replyTo {
		a, apiErr := sgAddress{Email: subst.Replace(r.Email), Name: subst.Replace(r.Name)}.address(r.field)
		if apiErr != nil {
			return nil, apiErr
		}
		e.ReplyTo = append(e.ReplyTo, a)
	}
	switch {
	case p.Subject != nil && *p.Subject != "":
		e.Subject = *p.Subject
	case req.Subject != "":
		e.Subject = req.Subject
	case req.TemplateID == "":
		return nil, errMissing("subject", "The subject is required. You can get around this requirement if you use a template "+
			"with a subject defined or if every personalization has a subject defined.")
	}
	e.Subject = subst.Replace(e.Subject)
	for _, b := range shared.bodies {
		b.Content = subst.Replace(b.Content)
		e.Bodies = append(e.Bodies, b)
	}

	// Personalization headers override the request's of the same name.
	headers := map[string]header{}
	for k, v := range shared.headers {
		headers[strings.ToLower(k)] = header{k, v}
	}
	for _, name := range sortedKeys(p.Headers) {
		if apiErr := checkHeader(field+".headers", name); apiErr != nil {
			return nil, apiErr
		}
		headers[strings.ToLower(name)] = header{name, p.Headers[name]}
	}
	for _, k := range sortedKeys(headers) {
		e.Headers = append(e.Headers, headers[k])
	}

	sendAt := req.SendAt
	if p.SendAt != nil {
		sendAt = p.SendAt
	}
	if sendAt != nil {
		at := time.Unix(*sendAt, 0).UTC()
		if time.Until(at) > sgMaxSchedule {
			return nil, errInvalid("send_at", "The send_at parameter cannot be more than 72 hours in the future.")
		}
		e.capture("Send-At", at.Format(time.RFC3339))
	}
	e.capture("Template", req.TemplateID)
	e.captureJSON("Template-Data", p.DynamicTemplateData)
	// The substitutions are applied above, as SendGrid applies them to the
	// subject and content it sends; they are kept as well, as the template
	// data is, so a test can see what was asked for.
	if len(p.Substitutions) > 0 {
		e.captureValue("Substitutions", p.Substitutions)
	}
	if len(req.Sections) > 0 {
		e.captureValue("Sections", req.Sections)
	}
	for _, c := range req.Categories {
		e.capture("Tag", c)
	}
	args := map[string]any{}
	for k, v := range req.CustomArgs {
		args[k] = v
	}
	for k, v := range p.CustomArgs {
		args[k] = v
	}
	if len(args) > 0 {
		e.captureValue("Metadata", args)
	}
	e.capture("Batch-Id", req.BatchID)
	e.captureJSON("Asm", req.Asm)
	e.capture("Ip-Pool", req.IPPoolName)
	e.captureJSON("Mail-Settings", req.MailSettings)
	e.captureJSON("Tracking", req.TrackingSettings)
	return e, nil
}

// substitutions replaces each personalization's substitution tags, then
// the section tags that the text or substituted values hold. A section
// may itself hold substitution tags for the recipient ("Hello Mr.
// -name-"): they are replaced in the section's text before it is put in.
func substitutions(subs, sections map[string]string) replacer {
	s := tags(subs)
	if s != nil && len(sections) > 0 {
		substituted := make(map[string]string, len(sections))
		for k, v := range sections {
			substituted[k] = s.Replace(v)
		}
		sections = substituted
	}
	return replacer{s, tags(sections)}
}

type replacer []*strings.Replacer

func (r replacer) Replace(s string) string {
	for _, rep := range r {
		if rep != nil {
			s = rep.Replace(s)
		}
	}
	return s
}

// tags builds one Replacer over a map, longest tag first so that a tag
// that is a prefix of another does not win.
func tags(m map[string]string) *strings.Replacer {
	keys := sortedKeys(m)
	slices.SortStableFunc(keys, func(a, b string) int { return len(b) - len(a) })
	var pairs []string
	for _, k := range keys {
		if k != "" {
			pairs = append(pairs, k, m[k])
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	return strings.NewReplacer(pairs...)
}
