package api_test

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/server/api"
	"github.com/capturedev/capture/store"
)

// A large message is written from the store slice by slice, and what
// arrives is what encoding the whole message would give, byte for byte:
// characters cut by a slice's end, escapes, invalid UTF-8, many links.
func TestLargeMessageStreamsExactly(t *testing.T) {
	e := newEnv(t)
	var text, html strings.Builder
	for i := 0; text.Len() < 3<<20; i++ {
		// Multibyte characters of every width, characters JSON escapes,
		// and now and then bytes that are not UTF-8 at all.
		fmt.Fprintf(&text, "line %d: é€😀 \"quoted\" back\\slash\ttab <a href=\"x\">&amp;</a> \u2028\n", i)
		if i%997 == 0 {
			text.WriteString("\xff\xfe\xe2\x82 bad \xc3")
		}
	}
	for i := 0; html.Len() < 2<<20; i++ {
		fmt.Fprintf(&html, `<p><a href="https://app.test/%d?a=1&b=2">ünïcode %d</a></p>`+"\n", i, i)
	}
	var links []store.Link
	for i := range 5000 {
		anchor := "link " + strconv.Itoa(i)
		links = append(links, store.Link{URL: "https://app.test/" + strconv.Itoa(i) + "?q=<>&", Text: &anchor, Origin: "https://app.test",
			Kind: store.LinkKinds[i%len(store.LinkKinds)]})
	}
	raw := bytes.Repeat([]byte("Subject: big\r\n\r\n0123456789\xff\r\n"), 1<<16)
	attachment := bytes.Repeat([]byte{0, 1, 2, 0xff}, 300_000)
	textS, htmlS := text.String(), html.String()
	for _, tt := range []struct {
		name       string
		text, html *string
		links      []store.Link
		codes      []store.Code
		wantCodes  string
	}{
		{"large", &textS, &htmlS, links, []store.Code{{Value: "A1B2C3", Context: "code \"A1B2C3\" <b>é</b>"}},
			`"links_truncated":true,"codes":[{"value":"A1B2C3","context":"code \"A1B2C3\" <b>é</b>"}]`},
		{"no bodies, no links", nil, nil, nil, nil, `"links_truncated":false,"codes":[]`},
		{"empty bodies", new(string), new(string), []store.Link{}, nil, `"links_truncated":false,"codes":[]`},
	} {
		id, err := e.st.InsertMessage(t.Context(), &store.NewMessage{
			InboxID: e.boot.Inbox.ID, ReceivedAt: time.Now(), EnvelopeFrom: "app@app.test", EnvelopeTo: []string{"u@x.test"},
			Subject: "big", Text: tt.text, HTML: tt.html, Links: tt.links, LinksTruncated: tt.codes != nil, Codes: tt.codes,
			Headers:     []store.Header{{Name: "Subject", Values: []string{"big"}}},
			Attachments: []store.NewAttachment{{Filename: "a.bin", ContentType: "application/octet-stream", Data: attachment}},
			Raw:         raw,
		})
		if err != nil {
			t.Fatal(err)
		}
		m, err := e.st.Message(t.Context(), e.boot.Project.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		got := e.call("GET", "/messages/"+id, nil)
		sameAnswer(t, tt.name, got, api.MessageJSON(m))
		if !bytes.Contains(got.body, []byte(tt.wantCodes)) {
			t.Errorf("%s: no %s", tt.name, tt.wantCodes)
		}
		if r := e.call("HEAD", "/messages/"+id, nil); r.status != 405 || r.header.Get("Allow") != "DELETE, GET" {
			t.Errorf("%s: HEAD %d %q", tt.name, r.status, r.body)
		}
		if r := e.call("GET", "/messages/"+id+"/raw", nil); !bytes.Equal(r.body, raw) || r.header.Get("Content-Length") != strconv.Itoa(len(raw)) {
			t.Errorf("%s: raw: %d bytes, %v", tt.name, len(r.body), r.header)
		}
		a := e.call("GET", "/messages/"+id+"/attachments/"+m.Attachments[0].ID, nil)
		if !bytes.Equal(a.body, attachment) || a.header.Get("Content-Length") != strconv.Itoa(len(attachment)) {
			t.Errorf("%s: attachment: %d bytes, %v", tt.name, len(a.body), a.header)
		}
	}
}

// A large request body is written from the store slice by slice too, as
// text when it is UTF-8 throughout (characters cut by a slice's end
// included), else as base64, and what arrives is what encoding the whole
// request gives, byte for byte.
func TestLargeRequestStreamsExactly(t *testing.T) {
	e := newEnv(t)
	var text strings.Builder
	for i := 0; text.Len() < 3<<20; i++ {
		fmt.Fprintf(&text, "line %d: é€😀 \"quoted\" back\\slash\ttab <b>&amp;</b> \u2028\n", i)
	}
	binary := bytes.Repeat([]byte{0, 1, 2, 0xff, 0xc3}, 700_000)
	cutAtTheEnd := append([]byte(text.String()), 0xe2, 0x82) // a character left unfinished
	badInTheMiddle := []byte(text.String()[:2<<20] + "\xff" + text.String()[2<<20:])
	for _, tt := range []struct {
		name string
		body []byte
		text bool
	}{
		{"utf-8", []byte(text.String()), true},
		{"binary", binary, false},
		{"unfinished character at the end", cutAtTheEnd, false},
		{"bad byte in the middle", badInTheMiddle, false},
		{"small", []byte(`{"a":"é"}`), true},
		{"empty", []byte{}, true},
	} {
		id := e.insertRequest(e.boot.Endpoint.ID, "/big", tt.body)
		r, err := e.st.Request(t.Context(), e.boot.Project.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		got := e.call("GET", "/requests/"+id, nil)
		sameAnswer(t, tt.name, got, api.RequestJSON(r))
		if field := []byte(`"body":null`); bytes.Contains(got.body, field) == tt.text {
			t.Errorf("%s: body as text is %v, want %v", tt.name, !tt.text, tt.text)
		}
	}
}

// sameAnswer fails unless got is a 200 whose body is want, byte for byte,
// and shows where they part.
func sameAnswer(t *testing.T, name string, got response, want []byte) {
	t.Helper()
	if got.status == 200 && bytes.Equal(got.body, want) {
		return
	}
	i := 0
	for i < min(len(got.body), len(want)) && got.body[i] == want[i] {
		i++
	}
	t.Errorf("%s: %d, %d bytes, want %d; first difference at %d: %q, want %q", name, got.status, len(got.body), len(want),
		i, got.body[i:min(i+40, len(got.body))], want[i:min(i+40, len(want))])
}
