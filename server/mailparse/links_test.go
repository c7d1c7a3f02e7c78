package mailparse

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func TestExtractLinks(t *testing.T) {
	tests := []struct {
		name       string
		html, text *string
		want       []Link
	}{
		{"nothing", nil, nil, nil},
		{
			name: "relative links dropped without base",
			html: ptr(`<a href="/a">A</a><a href="b">B</a><a href="//cdn.example/c">C</a><a href="https://example.com/d">D</a>`),
			want: []Link{{"https://example.com/d", ptr("D"), "https://example.com", KindOther}},
		},
		{
			name: "base applies to links before it and only the first counts",
			html: ptr(`<a href="early">E</a><base href="https://example.com/dir/"><base href="https://other.example/"><a href="late?x=1&amp;y=2#frag">L</a>`),
			want: []Link{
				{"https://example.com/dir/early", ptr("E"), "https://example.com", KindOther},
				{"https://example.com/dir/late?x=1&y=2#frag", ptr("L"), "https://example.com", KindOther},
			},
		},
		{
			name: "relative base is ignored",
			html: ptr(`<base href="/dir/"><a href="x">X</a>`),
		},
		{
			name: "entities, whitespace and newlines in href",
			html: ptr("<a href=\" https://example.com/p?a=1&amp;b=2&#38;c=3&quot\n&amp;d=%20 \">  Multi \n\t line  <b>bold</b>\u00a0text </a>"),
			want: []Link{{`https://example.com/p?a=1&b=2&c=3%22&d=%20`, ptr("Multi line bold text"), "https://example.com", KindOther}},
		},
		{
			name: "non-http schemes and hostless URLs dropped",
			html: ptr(`<a href="mailto:a@b.c">m</a><a href="tel:123">t</a><a href="javascript:void(0)">j</a><a href="ftp://x.example/">f</a><a href="http://">h</a><a href="https:///path">p</a><a href="http://exa mple.com/">s</a>`),
		},
		{
			name: "empty anchor and image anchor have no text",
			html: ptr(`<a href="https://example.com/1"></a><a href="https://example.com/2"><img src="x.png" alt="Logo"></a><a href="https://example.com/3">   </a>`),
			want: []Link{
				{"https://example.com/1", nil, "https://example.com", KindOther},
				{"https://example.com/2", nil, "https://example.com", KindOther},
				{"https://example.com/3", nil, "https://example.com", KindOther},
			},
		},
		{
			name: "unclosed anchor ends at the next one",
			html: ptr(`<a href="https://example.com/1">one <a href="https://example.com/2">two</a> after`),
			want: []Link{
				{"https://example.com/1", ptr("one"), "https://example.com", KindOther},
				{"https://example.com/2", ptr("two"), "https://example.com", KindOther},
			},
		},
		{
			name: "script and style text are not anchor text",
			html: ptr(`<a href="https://example.com/">Go<script>var a = "<a href='https://evil.example/'>";</script><style>a{}</style> now</a>`),
			want: []Link{{"https://example.com/", ptr("Go now"), "https://example.com", KindOther}},
		},
		{
			name: "first occurrence wins, HTML before text",
			html: ptr(`<a href="https://example.com/x">first</a><a href="https://example.com/x">second</a>`),
			text: ptr("https://example.com/y and https://example.com/x"),
			want: []Link{
				{"https://example.com/x", ptr("first"), "https://example.com", KindOther},
				{"https://example.com/y", nil, "https://example.com", KindOther},
			},
		},
		{
			name: "origin is scheme, host and port as the URL states them",
			html: ptr(`<a href="HTTP://User:Pw@Example.COM:80/Path">x</a><a href="https://[::1]:8443/">v6</a>` +
				`<a href="https://App.Example.COM:8443/x">mixed</a><a href="https://app.example.com:443/">443</a>` +
				`<a href="Https://a@b@Host.example?q=/p">query</a><a href="https://Host.example#/frag">fragment</a>`),
			want: []Link{
				{"HTTP://User:Pw@Example.COM:80/Path", ptr("x"), "HTTP://Example.COM:80", KindOther},
				{"https://[::1]:8443/", ptr("v6"), "https://[::1]:8443", KindOther},
				{"https://App.Example.COM:8443/x", ptr("mixed"), "https://App.Example.COM:8443", KindOther},
				{"https://app.example.com:443/", ptr("443"), "https://app.example.com:443", KindOther},
				{"Https://a%40b@Host.example?q=/p", ptr("query"), "Https://Host.example", KindOther},
				{"https://Host.example#/frag", ptr("fragment"), "https://Host.example", KindOther},
			},
		},
		{
			name: "text punctuation",
			text: ptr(`a https://e.example/1. b https://e.example/2, (https://e.example/3) <https://e.example/4> "https://e.example/5" ` +
				`https://e.example/6?! https://e.example/7... https://e.example/8) https://e.example/w_(x) [https://e.example/9] ` +
				"«https://e.example/10» “https://e.example/11” https://e.example/12\u00a0next https://e.example/13\u3000next"),
			want: []Link{
				{"https://e.example/1", nil, "https://e.example", KindOther},
				{"https://e.example/2", nil, "https://e.example", KindOther},
				{"https://e.example/3", nil, "https://e.example", KindOther},
				{"https://e.example/4", nil, "https://e.example", KindOther},
				{"https://e.example/5", nil, "https://e.example", KindOther},
				{"https://e.example/6", nil, "https://e.example", KindOther},
				{"https://e.example/7", nil, "https://e.example", KindOther},
				{"https://e.example/8", nil, "https://e.example", KindOther},
				{"https://e.example/w_(x)", nil, "https://e.example", KindOther},
				{"https://e.example/9", nil, "https://e.example", KindOther},
				{"https://e.example/10", nil, "https://e.example", KindOther},
				{"https://e.example/11", nil, "https://e.example", KindOther},
				{"https://e.example/12", nil, "https://e.example", KindOther},
				{"https://e.example/13", nil, "https://e.example", KindOther},
			},
		},
		{
			name: "text ignores other schemes and glued prefixes",
			text: ptr("ftp://e.example/ xhttps://e.example/ https:// http://: mailto:a@e.example https://e.example/ok"),
			want: []Link{{"https://e.example/ok", nil, "https://e.example", KindOther}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := ExtractLinks(tt.html, tt.text)
			eq(t, "links", got, tt.want)
			checkLinks(t, got)
		})
	}
}

