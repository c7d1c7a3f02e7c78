package contract_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/server/api/contract"
)

// Every code of SPEC §8 with its status: the table the servers answer from.
func TestStatusOf(t *testing.T) {
	want := map[string]int{
		"invalid_parameter": 400, "invalid_cursor": 400, "unauthorized": 401, "not_found": 404,
		"method_not_allowed": 405, "no_target": 409, "quota_exceeded": 403, "rate_limited": 429,
		"too_many_waits": 429, "internal": 500, "unavailable": 503,
	}
	for code, status := range want {
		if got := contract.StatusOf(code); got != status {
			t.Errorf("StatusOf(%s) = %d, want %d", code, got, status)
		}
	}
	if got := contract.StatusOf("no_such_code"); got != 500 {
		t.Errorf("unknown code: %d", got)
	}
}

// What a server encodes, the client decodes to the same error.
func TestErrorRoundTrip(t *testing.T) {
	tests := []struct {
		name       string
		err        *contract.Error
		status     int
		retryAfter string
		auth       bool
	}{
		{"invalid", contract.Invalid(map[string]string{"limit": "1 to 100", "wait": "0 to 30"}), 400, "", false},
		{"unauthorized", contract.Errorf(contract.CodeUnauthorized, "unknown key"), 401, "", true},
		{"oversize capture", &contract.Error{Code: contract.CodeQuotaExceeded, Status: 413, Message: "too big"}, 413, "", false},
		{"rate limited", &contract.Error{Code: contract.CodeRateLimited, Message: "slow", RetryAfter: 1500 * time.Millisecond}, 429, "2", false},
		{"unavailable", &contract.Error{Code: contract.CodeUnavailable, Message: "later", RetryAfter: 5 * time.Second}, 503, "5", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			contract.WriteError(rec, tt.err)
			res := rec.Result()
			if res.StatusCode != tt.status || res.Header.Get("Content-Type") != "application/json" ||
				res.Header.Get("Retry-After") != tt.retryAfter || (res.Header.Get("WWW-Authenticate") != "") != tt.auth {
				t.Fatalf("answer %d %v", res.StatusCode, res.Header)
			}
			var env struct {
				Error map[string]any `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || len(env.Error) != 3 || env.Error["fields"] == nil {
				t.Fatalf("envelope %s: %v", rec.Body, err)
			}
			got := contract.DecodeError(res.StatusCode, res.Header, rec.Body.Bytes())
			if got.Code != tt.err.Code || got.Message != tt.err.Message || got.HTTPStatus() != tt.status ||
				len(got.Fields) != len(tt.err.Fields) || (tt.retryAfter != "") != (got.RetryAfter > 0) {
				t.Errorf("decoded %#v from %#v", got, tt.err)
			}
		})
	}
}

// An answer that is not the envelope keeps its status and no code, so a
// proxy's 404 page is never taken for the API's not_found.
func TestDecodeNotAnEnvelope(t *testing.T) {
	e := contract.DecodeError(http.StatusNotFound, http.Header{}, []byte("<html>nope</html>"))
	if e.Code != "" || e.HTTPStatus() != 404 || e.Fields == nil || contract.IsCode(e, contract.CodeNotFound) {
		t.Errorf("DecodeError = %#v", e)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "3": 3 * time.Second, "-1": 0, "soon": 0,
		now.Add(10 * time.Second).Format(http.TimeFormat): 10 * time.Second,
		now.Add(-time.Minute).Format(http.TimeFormat):     0,
	} {
		if got := contract.ParseRetryAfter(v, now); got != want {
			t.Errorf("ParseRetryAfter(%q) = %s, want %s", v, got, want)
		}
	}
}

func TestBearerToken(t *testing.T) {
	for header, want := range map[string]string{
		"Bearer cap_x": "cap_x", "bearer  cap_x ": "cap_x", "Token cap_x": "", "Bearer": "", "Bearer ": "",
		"Bearer cap_x cap_y": "",
	} {
		got, ok := contract.BearerToken(header)
		if got != want || ok != (want != "") {
			t.Errorf("BearerToken(%q) = %q, %v", header, got, ok)
		}
	}
}

func TestTime(t *testing.T) {
	v := contract.Time{Time: time.Date(2026, 1, 2, 16, 4, 5, 0, time.FixedZone("x", 3600))}
	b, _ := json.Marshal(v)
	if string(b) != `"2026-01-02T15:04:05.000Z"` {
		t.Errorf("Marshal = %s", b)
	}
	var back contract.Time
	if err := json.Unmarshal(b, &back); err != nil || !back.Equal(v.Time) {
		t.Errorf("Unmarshal = %v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`"2026-01-02 15:04"`), &back); err == nil {
		t.Error("a time without a zone was read")
	}
	// RFC 3339 takes T and Z in either case, and an unencoded + in a query
	// arrives as a space.
	for _, s := range []string{"2026-01-02T15:04:05Z", "2026-01-02t15:04:05z", "2026-01-02t16:04:05+01:00", "2026-01-02T16:04:05 01:00"} {
		if got, err := contract.ParseTime(s); err != nil || !got.Equal(v.Time) {
			t.Errorf("ParseTime(%q) = %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"2026-01-02x15:04:05Z", "2026-01-02T15:04:05", "z"} {
		if _, err := contract.ParseTime(s); err == nil {
			t.Errorf("ParseTime(%q) read a time", s)
		}
	}
}

func TestList(t *testing.T) {
	for _, tt := range []struct {
		l    contract.List[int]
		wire string
	}{
		{contract.List[int]{}, `{"items":[],"next":null}`},
		{contract.List[int]{Items: []int{3, 2}, Next: "req_2"}, `{"items":[3,2],"next":"req_2"}`},
	} {
		b, _ := json.Marshal(tt.l)
		if string(b) != tt.wire {
			t.Errorf("Marshal = %s, want %s", b, tt.wire)
		}
		var back contract.List[int]
		if err := json.Unmarshal(b, &back); err != nil || back.Next != tt.l.Next || len(back.Items) != len(tt.l.Items) {
			t.Errorf("Unmarshal(%s) = %+v, %v", b, back, err)
		}
	}
}

func TestAll(t *testing.T) {
	pages := map[string]struct {
		items []int
		next  string
	}{"": {[]int{1, 2}, "c1"}, "c1": {[]int{3}, "c2"}, "c2": {[]int{4}, ""}}
	got, err := contract.All(func(before string) ([]int, string, error) {
		p := pages[before]
		return p.items, p.next, nil
	})
	if err != nil || len(got) != 4 || got[3] != 4 {
		t.Errorf("All = %v, %v", got, err)
	}
}

// Headers keep their order and gather a repeated name under its first
// appearance, canonical.
func TestHeaders(t *testing.T) {
	hs := contract.Headers{{Name: "x-b", Values: []string{"1"}}, {Name: "A", Values: []string{"2"}}, {Name: "X-B", Values: []string{"3"}}}
	b, _ := json.Marshal(hs)
	if string(b) != `{"X-B":["1","3"],"A":["2"]}` {
		t.Errorf("Marshal = %s", b)
	}
	var back contract.Headers
	if err := json.Unmarshal(b, &back); err != nil || len(back) != 2 || back[0].Name != "X-B" || back.Get("x-b") != "1" {
		t.Errorf("Unmarshal = %+v, %v", back, err)
	}
}

func TestHeaderEdit(t *testing.T) {
	for wire, want := range map[string]contract.HeaderEdit{
		`null`:      {Remove: true},
		`"v"`:       {Values: []string{"v"}},
		`["a","b"]`: {Values: []string{"a", "b"}},
	} {
		var got contract.HeaderEdit
		if err := json.Unmarshal([]byte(wire), &got); err != nil || !got.Valid() || got.Remove != want.Remove || len(got.Values) != len(want.Values) {
			t.Errorf("Unmarshal(%s) = %+v, %v", wire, got, err)
		}
		if b, _ := json.Marshal(got); string(b) != wire && string(b) != "["+wire+"]" {
			t.Errorf("Marshal(%+v) = %s, want %s", got, b, wire)
		}
	}
	for _, wire := range []string{`3`, `["a",1]`, `{}`} {
		var got contract.HeaderEdit
		if err := json.Unmarshal([]byte(wire), &got); err != nil || got.Valid() {
			t.Errorf("Unmarshal(%s) = %+v, %v; want an invalid edit and no error", wire, got, err)
		}
	}
}

func TestParseTime(t *testing.T) {
	want := time.Date(2026, 1, 2, 13, 4, 5, 0, time.UTC)
	for _, s := range []string{"2026-01-02T13:04:05Z", "2026-01-02T15:04:05+02:00", "2026-01-02T15:04:05 02:00"} {
		if got, err := contract.ParseTime(s); err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"2026-01-02T15:04:05", "2026-01-02", "yesterday"} {
		if _, err := contract.ParseTime(s); err == nil {
			t.Errorf("ParseTime(%q): want an error for a time without a zone", s)
		}
	}
	// The offsets at the ends of RFC 3339's range, and its fraction of any
	// length.
	for s, want := range map[string]time.Time{
		"2026-01-02T15:04:05.5+23:59":         time.Date(2026, 1, 1, 15, 5, 5, 5e8, time.UTC),
		"2026-01-02T15:04:05.123456789-23:59": time.Date(2026, 1, 3, 15, 3, 5, 123456789, time.UTC),
		"2026-01-02T15:04:05-00:00":           time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC),
	} {
		if got, err := contract.ParseTime(s); err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	// What time.Parse takes but RFC 3339 does not: an offset's hours past
	// 23 or minutes past 59, a comma before the fraction, a one-digit hour,
	// an offset without its colon.
	for _, s := range []string{"2026-01-02T15:04:05+24:00", "2026-01-02T15:04:05-24:00", "2026-01-02T15:04:05 24:00",
		"2026-01-02T15:04:05+99:00", "2026-01-02T15:04:05+02:60", "2026-01-02T15:04:05,123Z", "2026-01-02T15:04:05,5+02:00",
		"2026-01-02T5:04:05Z", "2026-01-02T15:04:05+0200", "2026-01-02T15:04:05.Z", "2026-01-02T15:04:05+2:00"} {
		if got, err := contract.ParseTime(s); err == nil {
			t.Errorf("ParseTime(%q) = %v; want an error: not RFC 3339", s, got)
		}
	}
}

// Invalid's message names every field of a few, and the first ten of many,
// while fields keeps them all.
func TestInvalidMessageOfManyFields(t *testing.T) {
	few := contract.Invalid(map[string]string{"limit": "1 to 100", "wait": "0 to 30"})
	if few.Message != "invalid parameters (limit: 1 to 100; wait: 0 to 30)" {
		t.Errorf("message of two: %q", few.Message)
	}
	many := map[string]string{}
	for i := range 5000 {
		many[fmt.Sprintf("p%04d", i)] = "unknown parameter"
	}
	e := contract.Invalid(many)
	if len(e.Fields) != 5000 || !strings.HasPrefix(e.Message, "invalid parameters (p0000: unknown parameter; p0001:") ||
		!strings.HasSuffix(e.Message, "p0009: unknown parameter; and 4990 more in fields)") {
		t.Errorf("message of 5000: %d fields, %q", len(e.Fields), e.Message)
	}
}

// Clip never cuts a character or a URL's percent escape in two.
func TestClip(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"http://x/abcdefgh", 12, "http://x/..."},
		{"http://x/%C3%A9%C3%A9", 16, "http://x/%C3..."},
		{"http://x/%C3%A9%C3%A9", 17, "http://x/%C3..."},
		{"http://x/%C3%A9%C3%A9", 18, "http://x/%C3%A9..."},
		{"éééé", 7, "éé..."},
		{"éééé", 6, "é..."},
	} {
		if got := contract.Clip(c.in, c.n); got != c.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func TestFormatAddress(t *testing.T) {
	for _, tt := range []struct{ name, want string }{
		{"", "a@example.com"},
		{"Zoë", "Zoë <a@example.com>"},
		{"Smith, John", `"Smith, John" <a@example.com>`},
		{`Say "hi"`, `"Say \"hi\"" <a@example.com>`},
		{`back\slash.`, `"back\\slash." <a@example.com>`},
		{" padded", `" padded" <a@example.com>`},
	} {
		if got := contract.FormatAddress(tt.name, "a@example.com"); got != tt.want {
			t.Errorf("FormatAddress(%q) = %s, want %s", tt.name, got, tt.want)
		}
	}
}
