package mailparse

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse starts from the .eml corpus; checkInvariants states what must
// hold for any input (a panic fails the run by itself).
func FuzzParse(f *testing.F) {
	addCorpus(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkInvariants(t, Parse(raw))
	})
}

// addCorpus seeds f with every .eml file of the corpora.
func addCorpus(f *testing.F) {
	f.Helper()
	for _, raw := range corpusMessages(f) {
		f.Add(raw)
	}
}

func corpusMessages(f *testing.F) [][]byte {
	f.Helper()
	var out [][]byte
	for _, dir := range []string{corpusDir, transactionalDir} {
		files, err := filepath.Glob(filepath.Join(dir, "*.eml"))
		if err != nil || len(files) == 0 {
			f.Fatalf("no seed corpus in %s: %v", dir, err)
		}
		for _, name := range files {
			raw, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			out = append(out, raw)
		}
	}
	return out
}

// FuzzFindCodes feeds the code finder the subject, text and HTML lines of
// the corpus messages and their mutations: whatever it reports must be a
// code of the right shape that stands in one of the texts.
func FuzzFindCodes(f *testing.F) {
	for _, raw := range corpusMessages(f) {
		m := Parse(raw)
		var text, html string
		if m.Text != nil {
			text = *m.Text
		}
		if m.HTML != nil {
			var ls linkSet
			html = scanHTML(*m.HTML, &ls, scanHTMLOptions{}).lines
		}
		f.Add(m.Subject, text, html)
	}
	f.Add("Your code: 482 913", "Code: ４８２９１３ 验证码482913", "Your login code:\n\n4 8 2 9 1 3")
	f.Add("K7Q-2XM", "code K7Q-2XM-", "PIN\u00a01234\u2011")
	f.Add("والرمز \u200f٤٨٢٩١٣\u200f", "סיסמה חד\u05beפעמית: 739201 کد تأیید: ۴۸۲۹۱۳ ١٢٫٥", "รหัสผ่านใช้ครั้งเดียว739201บาท आपका कोड 482913 है")
	f.Add("Two-factor", "Enter 302918 to continue. This is your authentication code.", "Ihr Bestätigungscode lautet: 5821\n認証コード：918273")
	f.Fuzz(func(t *testing.T, subject, text, lines string) {
		codes := findCodes(subject, &text, lines)
		checkCodes(t, codes, subject, truncateRunes(text, maxCodeText), lines)
	})
}

// checkCodes states what holds for any codes found in the given texts
// (their presence is checked only when texts are given).
func checkCodes(t *testing.T, codes []Code, texts ...string) {
	t.Helper()
	if len(codes) > maxCodes {
		t.Errorf("%d codes", len(codes))
	}
	seen := map[string]bool{}
	for _, c := range codes {
		letters, digits := 0, 0
		for _, r := range c.Value {
			switch {
			case '0' <= r && r <= '9':
				digits++
			case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
				letters++
			default:
				t.Errorf("code %q has %q", c.Value, r)
			}
		}
		if n := letters + digits; n < 4 || n > 10 || digits == 0 {
			t.Errorf("code %q has %d characters, %d digits", c.Value, n, digits)
		}
		if seen[c.Value] {
			t.Errorf("code %q twice", c.Value)
		}
		seen[c.Value] = true
		if !utf8.ValidString(c.Context) || c.Context == "" || utf8.RuneCountInString(c.Context) > contextRunes {
			t.Errorf("code %q: context %q", c.Value, c.Context)
		}
		found := len(texts) == 0
		for _, s := range texts {
			found = found || strings.Contains(codeValue(s), c.Value)
		}
		if !found {
			t.Errorf("code %q is in none of the texts", c.Value)
		}
	}
}

