package api

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzLoneSurrogate: JSON text that is valid UTF-8 and that loneSurrogate
// passes decodes without a replacement character it did not spell out,
// and text it refuses has one (encoding/json's stand-in for the half pair).
func FuzzLoneSurrogate(f *testing.F) {
	for _, seed := range []string{
		`{"a":"\ud83d\ude00"}`, `{"a":"\ud800"}`, `{"a":"\udc00"}`, `{"a":"\\ud800"}`, `{"a":"\\\ud800"}`,
		`["\ud83d\u0041", "x"]`, `"\u00e9\ud834\udd1e"`, `{"a":"\ud83d\ude"}`, `{"a":"\"\ud800"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !utf8.Valid(body) || !json.Valid(body) {
			return
		}
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			return
		}
		decoded, _ := json.Marshal(v)
		replaced := strings.Count(string(decoded), "\ufffd")
		spelled := strings.Count(string(body), "\ufffd") + strings.Count(strings.ToLower(string(body)), `\ufffd`)
		lone := loneSurrogate(body)
		if lone < 0 && replaced > spelled {
			t.Errorf("%q passed, but decodes with %d replacement characters (%d spelled out)", body, replaced, spelled)
		}
		if lone >= 0 && replaced == spelled {
			t.Errorf("%q refused at %d, but decodes without a replacement character", body, lone)
		}
	})
}
