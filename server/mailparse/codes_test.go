package mailparse

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func codeValues(cs []Code) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Value)
	}
	return out
}

func TestFindCodes(t *testing.T) {
	tests := []struct {
		name    string
		subject string
		text    string
		lines   string // visible HTML text, as scanHTML lays it out
		want    []string
	}{
		{name: "cue before", text: "Your verification code is 482913.", want: []string{"482913"}},
		{name: "cue after", subject: "482913 is your Acme code", want: []string{"482913"}},
		{name: "colon, no space", text: "Code:4821", want: []string{"4821"}},
		{name: "PIN that looks like a year", text: "Your PIN is 2019.", want: []string{"2019"}},
		{name: "verb", text: "Enter 482913 to verify your account.", want: []string{"482913"}},
		{name: "OTP five digits", text: "OTP: 48291", want: []string{"48291"}},
		{name: "grouped with no-break space", text: "Your code: 482\u00a0913", want: []string{"482913"}},
		{name: "two groups of four", text: "Security code 4829-1035", want: []string{"48291035"}},
		{name: "alphanumeric", text: "Your one-time code: XK7P2Q", want: []string{"XK7P2Q"}},
		{name: "lowercase needs a strong cue", text: "Your code: a7f3k9"},
		{name: "lowercase with a strong cue", text: "Your verification code: a7f3k9", want: []string{"a7f3k9"}},
		{name: "Russian", text: "Ваш код подтверждения: 4821", want: []string{"4821"}},
		{name: "Chinese without punctuation", text: "验证码482913，请勿泄露", want: []string{"482913"}},
		{name: "full-width digits", text: "認証コード：４８２９１３", want: []string{"482913"}},
		{name: "German compound", text: "Ihr Sicherheitscode: 730114", want: []string{"730114"}},
		{name: "isolated line below the cue", lines: "Use this code to sign in:\n\n482913\n\nIt expires soon.", want: []string{"482913"}},
		{name: "cell beside the cue", lines: "Your code 482913", want: []string{"482913"}},
		{name: "spaced digits alone", lines: "Your login code:\n\n4 8 2 9 1 3", want: []string{"482913"}},
		{name: "prefixed code alone", text: "Your sign-in code:\n\nACM-482913\n\nExpires in 10 minutes.", want: []string{"482913"}},
		{name: "one-letter prefix alone", lines: "Your sign-in code:\nG-482913", want: []string{"482913"}},
		{name: "a word before the hyphen is no prefix", text: "Your sign-in code:\n\nORDERS-482913", want: nil},
		{name: "subject and body merge", subject: "Your code: 482913", text: "Code: 482913", want: []string{"482913"}},
		{name: "order number between", text: "Your verification code for order 4821 is 9931.", want: []string{"9931"}},
		{name: "ranked", text: "Your new code is 664028. The old code 118734 no longer works.", want: []string{"664028", "118734"}},
		{name: "named in the next sentence", text: "Enter 302918 to continue. This is your authentication code.", want: []string{"302918"}},
		{name: "next sentence, passcode", text: "Use 482913 to sign in. It is a one-time passcode.", want: []string{"482913"}},
		// Equally named codes rank by shape: six digits is what a
		// one-time code most often looks like. Document order breaks ties.
		{name: "two labelled codes", text: "Ihr Bestätigungscode lautet: 5821\n認証コード：918273", want: []string{"918273", "5821"}},

		{name: "phone", text: "Your code is below. Call us at 1-800-555-0199 or (415) 555-0132."},
		{name: "order number", text: "Order #48213 has shipped. Order number: 48214."},
		{name: "price", text: "Code valid on orders over $4821. Total: 4 821,00 €"},
		{name: "promo", text: "Use promo code SAVE2024 for 20% off."},
		{name: "promo without the word promo", text: "Use code WELCOME10 at checkout."},
		{name: "postcode", text: "Postcode: SW1A 1AA. ZIP code 94103."},
		{name: "error code", text: "Error code 0x80070005"},
		{name: "code as a verb", text: "Learn to code in 2024."},
		{name: "time and date", text: "Your code expires at 10:30 on 14.05.2024 (2024-05-14)."},
		{name: "room", text: "Meeting code is in the invite. Room 4821."},
		{name: "card", text: "Card ending 4242. Auth code: 004821"},
		{name: "far away", text: "Here is your code.\n\nRegards,\nAcme\n\nAcme Inc., 1234 Market St, San Francisco, CA 94103"},
		{name: "inside a URL", text: "Your code: https://example.com/verify/482913"},
		{name: "inside an address", text: "Code sent to user482913@example.com"},
		{name: "too long", text: "Your code: 12345678901"},
		{name: "letters only", text: "Your code: ABCDEF"},
		{name: "minutes", text: "The code is valid for 1440 minutes."},
		{name: "unequal groups", text: "Your code: 555-0132"},
		{name: "next sentence, weak cue", text: "Enter 302918 to continue. This is your code."},
		{name: "next sentence, order number", text: "Your order 302918 has shipped. Your verification code is below."},
		{name: "next sentence, phone", text: "Call 4155550132 today. We will ask for your security code."},
		{name: "next sentence, date", text: "See you on 2024-05-14. Bring your verification code."},
		{name: "next sentence, labelling", text: "Ref 302918 is attached. Verification code: 5521", want: []string{"5521"}},
		{name: "two sentences on", text: "Enter 302918 to continue. Thanks. This is your authentication code."},
		{name: "next paragraph", text: "Enter 302918 to continue.\n\nThis is your authentication code."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var text *string
			if tt.text != "" {
				text = &tt.text
			}
			got := findCodes(tt.subject, text, tt.lines)
			if !slices.Equal(codeValues(got), tt.want) {
				t.Errorf("codes = %+v, want %q", got, tt.want)
			}
			for _, c := range got {
				if n := utf8.RuneCountInString(c.Context); n == 0 || n > contextRunes {
					t.Errorf("context of %s has %d characters: %q", c.Value, n, c.Context)
				}
			}
		})
	}
}

