package mailparse

import (
	"strings"

	"github.com/cention-sany/utf7"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/simplifiedchinese"
)

// lookupCharset resolves a MIME charset label the way browsers resolve
// one (the WHATWG Encoding Standard's labels, through htmlindex), so that
// a message reads as its sender's mail client showed it: iso-8859-1 and
// us-ascii are windows-1252, ks_c_5601-1987 is euc-kr, gb2312 is gbk.
// Two things differ from what htmlindex hands back:
//
//   - gbk and its labels (gb2312, x-gbk, cp936, euc-cn…) decode with the
//     gb18030 decoder, as the standard says (x/text's GBK decoder rejects
//     the four-byte sequences that senders labelling gb2312 still send);
//   - UTF-7, which browsers dropped but mail still carries (RFC 2152), is
//     decoded with the same decoder enmime uses for bodies.
//
// It is the one table for header words, RFC 2231 parameters and bodies;
// name is the encoding's canonical name, which enmime's own table maps to
// the same decoder (TestBodyCharsetsMatchLookup holds them together).
func lookupCharset(label string) (enc encoding.Encoding, name string, ok bool) {
	label = strings.ToLower(strings.TrimSpace(label))
	switch label {
	case "utf-7", "utf7", "unicode-1-1-utf-7", "csunicode11utf7":
		return utf7.UTF7, "utf-7", true
	}
	if alias, ok := mailLabels[label]; ok {
		label = alias
	} else if n, ok := strings.CutPrefix(label, "8859"); ok && len(n) > 1 && (n[0] == '-' || n[0] == '_') {
		label = "iso-8859-" + n[1:]
	}
	if label == "cp850" {
		return charmap.CodePage850, "cp850", true
	}
	enc, err := htmlindex.Get(label)
	if err != nil {
		return nil, "", false
	}
	name, err = htmlindex.Name(enc)
	if err != nil {
		return nil, "", false
	}
	if name == "gbk" {
		return simplifiedchinese.GB18030, "gb18030", true
	}
	return enc, name, true
}

// mailLabels are labels mail software writes that the Encoding Standard
// does not list (Windows code page numbers, MySQL's utf8mb4), each with
// the label of the encoding it means. enmime's table knows them for bodies.
var mailLabels = map[string]string{
	"cp936": "gbk", "ms936": "gbk", "windows-936": "gbk", "euc-cn": "gbk",
	"cp932": "shift_jis", "cp949": "euc-kr",
	"ibm850": "cp850", "cp-850": "cp850",
	"utf8mb4": "utf-8",
}

// windows1252 reads 8-bit text whose charset is unknown or wrong: legacy
// mailers almost always meant Windows-1252 or its subset ISO-8859-1, and
// every byte decodes to something.
func windows1252(b []byte) []byte {
	out, _ := charmap.Windows1252.NewDecoder().Bytes(b)
	return out
}
