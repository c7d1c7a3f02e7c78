package store

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestSearchDecodedBodies: a form body is searched percent-decoded and a
// JSON body with its escapes decoded, as well as as sent; a bad escape
// leaves the rest decoded, and a body of another type is read as sent.
func TestSearchDecodedBodies(t *testing.T) {
	f := newSearchFixture(t)
	ct := func(v string) []Header { return []Header{{Name: "Content-Type", Values: []string{v}}} }
	f.request("form", NewRequest{Path: "/ipn", Headers: ct("application/x-www-form-urlencoded; charset=UTF-8"),
		Body: []byte("payer_email=buyer%40example.com&custom=order%3D9981&first_name=Jos%C3%A9&memo=thank+you+kindly&bad=100%+sure%zz&latin=caf%E9")})
	f.request("json", NewRequest{Path: "/hook", Headers: ct("application/json"),
		Body: []byte(`{"name":"Zo\u00eb Ad\u00e8le","emoji":"\ud83d\ude00ok","line":"first\nsecond","q":"say \"hi\"","lone":"\udc00x"}`)})
	f.request("problem", NewRequest{Path: "/hook", Headers: ct("Application/Problem+JSON"),
		Body: []byte(`{"detail":"caf\u00e9 \u0141\u00f3d\u017a`)}) // not valid JSON: cut short
	f.request("plain", NewRequest{Path: "/hook", Headers: ct("text/plain"),
		Body: []byte(`plain%40text Zo\u00ebplain`)})
	cases := []struct {
		q    string
		want []string
	}{
		{"buyer@example.com", []string{"form"}},
		{"buyer%40example.com", []string{"form"}}, // as sent, too
		{"40example", []string{"form"}},
		{"order=9981", []string{"form"}},
		{`"custom=order=9981"`, []string{"form"}},
		{"jose", []string{"form"}},
		{"José", []string{"form"}},
		{`"thank you kindly"`, []string{"form"}},
		{`"100 sure zz"`, []string{"form"}}, // bad escapes kept as sent
		{"caf%E9", []string{"form"}},        // not UTF-8: kept as sent
		{"zoe", []string{"json"}},
		{"zoë adèle", []string{"json"}},
		{`"zoe adele"`, []string{"json"}},
		{`"zo u00eb ad"`, []string{"json"}}, // as sent, too
		{`"first second"`, []string{"json"}},
		{`"say hi"`, []string{"json"}},
		{"udc00x", []string{"json"}}, // a lone surrogate: kept as sent
		{"cafe", []string{"problem"}},
		{"lodz", []string{"problem"}},
		{"plain@text", []string{}}, // text/plain: as sent only
		{"zoeplain", []string{}},
		{"u00ebplain", []string{"plain"}}, // as sent
	}
	f.bothWays(func(t *testing.T) {
		for _, tc := range cases {
			if got := f.requests(RequestFilter{Q: tc.q}); !slices.Equal(got, tc.want) {
				t.Errorf("q=%s found %v, want %v", tc.q, got, tc.want)
			}
		}
	})
}

// TestDecodeBodyMediaTypes: only form and JSON bodies are decoded, the
// Content-Type read whatever its case and parameters.
func TestDecodeBodyMediaTypes(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        bodyEscapes
	}{
		{"Content-Type", "application/x-www-form-urlencoded", formEscapes},
		{"content-type", " Application/X-WWW-Form-Urlencoded ; charset=utf-8", formEscapes},
		{"Content-Type", "application/json", jsonEscapes},
		{"Content-Type", "application/json; charset=utf-8", jsonEscapes},
		{"Content-Type", "application/vnd.api+json", jsonEscapes},
		{"Content-Type", "+json", noEscapes},
		{"Content-Type", "text/plain", noEscapes},
		{"Content-Type", "multipart/form-data; boundary=x", noEscapes},
		{"X-Content-Type", "application/json", noEscapes},
	} {
		if got := bodyEscapesOf([]Header{{Name: tc.name, Values: []string{tc.value}}}); got != tc.want {
			t.Errorf("%s: %s reads as %d, want %d", tc.name, tc.value, got, tc.want)
		}
	}
	if got := bodyEscapesOf(nil); got != noEscapes {
		t.Errorf("no Content-Type: %d", got)
	}
}

// TestRequestTokensAllocations: decoding a body costs tokenizing it no
// allocation (the pool keeps its buffer), and a body with nothing to
// decode no work either: each allocates what the same body sent as
// text/plain does.
func TestRequestTokensAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops pooled buffers at random")
	}
	allocs := func(ct string, body []byte) float64 {
		headers := []Header{{Name: "Content-Type", Values: []string{ct}}, {Name: "Host", Values: []string{"127.0.0.1"}}}
		requestTokens("/hook", "", headers, body) // fill the pool
		return testing.AllocsPerRun(100, func() { requestTokens("/hook", "", headers, body) })
	}
	for _, tc := range []struct{ ct, body string }{
		{"application/json", `{"event":"invoice.paid","id":"evt_0001","data":{"name":"Zoë"}}`},
		{"application/x-www-form-urlencoded", "event=invoice.paid&id=evt_0001&name=Zoë"},
		{"application/json", `{"event":"invoice.paid","name":"Zo\u00eb"}`},
		{"application/x-www-form-urlencoded", "event=invoice.paid&id=evt_0001&name=Zo%C3%AB+Keller"},
	} {
		body := []byte(tc.body)
		if n, plain := allocs(tc.ct, body), allocs("text/plain", body); n != plain {
			t.Errorf("%s %s: %.1f allocations, %.1f as text/plain", tc.ct, tc.body, n, plain)
		}
	}
}