func TestCodeContext(t *testing.T) {
	text := "Hello there, and welcome to the service that we built for you over many years. " +
		"Your verification code is 482913. It expires in ten minutes, so please hurry up and enter it in the app now."
	got := findCodes("", &text, "")
	if len(got) != 1 {
		t.Fatalf("codes = %+v", got)
	}
	ctx := got[0].Context
	if !strings.Contains(ctx, "Your verification code is 482913.") || utf8.RuneCountInString(ctx) > contextRunes {
		t.Errorf("context = %q", ctx)
	}
	if strings.HasPrefix(ctx, " ") || strings.HasSuffix(ctx, " ") {
		t.Errorf("context has edge spaces: %q", ctx)
	}
}

// TestFindCodesBounded feeds text crowded with cue words and numbers: the
// work per number is bounded, and so is the number of codes.
func TestFindCodesBounded(t *testing.T) {
	text := strings.Repeat("code 482913 code 118734 PIN 5521 verification ", 5000)
	got := findCodes(strings.Repeat("code 1234 ", 1000), &text, text)
	if len(got) > maxCodes {
		t.Errorf("%d codes", len(got))
	}
}

func TestListUnsubscribe(t *testing.T) {
	raw := crlf(`From: news@example.com
List-Unsubscribe: <mailto:leave@example.com?subject=x>, <https://example.com/u/1?t=9>,
 <https://example.com/u/2>
Content-Type: text/html

<a href="https://example.com/u/2">Manage</a> <a href="https://example.com/read">Read</a>
`)
	m := Parse(raw)
	eq(t, "Links", m.Links, []Link{
		{"https://example.com/u/2", ptr("Manage"), "https://example.com", KindUnsubscribe},
		{"https://example.com/read", ptr("Read"), "https://example.com", KindOther},
		{"https://example.com/u/1?t=9", nil, "https://example.com", KindUnsubscribe},
	})
}