// FuzzLinkKind judges links of the corpus and their mutations: the kind is
// always one of the five, and judging never panics.
func FuzzLinkKind(f *testing.F) {
	for _, raw := range corpusMessages(f) {
		for _, l := range Parse(raw).Links {
			text := ""
			if l.Text != nil {
				text = *l.Text
			}
			f.Add(l.URL, text, "")
		}
	}
	f.Add("https://a.example/c/Xk2pQ9LmZ7", "click here", "To reset your password,")
	f.Add("https://a.example/?token=%zz&utm_x=1#t=abc123", "ログイン", "")
	f.Fuzz(func(t *testing.T, u, text, lead string) {
		cue := linkCue{label: text, lead: lead}
		if text != "" && strings.TrimSpace(text) == text {
			cue.text = &text // anchor text comes trimmed
		}
		var ls linkSet
		ls.add(u, cue, "")
		checkLinks(t, ls.links)
	})
}

func FuzzExtractLinks(f *testing.F) {
	f.Add(`<base href="https://example.com/a/"><a href="b?x=1&amp;y=2">t</a>`, "see https://example.com/c).")
	f.Add(`<a href="HTTP://[::1]:80/">x<a href=//h/p>y</a>`, "(https://e.example/w_(x)) <http://h:1/>")
	f.Add("<a href=\"\thttps://e.example/\n\">\u00a0</a><area href=rel>", "https://\u3000 http://")
	f.Fuzz(func(t *testing.T, html, text string) {
		links, _ := ExtractLinks(&html, &text)
		checkLinks(t, links)
	})
}

