package web

import (
	"testing"
	"time"
)

func TestInlineTokenExpires(t *testing.T) {
	key := []byte("a key for the test")
	live := inlineToken(key, "p", "m", "a", time.Now().Add(time.Minute).Unix())
	if !validInlineToken(key, "p", "m", "a", live) {
		t.Error("a live token refused")
	}
	if validInlineToken(key, "p", "m", "b", live) || validInlineToken(key, "p", "n", "a", live) || validInlineToken(key, "q", "m", "a", live) {
		t.Error("a token opened another part")
	}
	if expired := inlineToken(key, "p", "m", "a", time.Now().Add(-time.Second).Unix()); validInlineToken(key, "p", "m", "a", expired) {
		t.Error("an expired token taken")
	}
	if validInlineToken([]byte("another key"), "p", "m", "a", live) {
		t.Error("a token made with another key taken")
	}
	for _, bad := range []string{"", ".", "zzzzzzzzzzzzzzzz.x", live + "x"} {
		if validInlineToken(key, "p", "m", "a", bad) {
			t.Errorf("token %q taken", bad)
		}
	}
}

func TestInlinePartType(t *testing.T) {
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
	for _, c := range []struct {
		label, data, want string
	}{
		{"application/octet-stream", png, "image/png"},
		{"image/jpeg", png, "image/png"},                               // the bytes decide
		{"image/tiff", "II*\x00 unknown to the sniffer", "image/tiff"}, // unknown bytes, labelled an image
		{"image/svg+xml", `<svg xmlns="http://www.w3.org/2000/svg"/>`, "image/svg+xml"},
		{"image/png", "<html><script>alert(1)</script>", ""},
		{"image/svg+xml", "<html><script>alert(1)</script>", ""},
		{"text/html", "<p>hello</p>", ""},
		{"application/octet-stream", "\x00\x01 binary", ""},
		{"application/octet-stream", `<svg xmlns="http://www.w3.org/2000/svg"/>`, ""},
	} {
		got, ok := inlinePartType(c.label, []byte(c.data))
		if !ok {
			got = ""
		}
		if got != c.want {
			t.Errorf("%s %.20q served as %q, want %q", c.label, c.data, got, c.want)
		}
	}
}
