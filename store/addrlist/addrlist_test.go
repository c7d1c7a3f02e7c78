package addrlist

import (
	"slices"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"", []string{""}},
		{"a@x.test", []string{"a@x.test"}},
		{"a@x.test, b@x.test;c@x.test", []string{"a@x.test", " b@x.test", "c@x.test"}},
		{`"Doe, Jane" <j@x.test>, b@x.test`, []string{`"Doe, Jane" <j@x.test>`, " b@x.test"}},
		{`"say \"hi, there\"" <h@x.test>`, []string{`"say \"hi, there\"" <h@x.test>`}},
		{"Odd <a,b@x.test>, c@x.test", []string{"Odd <a,b@x.test>", " c@x.test"}},
		{"a@x.test,", []string{"a@x.test", ""}},
		{`"unclosed, a@x.test`, []string{`"unclosed, a@x.test`}},
	} {
		if got := Split(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("Split(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
