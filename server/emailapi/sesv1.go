package emailapi

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Amazon SES v1 (the Query API of @aws-sdk/client-ses and the older AWS
// SDKs): POST / with a form body, Action=SendEmail or SendRawEmail, signed
// with Signature V4 for the ses service exactly as v2 is, answered in XML.
// As AWS's Query API does, it also takes its parameters in the query
// string, of a POST or of a GET.
// Each request is read into the v2 request it is the same as, and then
// checked and written as that one is. Any other action is refused with
// InvalidAction, in the XML the v1 SDKs parse.
var sesV1 = &provider{
	name:       "ses",
	title:      "Amazon SES v1 SendEmail and SendRawEmail",
	route:      "POST /{$}",
	credential: ses.credential,
	decode:     decodeSESv1,
	formBody:   true,
	alsoGET:    true,
	reply: func(w http.ResponseWriter, out []*outgoing) {
		action, id := out[0].action, requestID()
		writeXML(w, http.StatusOK, id, fmt.Sprintf(`<%sResponse xmlns="%s"><%sResult><MessageId>%s</MessageId></%sResult>`+
			`<ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata></%sResponse>`,
			action, sesV1Namespace, action, xmlText(out[0].id), action, id, action))
	},
	fail: sesV1Fail,
}

// sesV1Request says a request to / is SES v1's: a POST or GET signed with
// Signature V4 or naming an Action in its query string, or a POST
// carrying a form. An SES v1 SDK's request always is signed and mostly a
// form; any of these is enough to answer it in v1's XML (a form without a
// signature hears MissingAuthenticationToken).
func sesV1Request(r *http.Request) bool {
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		return false
	}
	if strings.HasPrefix(r.Header.Get("Authorization"), sigV4Algorithm) || r.URL.Query().Has("Action") {
		return true
	}
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return r.Method == http.MethodPost && mediaType == "application/x-www-form-urlencoded"
}

const sesV1Namespace = "http://ses.amazonaws.com/doc/2010-12-01/"

func sesV1Fail(w http.ResponseWriter, e *apiError) {
	status, code, kind, msg := sesV1Error(e)
	id := requestID()
	writeXML(w, status, id, fmt.Sprintf(`<ErrorResponse xmlns="%s"><Error><Type>%s</Type><Code>%s</Code><Message>%s</Message></Error>`+
		`<RequestId>%s</RequestId></ErrorResponse>`, sesV1Namespace, kind, code, xmlText(msg), id))
}

// sesV1Error is a refusal's status, Query API error code, fault type and
// message. The mapping is total: a refusal's own code (v2's name for it,
// as sesCredential and decodeSES give it) is turned into v1's where v1 has
// one, and any code not named here, including one v2 may give later, is
// answered with its kind's v1 code, so no refusal is sent under a name v1
// does not have.
func sesV1Error(e *apiError) (status int, code, kind, msg string) {
	status, code, kind, msg = http.StatusBadRequest, "InvalidParameterValue", "Sender", e.msg
	switch e.kind {
	case noCredential:
		status, code, msg = http.StatusForbidden, "MissingAuthenticationToken", "Request is missing Authentication Token"
	case badCredential:
		status, code = http.StatusForbidden, "InvalidClientTokenId"
		if e.code == "" {
			msg = "The security token included in the request is invalid."
		}
	case malformed, invalid, mistyped:
		// InvalidParameterValue: the Query API has no code for a body it
		// cannot read apart from a value that is wrong.
	case missing:
		code = "MissingParameter"
	case tooLarge, tooMany:
		code = "MessageRejected"
	case unavailable:
		status, code, kind = http.StatusServiceUnavailable, "ServiceUnavailable", "Receiver"
	}
	switch e.code {
	case "InvalidSignatureException":
		status, code = http.StatusForbidden, "SignatureDoesNotMatch"
	case "IncompleteSignatureException":
		// AWS's common errors: IncompleteSignature is a 400.
		status, code = http.StatusBadRequest, "IncompleteSignature"
	case "InvalidAction", "MissingAction", "XAmzContentSHA256Mismatch":
		// v1's own codes, as they are.
		code = e.code
	}
	return status, code, kind, msg
}

// writeXML sends body with status; id is the request id the body names,
// which X-Amzn-Requestid names too.
func writeXML(w http.ResponseWriter, status int, id, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/xml")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Amzn-Requestid", id)
	if status == http.StatusServiceUnavailable {
		h.Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	w.Write([]byte(body))
}

