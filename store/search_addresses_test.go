package store

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// A message whose To and Cc name more than ListedAddresses is found by a
// phrase or a whole address past the listed ones, as by one before them:
// the summary lists the first 100, the index and the headers hold all.
func TestSearchAddressesPastTheListed(t *testing.T) {
	f := newSearchFixture(t)
	var to, cc []Address
	var toHeader, ccHeader []string
	for i := 1; i <= 150; i++ {
		a := Address{Name: fmt.Sprintf("User %d", i), Address: fmt.Sprintf("user%03d@to.example", i)}
		if i == 145 {
			a.Name = "Doe, Jane" // a comma inside quotes, as the header spells it
			toHeader = append(toHeader, `"Doe, Jane" <`+a.Address+`>`)
		} else {
			toHeader = append(toHeader, a.Name+" <"+a.Address+">")
		}
		to = append(to, a)
	}
	for i := 1; i <= 120; i++ {
		a := Address{Address: fmt.Sprintf("cc%03d@cc.example", i)}
		cc = append(cc, a)
		ccHeader = append(ccHeader, a.Address)
	}
	f.message("many", NewMessage{Subject: "Release notes", EnvelopeFrom: "a@b.example",
		From: &Address{Address: "sender@from.example"}, To: to, Cc: cc,
		Headers: []Header{{Name: "From", Values: []string{"sender@from.example"}},
			// Two To fields, as a message may have: both are read.
			{Name: "To", Values: []string{strings.Join(toHeader[:75], ", "), strings.Join(toHeader[75:], ",\r\n ")}},
			{Name: "Cc", Values: []string{strings.Join(ccHeader, ", ")}},
			{Name: "Subject", Values: []string{"Release notes"}}}})
	f.message("few", NewMessage{Subject: "Other", EnvelopeFrom: "a@b.example",
		To:      []Address{{Name: "User 140", Address: "user140@to.example"}},
		Headers: []Header{{Name: "To", Values: []string{"User 140 <user140@to.example>"}}}})

	cases := []struct {
		q    string
		want []string // newest first
	}{
		{"user130", []string{"many"}},
		{"user050@to.example", []string{"many"}}, // listed
		{`"User 50"`, []string{"many"}},
		{"user130@to.example", []string{"many"}}, // past the listed
		{`"User 130"`, []string{"many"}},
		{"user140@to.example", []string{"few", "many"}},
		{`"User 140"`, []string{"few", "many"}},
		{"cc119@cc.example", []string{"many"}},
		{"cc120@cc.example", []string{"many"}},
		{`"doe jane"`, []string{"many"}},
		{`"release notes" "user 149"`, []string{"many"}}, // a subject and an address
		{`"user 150" cc120@cc.example`, []string{"many"}},
		// A phrase is within one name or address, never across two.
		{`"example user 131"`, []string{}},
		{`"User 151"`, []string{}},
		{"cc121@cc.example", []string{}},
	}
	f.bothWays(func(t *testing.T) {
		for _, tc := range cases {
			if got := f.messages(MessageFilter{Q: tc.q}); !slices.Equal(got, tc.want) {
				t.Errorf("q=%q found %v, want %v", tc.q, got, tc.want)
			}
		}
	})
}

// parseAddressList reads a list strict parsing rejects leniently, and one
// cut short keeps the addresses before the cut.
func TestParseAddressList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Address
	}{
		{"", nil},
		{`A <a@x.example>, "B, C" <b@x.example>`, []Address{{"A", "a@x.example"}, {"B, C", "b@x.example"}}},
		{`Zoë Smith <zoe@x.example>`, []Address{{"Zoë Smith", "zoe@x.example"}}},
		{`A <a@x.example>; bad@@x, (c@x.example), "D" <d@x.example>`,
			[]Address{{"A", "a@x.example"}, {"", "bad@@x"}, {"", "c@x.example"}, {"D", "d@x.example"}}},
		{`A <a@x.example>, B <b@x.ex`, []Address{{"A", "a@x.example"}, {"", "b@x.ex"}}},
	} {
		if got := parseAddressList(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("parseAddressList(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
