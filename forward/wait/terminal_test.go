package wait

import (
	"encoding/json"
	"testing"
)

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

func TestVisibleJSONIsTheSameJSON(t *testing.T) {
	in := "{\n  \"a\": \"x\u009b2J\u202e\x7fy שלום\",\n  \"b\": \"bad\xff\"\n}\n"
	got := string(visibleJSON([]byte(in)))
	want := "{\n  \"a\": \"x\\u009b2J\\u202e\\u007fy שלום\",\n  \"b\": \"bad\\ufffd\"\n}\n"
	if got != want {
		t.Errorf("visibleJSON = %q, want %q", got, want)
	}
	var before, after map[string]string
	if err := json.Unmarshal([]byte(in), &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(got), &after); err != nil || before["a"] != after["a"] || before["b"] != after["b"] {
		t.Errorf("decodes as %q (%v), want %q", after, err, before)
	}
	if plain := []byte("{\"a\": \"é\"}\n"); &visibleJSON(plain)[0] != &plain[0] {
		t.Error("JSON with nothing to escape was copied")
	}
}