func xmlText(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// decodeSESv1 reads a v1 request's parameters as the v2 request it is the
// same as.
func decodeSESv1(r *http.Request, body []byte, b *budget) ([]*outgoing, *apiError) {
	form, apiErr := sesV1Params(r, body)
	if apiErr != nil {
		return nil, apiErr
	}
	action := form.Get("Action")
	v2 := map[string]any{"FromEmailAddress": form.Get("Source"), "ConfigurationSetName": form.Get("ConfigurationSetName")}
	n, apiErr := memberCount(form, "Tags")
	if apiErr != nil {
		return nil, apiErr
	}
	var tags []sesField
	for i := 1; i <= n; i++ {
		field := fmt.Sprintf("Tags.member.%d", i)
		tag := sesField{form.Get(field + ".Name"), form.Get(field + ".Value")}
		if apiErr := checkTag(field+".Name", field+".Value", tag); apiErr != nil {
			return nil, apiErr
		}
		tags = append(tags, tag)
	}
	v2["EmailTags"] = tags
	switch action {
	case "":
		return nil, &apiError{kind: missing, code: "MissingAction", field: "Action",
			msg: "the request has no Action; capture serves the Amazon SES v1 actions SendEmail and SendRawEmail"}
	case "SendEmail":
		lists := map[string][]string{}
		for _, name := range []string{"Destination.ToAddresses", "Destination.CcAddresses", "Destination.BccAddresses", "ReplyToAddresses"} {
			list, apiErr := members(form, name)
			if apiErr != nil {
				return nil, apiErr
			}
			lists[name] = list
		}
		v2["Destination"] = map[string]any{
			"ToAddresses":  lists["Destination.ToAddresses"],
			"CcAddresses":  lists["Destination.CcAddresses"],
			"BccAddresses": lists["Destination.BccAddresses"],
		}
		v2["ReplyToAddresses"] = lists["ReplyToAddresses"]
		simple := map[string]any{}
		if form.Has("Message.Subject.Data") {
			simple["Subject"] = map[string]string{"Data": form.Get("Message.Subject.Data")}
		}
		bodies := map[string]any{}
		for _, part := range []string{"Text", "Html"} {
			if form.Has("Message.Body." + part + ".Data") {
				bodies[part] = map[string]string{"Data": form.Get("Message.Body." + part + ".Data")}
			}
		}
		if len(bodies) > 0 {
			simple["Body"] = bodies
		}
		v2["Content"] = map[string]any{"Simple": simple}
	case "SendRawEmail":
		to, apiErr := members(form, "Destinations")
		if apiErr != nil {
			return nil, apiErr
		}
		if len(to) > 0 {
			v2["Destination"] = map[string]any{"ToAddresses": to}
		}
		v2["Content"] = map[string]any{"Raw": map[string]string{"Data": form.Get("RawMessage.Data")}}
	default:
		return nil, &apiError{kind: invalid, code: "InvalidAction", msg: fmt.Sprintf("capture serves the Amazon SES v1 actions "+
			"SendEmail and SendRawEmail, not %q; or use Amazon SES v2 (@aws-sdk/client-sesv2, POST /v2/email/outbound-emails)", action)}
	}
	req, err := json.Marshal(v2)
	if err != nil {
		return nil, &apiError{kind: malformed, msg: "the form cannot be read: " + err.Error()}
	}
	out, apiErr := decodeSES(r, req, b)
	if apiErr != nil {
		// Named as the v1 request names them.
		names := sesV1SendNames
		if action == "SendRawEmail" {
			names = sesV1RawNames
		}
		apiErr.field, apiErr.msg = names.Replace(apiErr.field), names.Replace(apiErr.msg)
		return nil, apiErr
	}
	for _, o := range out {
		o.action = action
	}
	return out, nil
}

// sesV1Params are a request's parameters: those of its query string and
// those of its form body, as the Query API takes either. A parameter
// given in both with other values is refused rather than one of them
// chosen silently.
func sesV1Params(r *http.Request, body []byte) (url.Values, *apiError) {
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, &apiError{kind: malformed, msg: "the query string cannot be read: " + err.Error()}
	}
	if len(body) == 0 {
		return query, nil
	}
	if mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mediaType != "application/x-www-form-urlencoded" {
		return nil, &apiError{kind: malformed, msg: "send the SES v1 request as an application/x-www-form-urlencoded form"}
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, &apiError{kind: malformed, msg: "the form body cannot be read: " + err.Error()}
	}
	for _, k := range sortedKeys(query) {
		if vs, ok := form[k]; ok && !slices.Equal(vs, query[k]) {
			return nil, errInvalid(k, "%s is given both in the query string and in the body, with other values; give it once", k)
		}
		form[k] = query[k]
	}
	return form, nil
}

// The v1 names of the v2 request's fields, for a refusal.
var (
	sesV1SendNames = strings.NewReplacer("FromEmailAddress", "Source", "Content.Simple.Subject", "Message.Subject",
		"Content.Simple.Body", "Message.Body", "Content.Simple", "Message", "EmailTags", "Tags")
	sesV1RawNames = strings.NewReplacer("FromEmailAddress", "Source", "Content.Raw.Data", "RawMessage.Data",
		"Destination.ToAddresses", "Destinations", "Destination", "Destinations", "EmailTags", "Tags")
)

// members reads a Query API list: prefix.member.1, prefix.member.2, ….
func members(form url.Values, prefix string) ([]string, *apiError) {
	n, apiErr := memberCount(form, prefix)
	if apiErr != nil {
		return nil, apiErr
	}
	out := make([]string, n)
	for i := range out {
		out[i] = form.Get(prefix + ".member." + strconv.Itoa(i+1))
	}
	return out, nil
}

// memberCount is how many members a Query API list has, read from every
// prefix.member.N key (a structure's prefix.member.N.Name too): a list with
// a gap, or an index that is not a number from 1, is refused naming the
// field, never cut short. Of several such keys, the refusal names the
// first in sorted order, the same one every time.
func memberCount(form url.Values, prefix string) (int, *apiError) {
	seen := map[int]bool{}
	for _, k := range sortedKeys(form) {
		rest, ok := strings.CutPrefix(k, prefix+".member.")
		if !ok {
			continue
		}
		index, _, _ := strings.Cut(rest, ".")
		i, err := strconv.Atoi(index)
		if err != nil || i < 1 || index[0] < '1' || index[0] > '9' {
			return 0, errInvalid(k, "%s: a list member's index must be a number from 1 (%s.member.1, %s.member.2, …)", k, prefix, prefix)
		}
		seen[i] = true
	}
	for i := 1; i <= len(seen); i++ {
		if !seen[i] {
			return 0, errInvalid(prefix, "%s: the list has no member %d but has one after it; number its members 1, 2, 3, … without a gap", prefix, i)
		}
	}
	return len(seen), nil
}