// TestDecodeBody: what each kind of escape decodes to, and what is kept
// as sent.
func TestDecodeBody(t *testing.T) {
	for _, tc := range []struct {
		e          bodyEscapes
		body, want string
	}{
		{formEscapes, "a=b%40c.d&e=f+g", "a=b@c.d&e=f g"},
		{formEscapes, "n=Jos%C3%A9&m=%e2%82%ac", "n=José&m=€"},
		{formEscapes, "p=100%&q=%zz&r=%4", "p=100%&q=%zz&r=%4"},
		{formEscapes, "latin=caf%E9&ok=%C3%A9", "latin=caf%E9&ok=é"},
		{formEscapes, "half=%C3", "half=%C3"},
		{jsonEscapes, `{"n":"Zo\u00EB","e":"\ud83d\ude00","s":"a\"b\\c\/d\te"}`, "{\"n\":\"Zoë\",\"e\":\"😀\",\"s\":\"a\"b\\c/d\te\"}"},
		{jsonEscapes, `\ud800x \udc00\ud800 \ud83d\u0041 \u12 \q \`, `\ud800x \udc00\ud800 \ud83dA \u12 \q \`},
		{jsonEscapes, `\\u00e9`, `\u00e9`},
	} {
		got, ok := decodeBody(tc.e, []byte(tc.body), nil)
		if !ok || string(got) != tc.want {
			t.Errorf("decodeBody(%d, %s) = %s, %v; want %s", tc.e, tc.body, got, ok, tc.want)
		}
	}
	for _, tc := range []struct {
		e    bodyEscapes
		body string
	}{
		{formEscapes, "a=b&c=d"},
		{jsonEscapes, `{"a":"b%40c+d"}`},
		{noEscapes, `a%40b \u00e9`},
	} {
		if got, ok := decodeBody(tc.e, []byte(tc.body), nil); ok {
			t.Errorf("decodeBody(%d, %s) = %s: nothing to decode", tc.e, tc.body, got)
		}
	}
}

// FuzzDecodeBody: decoding keeps UTF-8 text UTF-8 and decodes what
// net/url and encoding/json decode as they do.
func FuzzDecodeBody(f *testing.F) {
	f.Fuzz(func(t *testing.T, body string) {
		if !utf8.ValidString(body) {
			return
		}
		form := appendFormDecoded(nil, []byte(body))
		if !utf8.Valid(form) {
			t.Fatalf("form %q decodes to %q, not UTF-8", body, form)
		}
		if want, err := url.QueryUnescape(body); err == nil && utf8.ValidString(want) && string(form) != want {
			t.Fatalf("form %q decodes to %q, net/url to %q", body, form, want)
		}
		js := appendJSONDecoded(nil, []byte(body))
		if !utf8.Valid(js) {
			t.Fatalf("JSON %q decodes to %q, not UTF-8", body, js)
		}
		var want string
		if err := json.Unmarshal([]byte(body), &want); err == nil && !strings.ContainsRune(want, utf8.RuneError) &&
			strings.HasPrefix(body, `"`) && string(js) != `"`+want+`"` {
			t.Fatalf("JSON %q decodes to %q, encoding/json to %q", body, js, want)
		}
	})
}

// TestDecodesWords: a second pass over a body is taken only for escapes
// that can change its words.
func TestDecodesWords(t *testing.T) {
	for _, tc := range []struct {
		e    bodyEscapes
		body string
		want bool
	}{
		{formEscapes, "a=b+c&d=e", false},
		{formEscapes, "a=b%40c", true},
		{jsonEscapes, `{"a":"say \"hi\"","p":"a\/b","w":"c:\\d"}`, false},
		{jsonEscapes, `{"a":"\\u00e9"}`, false},
		{jsonEscapes, `{"a":"Zo\u00eb"}`, true},
		{jsonEscapes, `{"a":"line1\nline2"}`, true},
		{jsonEscapes, `{"a":"end\\"}`, false},
		{jsonEscapes, `trailing \`, false},
		{noEscapes, `a%40b \u00e9`, false},
	} {
		if got := decodesWords(tc.e, []byte(tc.body)); got != tc.want {
			t.Errorf("decodesWords(%d, %s) = %v, want %v", tc.e, tc.body, got, tc.want)
		}
	}
}
