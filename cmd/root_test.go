package cmd

import "testing"

func TestOneLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"connect to db:\n\ta: refused\n\ta: refused", "connect to db: a: refused"},
		{"connect to db:\n\ta: refused\n\tb: refused\n", "connect to db: a: refused; b: refused"},
		{"resolve: lookup x: no such host\nlookup x: no such host", "resolve: lookup x: no such host"},
	} {
		if got := oneLine(tc.in); got != tc.want {
			t.Errorf("oneLine(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
