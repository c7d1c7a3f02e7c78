package weburl

import (
	"net/url"
	"testing"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// Already URIs: unchanged, escapes and their case kept.
		{"https://app.test/verify?token=abc&x=1#top", "https://app.test/verify?token=abc&x=1#top"},
		{"https://app.test/a%2fb?q=%e2%9c%93", "https://app.test/a%2fb?q=%e2%9c%93"},
		{"http://user:pw@127.0.0.1:8080/p;x=1?a=(b)*", "http://user:pw@127.0.0.1:8080/p;x=1?a=(b)*"},
		{"http://[::1]:3000/hook", "http://[::1]:3000/hook"},
		// What browsers escape before sending.
		{"https://sp.test/a b", "https://sp.test/a%20b"},
		{`https://a.test/"q"`, "https://a.test/%22q%22"},
		{"https://a.test/<script>", "https://a.test/%3Cscript%3E"},
		{"https://a.test/{curly}|pipe^`", "https://a.test/%7Bcurly%7D%7Cpipe%5E%60"},
		{"https://uni.test/ünï", "https://uni.test/%C3%BCn%C3%AF"},
		{"https://a.test/100%?p=50%", "https://a.test/100%25?p=50%25"},
		{"https://a.test/p?q=a b#frag ment#2", "https://a.test/p?q=a%20b#frag%20ment%232"},
		{"https://a.test/p?next=/x?y", "https://a.test/p?next=/x?y"},
		{"https://a.test/[x]", "https://a.test/%5Bx%5D"},
		// A backslash is a slash in an http(s) path, as in a browser; in
		// the query it is a byte like another.
		{`https://a.test/back\slash?q=\`, "https://a.test/back/slash?q=%5C"},
		{`https://a.test\path`, "https://a.test/path"},
		// A non-ASCII host in its ASCII form.
		{"https://例え.jp/パス?q=値", "https://xn--r8jz45g.jp/%E3%83%91%E3%82%B9?q=%E5%80%A4"},
		{"https://Bücher.test:8443/", "https://xn--bcher-kva.test:8443/"},
	} {
		got := Escape(c.in)
		if got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
		if !isURI(got) {
			t.Errorf("Escape(%q) = %q, not a URI", c.in, got)
		}
	}
}

// An escaped URL names what the original named: the same host, and the
// same path and query once decoded.
func TestEscapeKeepsMeaning(t *testing.T) {
	for _, raw := range []string{
		"https://sp.test/a b/ü?x=a b&y=ü#f g",
		`https://a.test/"q"/<s>?{c}|^`,
	} {
		before, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		after, err := url.Parse(Escape(raw))
		if err != nil {
			t.Fatalf("%q → %q: %v", raw, Escape(raw), err)
		}
		bq, _ := url.ParseQuery(before.RawQuery)
		aq, _ := url.ParseQuery(after.RawQuery)
		if before.Host != after.Host || before.Path != after.Path || before.Fragment != after.Fragment ||
			bq.Encode() != aq.Encode() {
			t.Errorf("%q: %#v\nbecame %#v", raw, before, after)
		}
	}
}

// Whatever comes in, what comes out is a URI, escaping it again changes
// nothing, and a URL Go could read with a plain host name is still one it
// reads. (Go reads a host holding a quote or a space, which has no URI
// form it reads: such a link is dropped where it is checked.)
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"https://a.test/a b", "http://例え.jp/%zz", `https://x\y?z#a#b`, "https://u@h:1/[]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got := Escape(raw)
		if !isURI(got) {
			t.Fatalf("Escape(%q) = %q, not a URI", raw, got)
		}
		if again := Escape(got); again != got {
			t.Fatalf("Escape(%q) = %q, then %q", raw, got, again)
		}
		if p, err := url.Parse(raw); err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != "" &&
			plainHost(p.Host) {
			if _, err := url.Parse(got); err != nil {
				t.Fatalf("Escape(%q) = %q: %v", raw, got, err)
			}
		}
	})
}

func plainHost(h string) bool {
	for i := 0; i < len(h); i++ {
		if !unreserved(h[i]) && h[i] != ':' {
			return false
		}
	}
	return true
}

// Links are escaped by the thousand in a large message: one that is already
// a URI costs no allocation.
func TestEscapeOfAURIAllocatesNothing(t *testing.T) {
	u := "https://app.example.com:8443/verify?token=abc123&next=%2Fhome#top"
	if n := testing.AllocsPerRun(100, func() { _ = Escape(u) }); n != 0 {
		t.Errorf("Escape of a URI: %v allocations, want 0", n)
	}
}
