package emailapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/mail"
	"net/textproto"
	"net/url"
	"strings"
	"time"

	"github.com/capturedev/capture/store"
)

// Mailgun: POST /v3/{domain}/messages, a multipart or urlencoded form,
// Basic credential api:<key>. Fields are from/to/cc/bcc/subject/text/html,
// files in attachment and inline, and prefixed options: h: headers, v:
// variables, o: delivery options, t: template options.
var mailgun = &provider{
	name:       "mailgun",
	title:      "Mailgun",
	route:      "POST /v3/{domain}/messages",
	credential: mailgunCredential,
	decode:     decodeMailgun,
	reply:      mailgunReply,
	fail:       mailgunFail,
}

// Mailgun's MIME route: POST /v3/{domain}/messages.mime, a multipart form
// whose message part holds a whole MIME message, sent as it is to the
// recipients in to; the options of the messages route apply.
var mailgunMIME = &provider{
	name:       "mailgun",
	title:      "Mailgun MIME",
	route:      "POST /v3/{domain}/messages.mime",
	credential: mailgunCredential,
	decode:     decodeMailgunMIME,
	reply:      mailgunReply,
	fail:       mailgunFail,
}

func mailgunCredential(r *http.Request) (credential, *apiError) {
	user, password, ok := r.BasicAuth()
	if !ok || password == "" {
		return credential{}, &apiError{kind: noCredential}
	}
	if user != "api" {
		return credential{}, &apiError{kind: badCredential}
	}
	return credential{password: password}, nil
}

// mailgunReply answers with the Message-Id the messages carry (echo): one
// for the request, as Mailgun gives for a batch send.
func mailgunReply(w http.ResponseWriter, out []*outgoing) {
	writeJSON(w, http.StatusOK, map[string]string{"id": out[0].echo, "message": "Queued. Thank you."})
}

func mailgunFail(w http.ResponseWriter, e *apiError) {
	status := http.StatusBadRequest
	switch e.kind {
	case noCredential, badCredential:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("WWW-Authenticate", `Basic realm="MG API"`)
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, "Forbidden")
		return
	case tooLarge:
		status = http.StatusRequestEntityTooLarge
	case unavailable:
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, map[string]string{"message": e.msg})
}

// mgForm is a decoded form: fields in order, and the files.
type mgForm struct {
	fields []mgField
	files  []mgFile
}

type mgField struct{ name, value string }

type mgFile struct {
	field, filename, contentType string
	data                         []byte
}

func (f *mgForm) all(name string) []string {
	var out []string
	for _, v := range f.fields {
		if v.name == name {
			out = append(out, v.value)
		}
	}
	return out
}

func (f *mgForm) get(name string) string {
	if vs := f.all(name); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// maxFormParts bounds the parts of a multipart form, whatever their size.
const maxFormParts = 10_000

func readMailgunForm(r *http.Request, body []byte) (*mgForm, *apiError) {
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	form := &mgForm{}
	switch {
	case err == nil && mediaType == "multipart/form-data":
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for n := 0; ; n++ {
			if n == maxFormParts {
				return nil, &apiError{kind: malformed, msg: fmt.Sprintf("the form has more than %d parts", maxFormParts)}
			}
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, &apiError{kind: malformed, msg: "the multipart/form-data body cannot be read: " + err.Error()}
			}
			data, err := io.ReadAll(p)
			if err != nil {
				return nil, &apiError{kind: malformed, msg: "the multipart/form-data body cannot be read: " + err.Error()}
			}
			name := p.FormName()
			if p.FileName() != "" {
				form.files = append(form.files, mgFile{field: name, filename: p.FileName(),
					contentType: p.Header.Get("Content-Type"), data: data})
			} else if name != "" {
				form.fields = append(form.fields, mgField{name, string(data)})
			}
		}
	case err == nil && mediaType == "application/x-www-form-urlencoded":
		values, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, &apiError{kind: malformed, msg: "the form body cannot be read: " + err.Error()}
		}
		for _, name := range sortedKeys(values) {
			for _, v := range values[name] {
				form.fields = append(form.fields, mgField{name, v})
			}
		}
	default:
		return nil, &apiError{kind: malformed,
			msg: "send the message as multipart/form-data or application/x-www-form-urlencoded"}
	}
	return form, nil
}

