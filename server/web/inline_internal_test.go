package web

import (
	"testing"
	"time"
)

func TestInlineTokenExpires(t *testing.T) {
	h := &Handler{inlineKey: []byte("a key for the test")}
	live := h.inlineToken("p", "m", "a", time.Now().Add(time.Minute).Unix())
	if !h.validInlineToken("p", "m", "a", live) {
		t.Error("a live token refused")
	}
	if h.validInlineToken("p", "m", "b", live) || h.validInlineToken("p", "n", "a", live) || h.validInlineToken("q", "m", "a", live) {
		t.Error("a token opened another part")
	}
	if expired := h.inlineToken("p", "m", "a", time.Now().Add(-time.Second).Unix()); h.validInlineToken("p", "m", "a", expired) {
		t.Error("an expired token taken")
	}
	for _, bad := range []string{"", ".", "zzzzzzzzzzzzzzzz.x", live + "x"} {
		if h.validInlineToken("p", "m", "a", bad) {
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
