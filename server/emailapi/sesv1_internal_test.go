package emailapi

import (
	"net/url"
	"strings"
	"testing"
)

// TestSESv1ErrorIsTotal maps refusals to the Query API's codes: v2's
// names for the signature's faults become v1's, and a code v1 has no name
// for (one v2 may give later) is answered with its kind's code, never
// sent as it is.
func TestSESv1ErrorIsTotal(t *testing.T) {
	for _, c := range []struct {
		e      *apiError
		status int
		code   string
	}{
		{&apiError{kind: badCredential, code: "InvalidSignatureException"}, 403, "SignatureDoesNotMatch"},
		{&apiError{kind: badCredential, code: "IncompleteSignatureException"}, 400, "IncompleteSignature"},
		{&apiError{kind: badCredential}, 403, "InvalidClientTokenId"},
		{&apiError{kind: badCredential, code: "ExpiredTokenException"}, 403, "InvalidClientTokenId"},
		{&apiError{kind: invalid, code: "XAmzContentSHA256Mismatch"}, 400, "XAmzContentSHA256Mismatch"},
		{&apiError{kind: missing, code: "MissingAction"}, 400, "MissingAction"},
		{&apiError{kind: invalid, code: "InvalidAction"}, 400, "InvalidAction"},
		{&apiError{kind: malformed}, 400, "InvalidParameterValue"},
		{&apiError{kind: mistyped}, 400, "InvalidParameterValue"},
		{&apiError{kind: invalid, code: "invalid_attachment"}, 400, "InvalidParameterValue"},
		{&apiError{kind: invalid, code: "NotFoundException"}, 400, "InvalidParameterValue"},
		{&apiError{kind: missing, code: "SomeFutureException"}, 400, "MissingParameter"},
		{&apiError{kind: tooLarge, code: "LimitExceededException"}, 400, "MessageRejected"},
		{&apiError{kind: unavailable, code: "TooManyRequestsException"}, 503, "ServiceUnavailable"},
	} {
		if status, code, _, _ := sesV1Error(c.e); status != c.status || code != c.code {
			t.Errorf("kind %d code %q: %d %s, want %d %s", c.e.kind, c.e.code, status, code, c.status, c.code)
		}
	}
}

// TestSESv1MemberCountNamesOneField refuses a list with two bad member
// indexes naming the same one every time: the first in sorted order, not
// whichever a map's iteration came to first.
func TestSESv1MemberCountNamesOneField(t *testing.T) {
	form := url.Values{
		"Destinations.member.1":     {"alice@example.com"},
		"Destinations.member.first": {"bob@example.com"},
		"Destinations.member.0":     {"carol@example.com"},
		"Destinations.member.x":     {"dave@example.com"},
	}
	for range 50 {
		_, apiErr := memberCount(form, "Destinations")
		if apiErr == nil || apiErr.field != "Destinations.member.0" || !strings.HasPrefix(apiErr.msg, "Destinations.member.0: ") {
			t.Fatalf("refusal %+v, want one naming Destinations.member.0", apiErr)
		}
	}
}