func decodeMailgun(r *http.Request, body []byte, b *budget) ([]*outgoing, *apiError) {
	form, apiErr := readMailgunForm(r, body)
	if apiErr != nil {
		return nil, apiErr
	}
	domain := r.PathValue("domain")
	e := &email{}
	from := form.get("from")
	if strings.TrimSpace(from) == "" {
		return nil, errMissing("from", "'from' parameter is missing")
	}
	if e.From, apiErr = parseAddress("from", from); apiErr != nil {
		return nil, errInvalid("from", "'from' parameter is not a valid address. please check documentation")
	}
	if len(form.all("to")) == 0 {
		return nil, errMissing("to", "'to' parameter is missing")
	}
	for _, f := range []struct {
		name string
		dst  *[]mail.Address
	}{{"to", &e.To}, {"cc", &e.Cc}, {"bcc", &e.Bcc}} {
		if *f.dst, apiErr = parseAddresses(f.name, form.all(f.name)); apiErr != nil {
			return nil, errInvalid(f.name, "'%s' parameter is not a valid address. please check documentation", f.name)
		}
	}
	if len(e.To) == 0 {
		return nil, errMissing("to", "'to' parameter is missing")
	}
	template := form.get("template")
	e.Subject = form.get("subject")
	if e.Subject == "" && template == "" {
		return nil, errMissing("subject", "'subject' parameter is missing")
	}
	for _, b := range []struct{ field, contentType string }{
		{"text", "text/plain"}, {"amp-html", "text/x-amp-html"}, {"html", "text/html"},
	} {
		if v := form.get(b.field); v != "" {
			e.Bodies = append(e.Bodies, alternative{ContentType: b.contentType, Content: v})
		}
	}
	if len(e.Bodies) == 0 && template == "" {
		return nil, errMissing("text", "Need at least one of 'text', 'html' or 'template' parameters specified")
	}
	for _, f := range form.fields {
		if f.name == "attachment" || f.name == "inline" {
			return nil, errInvalid(f.name, "'%s' parameter must be a file: send the form as multipart/form-data", f.name)
		}
	}
	for _, f := range form.files {
		if f.field != "attachment" && f.field != "inline" {
			continue
		}
		ct := f.contentType
		if ct == "" || ct == "application/octet-stream" {
			ct = contentTypeFor("", f.filename)
		}
		if apiErr := checkContentType(f.field, ct); apiErr != nil {
			return nil, apiErr
		}
		// Mailgun names an inline part by its file name: cid:logo.png.
		a := attachment{Filename: f.filename, ContentType: ct, Data: f.data}
		if f.field == "inline" {
			a.Inline, a.ContentID = true, f.filename
		}
		e.Attachments = append(e.Attachments, a)
	}

	if apiErr := e.mailgunOptions(form, domain); apiErr != nil {
		return nil, apiErr
	}
	id, messageID := e.mailgunMessageID(domain)

	var out []*outgoing
	if rv := form.get("recipient-variables"); rv == "" {
		out = []*outgoing{e.outgoing("mailgun")}
	} else if out, apiErr = mailgunBatch(e, rv, b); apiErr != nil {
		return nil, apiErr
	}
	// A batch's messages share the Message-Id; the first is stored under
	// the capture id inside it.
	out[0].id, out[0].echo = id, messageID
	return out, nil
}

