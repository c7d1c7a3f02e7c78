package emailapi

import (
	"encoding/base64"
	"mime"
	"net/http"
	"net/mail"
	"slices"
	"strings"
)

// bearer reads "Authorization: Bearer <token>".
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}

// parseAddress reads one address as the providers take them: a bare
// addr-spec or "Name <addr-spec>".
func parseAddress(field, s string) (mail.Address, *apiError) {
	s = strings.TrimSpace(s)
	if s == "" {
		return mail.Address{}, errMissing(field, field+" is empty")
	}
	a, err := mail.ParseAddress(s)
	if err != nil {
		return mail.Address{}, errInvalid(field, "%s: %q is not a valid email address (want addr@example.com or Name <addr@example.com>)", field, s)
	}
	return *a, nil
}

// parseAddressList reads a comma-separated list of addresses.
func parseAddressList(field, s string) ([]mail.Address, *apiError) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	as, err := mail.ParseAddressList(s)
	if err != nil {
		return nil, errInvalid(field, "%s: %q is not a valid list of email addresses", field, s)
	}
	out := make([]mail.Address, len(as))
	for i, a := range as {
		out[i] = *a
	}
	return out, nil
}

// parseAddresses reads each element of a list as parseAddressList does, so
// an element may itself hold several comma-separated addresses.
func parseAddresses(field string, list []string) ([]mail.Address, *apiError) {
	var out []mail.Address
	for _, s := range list {
		as, err := parseAddressList(field, s)
		if err != nil {
			return nil, err
		}
		out = append(out, as...)
	}
	return out, nil
}

// decodeBase64 reads attachment content, with or without padding and line
// breaks, as senders produce it.
func decodeBase64(field, s string) ([]byte, *apiError) {
	s = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, s)
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
	}
	if err != nil {
		return nil, errInvalid(field, "%s is not valid base64", field)
	}
	return b, nil
}

// decodeAttachment completes a from a request's base64 content: it checks
// the content and the content type, naming the request's own fields in a
// refusal, and picks a content type from the file name when none is given.
func decodeAttachment(a attachment, content, contentField, typeField string) (attachment, *apiError) {
	data, apiErr := decodeBase64(contentField, content)
	if apiErr != nil {
		return a, apiErr
	}
	return withData(a, data, typeField)
}

// withData completes a with its decoded bytes: it checks the content type
// (named typeField in a refusal) and picks one from the file name when
// none is given.
func withData(a attachment, data []byte, typeField string) (attachment, *apiError) {
	if apiErr := checkContentType(typeField, a.ContentType); apiErr != nil {
		return a, apiErr
	}
	a.ContentType = contentTypeFor(a.ContentType, a.Filename)
	a.Data = data
	return a, nil
}

// checkContentType refuses an attachment's content type that cannot be
// read. A type without a subtype ("pdf") is taken, as the providers take
// it, and written as application/octet-stream; only a body's type
// (parseContentType) must be a full MIME type.
func checkContentType(field, ct string) *apiError {
	if ct == "" {
		return nil
	}
	if _, _, err := mime.ParseMediaType(ct); err != nil {
		return errInvalid(field, "%s: %q is not a MIME type (e.g. application/pdf)", field, ct)
	}
	return nil
}

// parseContentType splits a content type as a provider's request gives it
// ("text/html; charset=UTF-8", "text/calendar; method=REQUEST") into its
// media type, lower-cased, and its parameters, their values as given: a
// part's Content-Type is written from the two, never from the whole
// string.
func parseContentType(field, ct string) (string, map[string]string, *apiError) {
	mediaType, params, err := mime.ParseMediaType(ct)
	if err != nil || !strings.Contains(mediaType, "/") {
		return "", nil, errInvalid(field, "%s: %q is not a MIME type (e.g. application/pdf)", field, ct)
	}
	return mediaType, params, nil
}

// reservedHeaders are the fields a provider writes itself from its own
// request fields; a custom header may not replace them.
var reservedHeaders = []string{"From", "To", "Cc", "Bcc", "Subject", "Reply-To", "Sender",
	"Content-Type", "Content-Transfer-Encoding", "Mime-Version"}

// checkHeader refuses a custom header that is not a valid field name or
// that would replace a field the provider writes.
func checkHeader(field, name string) *apiError {
	if name == "" {
		return errInvalid(field, "%s: a header name is empty", field)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c > '~' || c == ':' {
			return errInvalid(field, "%s: %q is not a valid header name", field, name)
		}
	}
	if slices.ContainsFunc(reservedHeaders, func(r string) bool { return strings.EqualFold(r, name) }) {
		return errInvalid(field, "%s: the %s header is set by its own field, not as a custom header", field, name)
	}
	return nil
}

// sortedKeys returns a map's keys in order: JSON objects have none, and a
// stored message should not change from one run to the next.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