func BenchmarkParse(b *testing.B) {
	raw := readEML(b, "multipart-2k.eml")
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if m := Parse(raw); len(m.Links) != 4 {
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

// shortcutSeeds are single-part messages near the edge of what
// singleBody accepts.
var shortcutSeeds = []string{
	"From: a@example.com\r\nTo: b@example.com\r\nSubject: hi\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nhello https://example.com/x\r\n",
	"Subject: no content type\r\n\r\nplain body\r\n",
	"Subject: us-ascii\r\nContent-Type: text/plain; charset=\"us-ascii\"; format=flowed\r\nContent-Transfer-Encoding: 7bit\r\n\r\nbody\r\n",
	"Subject: folded\r\nContent-Type: text/plain;\r\n charset=UTF-8\r\nContent-Transfer-Encoding: 8BIT\r\n\r\nh\u00e9llo \u2014 w\u00f6rld\r\n",
	"Subject: empty body\r\n\r\n",
	"Subject: no blank line",
	"Subject: nul\r\n\r\nnul \x00 byte\r\n",
	"Subject: latin1\r\nContent-Type: text/plain; charset=iso-8859-1\r\n\r\ncaf\xe9\r\n",
	"Subject: bad utf-8\r\nContent-Type: text/plain; charset=utf-8\r\n\r\ncaf\xe9\r\n",
	"Subject: qp\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\ncaf=C3=A9\r\n",
	"Subject: name\r\nContent-Type: text/plain; name=a.txt\r\n\r\nfile\r\n",
	"Subject: disposition\r\nContent-Disposition: attachment\r\n\r\nfile\r\n",
	"Subject: two types\r\nContent-Type: text/plain\r\nContent-Type: text/html\r\n\r\n<b>x</b>\r\n",
	"Subject: html\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<a href=\"https://example.com/\">x</a>\r\n",
	"Subject: repaired\r\nunindented continuation\r\nContent-Type: text/plain\r\n\r\nbody\r\n",
	"Subject : space before colon\r\n\r\nbody\r\n",
	"X_Under: score\r\n\r\nbody\r\n",
	"Subject: blank continuation\r\nContent-Type: text/plain;\r\n \r\n charset=utf-8\r\n\r\nbody\r\n",
	"Subject: bare cr\rContent-Type: text/plain\r\n\r\nbody\r\n",
	"Subject: lf only\nContent-Type: text/plain; charset=utf-8\n\nbody\nmore\n",
	"From a@b Mon Jan 1 00:00:00 2024\r\nSubject: mbox\r\n\r\nbody\r\n",
	"Subject: boundary on text\r\nContent-Type: text/plain; boundary=x\r\n\r\n--x\r\nbody\r\n",
	"Subject: unknown cte\r\nContent-Transfer-Encoding: x-uuencode\r\n\r\nbody\r\n",
	"Subject: cte spaces\r\nContent-Transfer-Encoding:  7bit \r\n\r\nbody\r\n",
	"Subject: vt\r\nContent-Transfer-Encoding: 7bit\v\r\n\r\nbody\r\n",
	"Subject: ff\r\nContent-Transfer-Encoding:\f7bit\r\n\r\nbody\r\n",
	"Subject: nbsp\r\nContent-Transfer-Encoding: 8bit\u00a0\r\n\r\nbody\r\n",
	"Subject: nel\r\nContent-Type: text/plain; charset=\"utf-8\"\u0085\r\n\r\nbody\r\n",
	"Subject: vt type\r\nContent-Type: text/plain; charset=\"utf-8\"\v\r\n\r\nbody\r\n",
	"Subject: html no charset\r\nContent-Type: text/html\r\n\r\n<p>Code: <b>482913</b></p>\r\n",
	"Subject: html flowed\r\nContent-Type: text/html; charset=utf-8; format=flowed\r\n\r\n<p>x</p>\r\n",
	"Subject: html qp\r\nContent-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n<a href=3D\"https://e.example/\">x</a>\r\n",
	"Subject: html latin1\r\nContent-Type: text/html; charset=iso-8859-1\r\n\r\n<p>caf\xe9</p>\r\n",
	"Subject: html meta\r\nContent-Type: text/html\r\n\r\n<meta charset=\"windows-1251\"><p>\xcf\xf0</p>\r\n",
	"Subject: html empty\r\nContent-Type: text/html; charset=UTF-8\r\n\r\n",
	"Subject: html named\r\nContent-Type: text/html; name=page.html\r\n\r\n<p>x</p>\r\n",
	"Subject: html cid\r\nContent-Type: text/html\r\n\r\n<img src=\"cid:x\"><a href=\"https://e.example/u\">Unsubscribe</a>\r\n",
	"Subject: qp spaced\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nbad =ZZ end= \r\ntrailing space   \r\nlast=\t",
	"Subject: =?gb2312?B?1tDOxCCVMoI2?=\r\nContent-Type: text/plain; charset=gb2312\r\n\r\n\xd6\xd0\xce\xc4 \x952\x826 \x80\r\n",
	"Subject: =?utf-7?Q?Gr+APwA3w-e?= =?iso-8859-1?Q?=80?= =?us-ascii?Q?caf=C3=A9?=\r\nContent-Type: text/plain; charset=utf-7\r\n\r\nGr+APwA3w-e\r\n",
}

// splitSeeds are multiparts near the edge of what splitMIME accepts.
var splitSeeds = []string{
	"Content-Type: multipart/alternative; boundary=b\r\n\r\npreamble\r\n--b\r\nContent-Type: text/plain\r\n\r\nhi https://e.example/a\r\n--b\r\nContent-Type: text/html\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n<a href=3D\"https://e.example/b\">b</a>\r\n--b--\r\nepilogue\r\n",
	"Content-Type: multipart/mixed; boundary=o\n\n--o\nContent-Type: multipart/alternative; boundary=i\n\n--i\nContent-Type: text/plain\n\ntext\n--i\nContent-Type: text/html\n\n<p>html</p>\n--i--\n--o\nContent-Type: application/pdf; name=a.pdf\nContent-Transfer-Encoding: base64\n\nJVBERi0=\n--o--",
	"Content-Type: multipart/related; boundary=r\r\n\r\n--r\r\nContent-Type: text/html\r\n\r\n<img src=\"cid:x\">\r\n--r\r\nContent-Type: image/png\r\nContent-ID: <x>\r\n\r\nPNG\r\n--r--\r\n",
	"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nline ends in CR\r\r\n--b--\r\n",
	"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nbare\rCR\r\n--b--\r\n",
	"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n--b\r\nContent-Type: text/plain\r\n\r\nafter an empty part\r\n--b--\r\n",
	"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\nno part header\r\n--b--\r\n",
	"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nsays --b in a line\r\n--b--\r\n",
	"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nnever closed\r\n",
	"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b \r\nContent-Type: text/plain\r\n\r\npadded delimiter\r\n--b--\r\n",
	"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain; boundary=c\r\n\r\ntext with a boundary\r\n--b--\r\n",
	"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: multipart/alternative\r\n\r\nno inner boundary\r\n--b--\r\n",
	"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: multipart/alternative; boundary=bb\r\n\r\n--bb\r\nContent-Type: text/plain\r\n\r\ninner boundary extends the outer\r\n--bb--\r\n--b--\r\n",
	"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\n\r\n--b\r\nContent-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\ncaf=E9\r\n\r\n--b--",
	"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: base64\r\n\r\n!!not base64!!\r\n--b\r\nContent-Type: text/plain\r\n\r\n\xff\xfe\r\n--b--\r\n",
	"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nno final newline\r\n--b--",
	"Content-Type: multipart/mixed; boundary=\"a\r\n \r\n b\"\r\n\r\n--a b\r\nContent-Type: text/plain\r\n\r\nhello\r\n--a b--\r\n",
	"Content-Type: multipart/mixed; boundary=o\r\n\r\n--o\r\nContent-Type: multipart/alternative; boundary=\"i\r\n \r\n j\"\r\n\r\n--i j\r\nContent-Type: text/plain\r\n\r\nhello\r\n--i j--\r\n--o--\r\n",
	"Content-Type: multipart/mixed; boundary=\"" + strings.Repeat("x", 4091) + "\"\r\n\r\n--" + strings.Repeat("x", 4091) +
		"\r\nContent-Type: text/plain\r\n\r\nhello\r\n--" + strings.Repeat("x", 4091) + "--\r\n",
	"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n" +
		"end= \r\nsoft=\t\r\n--b\r\nContent-Type: text/plain\r\n\r\n8bit= \r\n--b--\r\n",
}

// FuzzShortcutAgrees shows that Parse's shortcuts (plain single-part
// messages read without enmime, well-formed multiparts split before it)
// give exactly what reading the whole message with enmime gives.
func FuzzShortcutAgrees(f *testing.F) {
	for _, s := range append(shortcutSeeds, splitSeeds...) {
		f.Add([]byte(s))
	}
	addCorpus(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		fast, slow := parse(raw, true), parse(raw, false)
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("shortcut differs for %q\nshortcut: %+v\nenmime:   %+v", raw, fast, slow)
		}
	})
}

