package termtext

import "testing"

func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"plain é ✓ 日本":                            "plain é ✓ 日本",
		"tab\tand\nlines\r\nkept":                 "tab\tand\nlines\r\nkept",
		"a\x1b]52;c;AAAA\x07b":                    "a^[]52;c;AAAA^Gb",
		"nul\x00 bs\x08 lone cr\r end":            "nul^@ bs^H lone cr^M end",
		"del\x7f c1\u009b2J\u0085":                "del\uFFFD c1\uFFFD2J\uFFFD",
		"bad\xff\xfeutf8":                         "bad\uFFFD\uFFFDutf8",
		"lre\u202a rlo\u202e lri\u2066 pdi\u2069": "lre\uFFFD rlo\uFFFD lri\uFFFD pdi\uFFFD",
		// Right-to-left letters and the marks that steer them stay.
		"שלום עולם \u200fمرحبا\u200e \u061c": "שלום עולם \u200fمرحبا\u200e \u061c",
		"literal \uFFFD": "literal \uFFFD",
	} {
		if got := Visible(in); got != want {
			t.Errorf("Visible(%q) = %q, want %q", in, got, want)
		}
	}
}