func TestExtractLinksManyDuplicates(t *testing.T) {
	var b strings.Builder
	for i := range 5000 {
		b.WriteString(`<a href="https://example.com/`)
		b.WriteString(strings.Repeat("x", i%100))
		b.WriteString(`">l</a>`)
	}
	got, _ := ExtractLinks(ptr(b.String()), nil)
	if len(got) != 100 {
		t.Fatalf("got %d links, want 100", len(got))
	}
	checkLinks(t, got)
}

func TestExtractLinksCap(t *testing.T) {
	links := func(n int, prefix string) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, `<a href="https://example.com/%s%d">%d</a>`, prefix, i, i)
		}
		return b.String()
	}
	tests := []struct {
		name       string
		html, text string
		kept       int
		truncated  bool
		last       string // URL of the last link kept
	}{
		{name: "exactly the cap", html: links(maxLinks, "a"), kept: maxLinks, last: "https://example.com/a999"},
		{name: "one more", html: links(maxLinks+1, "a"), kept: maxLinks, truncated: true, last: "https://example.com/a999"},
		{name: "duplicates past the cap are not more", html: links(maxLinks, "a") + links(maxLinks, "a"), kept: maxLinks},
		{name: "invalid past the cap is not more", html: links(maxLinks, "a") + `<a href="https://">x</a><a href="mailto:a@b">m</a>`, kept: maxLinks},
		{name: "text links past the cap", html: links(maxLinks-1, "a"), text: "see https://example.com/t1 and https://example.com/t2",
			kept: maxLinks, truncated: true, last: "https://example.com/t1"},
		{name: "relative links wait for a late base", html: `<a href="/r0">r</a>` + links(maxLinks-1, "a") + `<a href="/r1">r</a><base href="https://b.example/">`,
			kept: maxLinks, truncated: true, last: "https://example.com/a998"},
		{name: "relative links without a base are dropped", html: `<a href="/r0">r</a>` + links(maxLinks, "a") + `<a href="/r1">r</a>`,
			kept: maxLinks, last: "https://example.com/a999"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, truncated := ExtractLinks(&tt.html, &tt.text)
			if len(got) != tt.kept || truncated != tt.truncated {
				t.Fatalf("%d links, truncated %v; want %d, %v", len(got), truncated, tt.kept, tt.truncated)
			}
			if tt.last != "" && got[len(got)-1].URL != tt.last {
				t.Errorf("last link %s, want %s", got[len(got)-1].URL, tt.last)
			}
			checkLinks(t, got)
		})
	}
}

// TestParseLinkHeavyMemory shows that what parsing costs in memory does
// not grow with the number of links: 40,000 links in 2 MiB of HTML cost
// about what 2,000 do. Before links were capped and the scan streamed,
// they cost three times as much.
func TestParseLinkHeavyMemory(t *testing.T) {
	allocated := func(raw []byte) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		m := Parse(raw)
		runtime.ReadMemStats(&after)
		if len(m.Links) != maxLinks || !m.LinksTruncated {
			t.Fatalf("%d links, truncated %v", len(m.Links), m.LinksTruncated)
		}
		// The scan stopped early; what it had gathered is still there.
		if m.Snippet == "" || m.Links[maxLinks-1].Text == nil {
			t.Errorf("snippet %q, last link %+v", m.Snippet, m.Links[maxLinks-1])
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	for _, qp := range []bool{false, true} {
		few := allocated(linkHeavyMessage(2<<20, 2_000, qp))
		many := allocated(linkHeavyMessage(2<<20, 40_000, qp))
		if many > few*3/2 {
			t.Errorf("qp %v: 40,000 links allocated %d bytes, 2,000 links %d", qp, many, few)
		}
	}
}