// TestShortcutTaken keeps FuzzShortcutAgrees honest: the shortcut must
// actually apply to the plain seeds, and to nothing that needs decoding.
func TestShortcutTaken(t *testing.T) {
	takes := map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true, 6: true, 13: true, 18: true, 19: true, 20: true, 23: true,
		29: true, 34: true, 36: true}
	for i, s := range shortcutSeeds {
		msg := []byte(s)
		if n := mboxFromLine(msg); n > 0 {
			msg = msg[n:]
		}
		hdr := scanHeader(msg)
		if _, _, ok := singleBody(hdr, msg[hdr.body:]); ok != takes[i] {
			t.Errorf("seed %d %q: shortcut %v, want %v", i, s, ok, takes[i])
		}
	}
}

// TestSplitTaken keeps the multipart half of FuzzShortcutAgrees honest:
// well-formed samples of the corpus must be split without enmime's
// boundary reader, and the broken ones must not.
func TestSplitTaken(t *testing.T) {
	for name, want := range map[string]bool{
		"multipart-2k.eml": true, "alternative-qp.eml": true, "related-attachments.eml": true,
		"broken-boundary.eml": false, "unclosed-boundary.eml": false,
	} {
		raw := readEML(t, name)
		hdr := scanHeader(raw)
		if _, ok := splitMIME(raw, hdr); ok != want {
			t.Errorf("%s: split %v, want %v", name, ok, want)
		}
	}
	takes := map[int]bool{0: true, 1: true, 2: true, 11: true, 13: true, 14: true, 15: true, 19: true}
	for i, s := range splitSeeds {
		raw := []byte(s)
		if _, ok := splitMIME(raw, scanHeader(raw)); ok != takes[i] {
			t.Errorf("split seed %d %q: split %v, want %v", i, s, ok, takes[i])
		}
	}
}
