package mailparse

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse starts from the .eml corpus; checkInvariants states what must
// hold for any input (a panic fails the run by itself).
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(corpusDir, "*.eml"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed corpus in %s: %v", corpusDir, err)
	}
	for _, name := range files {
		raw, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkInvariants(t, Parse(raw))
	})
}

func FuzzExtractLinks(f *testing.F) {
	f.Add(`<base href="https://example.com/a/"><a href="b?x=1&amp;y=2">t</a>`, "see https://example.com/c).")
	f.Add(`<a href="HTTP://[::1]:80/">x<a href=//h/p>y</a>`, "(https://e.example/w_(x)) <http://h:1/>")
	f.Add("<a href=\"\thttps://e.example/\n\">\u00a0</a><area href=rel>", "https://\u3000 http://")
	f.Fuzz(func(t *testing.T, html, text string) {
		checkLinks(t, ExtractLinks(&html, &text))
	})
}

func BenchmarkParse(b *testing.B) {
	raw := readEML(b, "multipart-2k.eml")
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if m := Parse(raw); len(m.Links) != 3 {
			b.Fatalf("got %d links", len(m.Links))
		}
	}
}

// BenchmarkParsePlain is the message `capture bench smtp` sends: 2 KiB of
// single-part UTF-8 text with one link.
func BenchmarkParsePlain(b *testing.B) {
	raw := []byte("From: Bench <bench@example.com>\r\nTo: <to@example.com>\r\n" +
		"Subject: smtpload message 1.2\r\nMessage-ID: <1.2.1@smtpload.localhost>\r\n" +
		"Date: Sun, 22 Nov 2026 00:27:28 +0000\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n\r\n" +
		"Confirm your address: https://app.example.com/confirm?token=0123456789abcdef\r\n" +
		strings.Repeat("The quick brown fox jumps over the lazy dog. 0123456789 abcdefghijklmnopqr\r\n", 26))
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if m := Parse(raw); len(m.Links) != 1 || m.Text == nil {
			b.Fatalf("got %d links", len(m.Links))
		}
	}
}
