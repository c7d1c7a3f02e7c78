package mailparse

import (
	"encoding/base64"
	"mime"
	"testing"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
)

func encodeWith(t *testing.T, enc encoding.Encoding, s string) []byte {
	t.Helper()
	b, err := enc.NewEncoder().Bytes([]byte(s))
	if err != nil {
		t.Fatalf("encoding %q: %v", s, err)
	}
	return b
}

// charsetMessage labels body (base64, so any bytes pass) and a subject
// word with the same charset.
func charsetMessage(label string, body []byte) []byte {
	word := "=?" + label + "?B?" + base64.StdEncoding.EncodeToString(body) + "?="
	return []byte("Subject: " + word + "\r\nContent-Type: text/plain; charset=" + label +
		"\r\nContent-Transfer-Encoding: base64\r\n\r\n" + base64.StdEncoding.EncodeToString(body) + "\r\n")
}

// Labels decode as WHATWG's Encoding Standard maps them, in bodies and in
// header words alike.
func TestParseCharsetLabels(t *testing.T) {
	const han = "中文 𠀀 €" // 𠀀 (U+20000) is a four-byte GB18030 sequence
	gb := encodeWith(t, simplifiedchinese.GB18030, han)
	sjis := encodeWith(t, japanese.ShiftJIS, "日本語")
	tests := []struct {
		label string
		body  []byte
		want  string
	}{
		{"gb2312", gb, han},
		{"GB2312", gb, han},
		{"gbk", gb, han},
		{"x-gbk", gb, han},
		{"cp936", gb, han},
		{"euc-cn", gb, han},
		{"csgb2312", gb, han},
		{"gb18030", gb, han},
		{"iso-8859-1", []byte("\x80 caf\xe9 \x93q\x94"), "€ café “q”"},
		{"latin1", []byte("\x80"), "€"},
		{"ks_c_5601-1987", encodeWith(t, korean.EUCKR, "한국어"), "한국어"},
		{"shift_jis", sjis, "日本語"},
		{"ms932", sjis, "日本語"},
		{"windows-31j", sjis, "日本語"},
		{"x-sjis", sjis, "日本語"},
		{"big5-hkscs", encodeWith(t, traditionalchinese.Big5, "繁體中文"), "繁體中文"},
		{"utf-7", []byte("Gr+APwA3w-e"), "Grüße"},
		{"us-ascii", []byte("caf\xc3\xa9"), "café"}, // stated, not meant
		{"cp932", sjis, "日本語"},
		{"8859-1", []byte("\x80"), "€"},
	}
	for _, tt := range tests {
		t.Run(tt.label, func(t *testing.T) {
			m := Parse(charsetMessage(tt.label, tt.body))
			eq(t, "Text", m.Text, ptr(tt.want))
			eq(t, "Subject", m.Subject, tt.want)
			eq(t, "Warnings", m.Warnings, nil)
		})
	}
}

// The Q-encoded UTF-7 word from the wild, next to its body.
func TestParseUTF7HeaderWord(t *testing.T) {
	m := Parse([]byte("Subject: =?utf-7?Q?Gr+APwA3w-e?=\r\nContent-Type: text/plain; charset=utf-7\r\n\r\nGr+APwA3w-e"))
	eq(t, "Subject", m.Subject, "Grüße")
	eq(t, "Text", m.Text, ptr("Grüße"))
	eq(t, "Warnings", m.Warnings, nil)
}

// TestBodyCharsetsMatchLookup holds enmime's charset table, which decodes
// bodies, to lookupCharset, which decodes everything else: a body and a
// header word in the same charset must read the same, for every
// encoding the standard names.
func TestBodyCharsetsMatchLookup(t *testing.T) {
	var sample []byte
	for b := 0x20; b < 0x100; b++ {
		sample = append(sample, byte(b))
	}
	const mixed = "Grüße € Привет Ωμέγα שלום 日本語 中文 한국어 𠀀 ๑"
	for _, label := range []string{
		"utf-8", "ibm866", "iso-8859-2", "iso-8859-3", "iso-8859-4", "iso-8859-5", "iso-8859-6",
		"iso-8859-7", "iso-8859-8", "iso-8859-8-i", "iso-8859-10", "iso-8859-13", "iso-8859-14",
		"iso-8859-15", "iso-8859-16", "koi8-r", "koi8-u", "macintosh", "windows-874",
		"windows-1250", "windows-1251", "windows-1252", "windows-1253", "windows-1254",
		"windows-1255", "windows-1256", "windows-1257", "windows-1258", "x-mac-cyrillic",
		"gbk", "gb18030", "cp936", "euc-cn", "cp850", "8859-2", "big5", "euc-jp", "iso-2022-jp", "shift_jis", "euc-kr",
		"utf-16be", "utf-16le", "utf-16", "x-user-defined", "utf-7",
	} {
		t.Run(label, func(t *testing.T) {
			enc, _, ok := lookupCharset(label)
			if !ok {
				t.Fatalf("lookupCharset(%q) failed", label)
			}
			body := sample
			if b, err := encoding.ReplaceUnsupported(enc.NewEncoder()).Bytes([]byte(mixed)); err == nil {
				body = b
			}
			if label == "utf-7" {
				// The UTF-7 package's encoder fails on this text; its decoder is what counts.
				body = []byte("Gr+APwA3w-e +IKw- +BB8EQAQ4BDIENQRC- a+-b")
			}
			want, err := enc.NewDecoder().Bytes(body)
			if err != nil {
				t.Fatalf("decoding: %v", err)
			}
			m := Parse(charsetMessage(label, body))
			eq(t, "Text", m.Text, ptr(crlfToLF(want)))
			d := mime.WordDecoder{CharsetReader: (&headerDecoder{w: &warnings{}}).charsetReader}
			if got, err := d.DecodeHeader("=?" + label + "?B?" + base64.StdEncoding.EncodeToString(body) + "?="); err != nil || got != string(want) {
				t.Errorf("header word = %q, %v; want %q", got, err, want)
			}
		})
	}
}