// mailgunOptions reads the options both send routes take: h: headers
// (h:Reply-To as the Reply-To addresses), v: variables, o: delivery
// options and t: template options, the template, and the domain sent
// from, recording all but the headers as X-Capture-* fields.
func (e *email) mailgunOptions(form *mgForm, domain string) *apiError {
	variables := map[string]string{}
	tracking := map[string]string{}
	// headerVariables is h:X-Mailgun-Variables, where mailgun-go's
	// AddTemplateVariable puts a template's data (a form Mailgun's
	// templates guide documents too): the template data when t:variables
	// is not given.
	var headerVariables string
	templateData := false
	for _, f := range form.fields {
		name, value := f.name, f.value
		switch {
		case strings.EqualFold(name, "h:Reply-To"):
			rt, apiErr := parseAddressList(name, value)
			if apiErr != nil {
				return errInvalid(name, "'h:Reply-To' parameter is not a valid address. please check documentation")
			}
			e.ReplyTo = append(e.ReplyTo, rt...)
		case strings.HasPrefix(name, "h:"):
			if apiErr := checkHeader(name, name[2:]); apiErr != nil {
				return apiErr
			}
			e.Headers = append(e.Headers, header{name[2:], value})
			if strings.EqualFold(name, "h:X-Mailgun-Variables") && headerVariables == "" {
				headerVariables = value
			}
		case strings.HasPrefix(name, "v:"):
			variables[name[2:]] = value
		case name == "o:tag":
			e.capture("Tag", value)
		case name == "o:deliverytime":
			at, err := mail.ParseDate(value)
			if err != nil {
				return errInvalid(name, "'o:deliverytime' parameter is not a valid RFC 2822 date: %q", value)
			}
			e.capture("Send-At", at.UTC().Format(time.RFC3339))
		case strings.HasPrefix(name, "o:tracking"):
			tracking[name] = value
		case name == "t:variables":
			if !json.Valid([]byte(value)) {
				return errInvalid(name, "'t:variables' parameter is not valid JSON")
			}
			e.captureJSON("Template-Data", json.RawMessage(value))
			templateData = true
		case name == "t:version":
			e.capture("Template-Version", value)
		case strings.HasPrefix(name, "o:"), strings.HasPrefix(name, "t:"):
			e.capture("Option", name+"="+value)
		}
	}
	e.capture("Template", form.get("template"))
	if form.get("template") != "" && !templateData && headerVariables != "" {
		// The template's data, so held to what t:variables is held to:
		// left unread, it would leave the template without its data and
		// no word why.
		if !json.Valid([]byte(headerVariables)) {
			return errInvalid("h:X-Mailgun-Variables", "'h:X-Mailgun-Variables' parameter is not valid JSON")
		}
		e.captureJSON("Template-Data", json.RawMessage(headerVariables))
	}
	if len(variables) > 0 {
		e.captureValue("Metadata", variables)
	}
	if len(tracking) > 0 {
		e.captureValue("Tracking", tracking)
	}
	e.capture("Domain", domain)
	return nil
}

// mailgunMessageID gives e the Message-Id Mailgun gives a message:
// <id@domain>, with id the capture id the message is stored under, so the
// id Mailgun answers finds the message, and the domain as a Message-ID
// holds it (in IDNA form when it is not ASCII). A sender's own h:Message-Id is
// kept, as Mailgun keeps it; the message then gets an id when stored.
func (e *email) mailgunMessageID(domain string) (id, messageID string) {
	for _, h := range e.Headers {
		if strings.EqualFold(h.Name, "Message-Id") {
			return "", h.Value
		}
	}
	id = store.NewID("msg_")
	e.MessageID = "<" + id + "@" + messageIDDomain(domain) + ">"
	return id, e.MessageID
}

// decodeMailgunMIME stores the message part as it was sent, its
// recipients those of to. Capture's own fields, the h: headers and a
// Message-Id when the message has none are written before its header.
func decodeMailgunMIME(r *http.Request, body []byte, _ *budget) ([]*outgoing, *apiError) {
	form, apiErr := readMailgunForm(r, body)
	if apiErr != nil {
		return nil, apiErr
	}
	if len(form.all("to")) == 0 {
		return nil, errMissing("to", "'to' parameter is missing")
	}
	e := &email{}
	if e.To, apiErr = parseAddresses("to", form.all("to")); apiErr != nil {
		return nil, errInvalid("to", "'to' parameter is not a valid address. please check documentation")
	}
	if len(e.To) == 0 {
		return nil, errMissing("to", "'to' parameter is missing")
	}
	var data []byte
	for _, f := range form.files {
		if f.field == "message" {
			data = f.data
			break
		}
	}
	if data == nil {
		// Some clients send the message as a plain field.
		if v := form.all("message"); len(v) > 0 {
			data = []byte(v[0])
		}
	}
	if len(data) == 0 {
		return nil, errMissing("message", "'message' parameter is missing")
	}
	msg, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		return nil, errInvalid("message", "'message' parameter is not a MIME message: %v", err)
	}
	from := msg.Header.Get("From")
	if strings.TrimSpace(from) == "" {
		return nil, errMissing("message", "'message' parameter has no From header")
	}
	if e.From, apiErr = parseAddress("message", from); apiErr != nil {
		return nil, errInvalid("message", "the From header of the 'message' parameter is not a valid address")
	}
	domain := r.PathValue("domain")
	if apiErr := e.mailgunOptions(form, domain); apiErr != nil {
		return nil, apiErr
	}

	var b bytes.Buffer
	writeField(&b, "X-Capture-Provider", "mailgun")
	for _, h := range e.Capture {
		writeField(&b, h.Name, h.Value)
	}
	// A field a message holds at most once (RFC 5322 3.6) that the
	// message has already is its own: an h: option of that name would make
	// it twice.
	ownField := func(name string) bool {
		return onceFields[textproto.CanonicalMIMEHeaderKey(name)] && len(msg.Header[textproto.CanonicalMIMEHeaderKey(name)]) > 0
	}
	if !ownField("Reply-To") {
		writeAddresses(&b, "Reply-To", e.ReplyTo)
	}
	for _, h := range e.Headers {
		if !ownField(h.Name) {
			writeField(&b, h.Name, h.Value)
		}
	}
	// The sender's Message-Id, the message's own or else h:Message-Id, is
	// kept; without one, Mailgun's is written.
	id, messageID := e.mailgunMessageID(domain)
	if own := msg.Header.Get("Message-Id"); own != "" {
		id, messageID = "", own
	} else if id != "" {
		writeField(&b, "Message-Id", messageID)
	}
	b.Write(data)
	return []*outgoing{{raw: b.Bytes(), from: e.From.Address, to: e.envelope(), id: id, echo: messageID}}, nil
}

// onceFields are the header fields a message holds at most once (RFC 5322
// 3.6), canonical.
var onceFields = map[string]bool{
	"Date": true, "From": true, "Sender": true, "Reply-To": true, "To": true, "Cc": true, "Bcc": true,
	"Message-Id": true, "In-Reply-To": true, "References": true, "Subject": true,
}

// mailgunBatch is Mailgun's batch sending: with recipient-variables, each
// To recipient gets a message of its own, its %recipient.name% tags
// replaced by its variables.
func mailgunBatch(e *email, recipientVariables string, b *budget) ([]*outgoing, *apiError) {
	var vars map[string]map[string]any
	if err := json.Unmarshal([]byte(recipientVariables), &vars); err != nil {
		return nil, errInvalid("recipient-variables", "'recipient-variables' parameter is not a valid JSON object of objects")
	}
	lower := map[string]map[string]any{}
	for addr, v := range vars {
		lower[strings.ToLower(addr)] = v
	}
	out := make([]*outgoing, 0, len(e.To))
	for _, to := range e.To {
		one := *e
		one.To = []mail.Address{to}
		pairs := map[string]string{}
		for k, v := range lower[strings.ToLower(to.Address)] {
			s, ok := v.(string)
			if !ok {
				b, _ := json.Marshal(v)
				s = string(b)
			}
			pairs["%recipient."+k+"%"] = s
		}
		rep := replacer{tags(pairs)}
		one.Subject = rep.Replace(e.Subject)
		one.Bodies = make([]alternative, len(e.Bodies))
		for i, b := range e.Bodies {
			one.Bodies[i] = alternative{ContentType: b.ContentType, Params: b.Params, Content: rep.Replace(b.Content)}
		}
		o := one.outgoing("mailgun")
		if apiErr := b.spend(o); apiErr != nil {
			return nil, apiErr
		}
		out = append(out, o)
	}
	return out, nil
}
