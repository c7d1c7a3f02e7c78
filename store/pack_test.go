package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestPackRoundTrip packs sections of every kind and size and reads each
// back exactly, whole and from its start.
func TestPackRoundTrip(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	noise := make([]byte, 3*packChunk+17) // incompressible: chunks stored as they are
	for i := range noise {
		noise[i] = byte(rnd.Uint32())
	}
	text := strings.Repeat("The quick brown fox jumps over the lazy dog ✓\r\n", 9000) // > 3 chunks
	for _, tc := range []struct {
		name     string
		sections []section
	}{
		{"none", nil},
		{"empty", []section{bytesSection(nil), textSection("")}},
		{"absent", []section{{absent: true}, bytesSection([]byte("x")), optionalText(nil)}},
		{"small", []section{bytesSection([]byte(`[["A",["b"]]]`)), textSection("hello"), bytesSection([]byte("raw\r\n"))}},
		{"chunk edges", []section{bytesSection(noise[:packChunk]), bytesSection(noise[:packChunk-1]), textSection("ab")}},
		{"large", []section{textSection(text), bytesSection(noise), optionalText(&text)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pack(tc.sections...)
			u, err := openPack(p)
			if err != nil {
				t.Fatal(err)
			}
			if len(u.h.sections) != len(tc.sections) {
				t.Fatalf("%d sections, want %d", len(u.h.sections), len(tc.sections))
			}
			for i, want := range tc.sections {
				got, present, err := u.section(i, -1)
				if err != nil || present == want.absent {
					t.Fatalf("section %d: present %v, %v", i, present, err)
				}
				if !bytes.Equal(got, sectionBytes(want)) {
					t.Fatalf("section %d: %d bytes differ from the %d packed", i, len(got), want.len())
				}
				if head, _, _ := u.section(i, 1000); !bytes.Equal(head, sectionBytes(want)[:min(1000, want.len())]) {
					t.Fatalf("section %d: its first 1000 bytes differ", i)
				}
			}
		})
	}
	if p := pack(textSection(text)); len(p) > len(text)/20 {
		t.Errorf("repetitive text packed to %d of %d bytes", len(p), len(text))
	}
	if p := pack(bytesSection(noise)); len(p) > len(noise)+64 {
		t.Errorf("noise packed to %d of %d bytes", len(p), len(noise))
	}
}

func sectionBytes(s section) []byte {
	if s.isText {
		return []byte(s.s)
	}
	return s.b
}

// TestPackDamage: a damaged or cut pack is an error, never other bytes.
func TestPackDamage(t *testing.T) {
	p := pack(textSection(strings.Repeat("abc", 1000)), bytesSection([]byte("tail")))
	if _, err := parsePackHeader(p[:2]); !errors.Is(err, errShortPack) {
		t.Errorf("cut header: %v", err)
	}
	if _, err := openPack(p[:len(p)-1]); err == nil {
		t.Error("cut pack opened")
	}
	if _, err := openPack(append([]byte{9}, p[1:]...)); err == nil {
		t.Error("unknown version opened")
	}
	bad := bytes.Clone(p)
	bad[len(bad)-8] ^= 0xff
	if u, err := openPack(bad); err == nil {
		if _, _, err := u.section(0, -1); err == nil {
			t.Error("damaged chunk read without an error")
		}
	}
}

// TestPartsReadLargeMessageInSlices stores a message whose pack is far
// larger than what comes with its row, and reads each of its parts back
// through the database, chunk by chunk, every way a reader can.
func TestPartsReadLargeMessageInSlices(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	p := mustProject(t, s, "p", "team")
	in, _ := s.CreateInbox(ctx, p.ID, "in")
	rnd := rand.New(rand.NewPCG(3, 4))
	// Punctuation at random: the value compresses, but not to nothing
	// (its pack is read in several slices), and holds no word. Random
	// letters and digits would make tens of thousands of distinct search
	// terms, which the index then takes seconds to file under the race
	// detector, holding up the delete below.
	const symbols = "!#$%&()*+,-./:;<=>?@[]^_{|}~ \r\n"
	raw := make([]byte, 5*packChunk+123)
	for i := range raw {
		raw[i] = symbols[rnd.IntN(len(symbols))]
	}
	text := string(raw[:2*packChunk+5])
	att := make([]byte, packChunk+9)
	for i := range att {
		att[i] = byte(rnd.Uint32())
	}
	id, err := s.InsertMessage(ctx, &NewMessage{InboxID: in.ID, ReceivedAt: now(), EnvelopeFrom: "a@x", Text: &text,
		Raw: raw, Attachments: []NewAttachment{{Filename: "a.bin", Data: att}}})
	if err != nil {
		t.Fatal(err)
	}
	var packed int64
	s.rdb.QueryRow(`SELECT octet_length(content) FROM messages`).Scan(&packed)
	if packed <= packWith {
		t.Fatalf("pack of %d bytes comes whole with the row: the test reads nothing in slices", packed)
	}

	rawPart, err := s.RawPart(ctx, p.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	var slices [][]byte
	for {
		b, err := rawPart.Slice()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		slices = append(slices, b)
	}
	if got := bytes.Join(slices, nil); !bytes.Equal(got, raw) || len(slices) < 5 {
		t.Fatalf("raw in %d slices: %d bytes, equal %v", len(slices), len(got), bytes.Equal(got, raw))
	}

	d, err := s.MessageDetail(ctx, p.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	if d.HTMLPart != nil || d.TextPart == nil || d.TextPart.Size != int64(len(text)) {
		t.Fatalf("parts: html %v, text %+v", d.HTMLPart, d.TextPart)
	}
	var buf bytes.Buffer
	if _, err := d.TextPart.WriteTo(&buf); err != nil || buf.String() != text {
		t.Fatalf("text: %d bytes, %v", buf.Len(), err)
	}
	_, data, err := s.AttachmentData(ctx, p.ID, id, d.Attachments[0].ID)
	if err != nil || !bytes.Equal(data, att) {
		t.Fatalf("attachment: %d bytes, %v", len(data), err)
	}

	// A message deleted while it is read ends the read with ErrNotFound.
	rawPart, err = s.RawPart(ctx, p.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rawPart.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMessage(ctx, p.ID, id); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(rawPart); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read after delete: %v", err)
	}
}

// TestAppendHeadersMatchesEncodingJSON: the hand-written encoder writes
// what encoding/json decodes to the same headers, strange bytes included.
func TestAppendHeadersMatchesEncodingJSON(t *testing.T) {
	hs := []Header{
		{Name: "Subject", Values: []string{"plain", "quote \" backslash \\ tab\t nl\n cr\r"}},
		{Name: "X-Ctl", Values: []string{"\x00\x01\x1f\x7f", "<&>", "\u2028\u2029", "é✓😀"}},
		{Name: "X-Bad", Values: []string{"\xff\xfe ok \xc3", ""}},
		{Name: "X-None", Values: nil},
	}
	got, err := decodeHeaders(appendHeaders(nil, hs))
	if err != nil {
		t.Fatal(err)
	}
	var pairs [][2]any
	for _, h := range hs {
		vals := h.Values
		if vals == nil {
			vals = []string{}
		}
		pairs = append(pairs, [2]any{h.Name, vals})
	}
	std, _ := json.Marshal(pairs)
	want, err := decodeHeaders(std)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := marshalString(t, got), marshalString(t, want); g != w {
		t.Errorf("decoded\n%s\nwant\n%s", g, w)
	}
}

func marshalString(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzAppendJSONString: every string encodes to JSON that decodes to what
// encoding/json makes of it.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "a", "\"\\", "\x00\xff", "\u2028", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var got, want string
		if err := json.Unmarshal(appendJSONString(nil, s), &got); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		std, _ := json.Marshal(s)
		json.Unmarshal(std, &want)
		if got != want {
			t.Fatalf("%q: decoded %q, encoding/json gives %q", s, got, want)
		}
	})
}

// BenchmarkPack packs a webhook's headers and JSON body of a few sizes:
// what a capture pays for its pack.
func BenchmarkPack(b *testing.B) {
	headers := appendHeaders(nil, []Header{{Name: "Content-Type", Values: []string{"application/json"}},
		{Name: "Host", Values: []string{"127.0.0.1:7781"}}, {Name: "User-Agent", Values: []string{"Stripe/1.0 (+https://stripe.com/docs/webhooks)"}}})
	for _, size := range []int{256, 1 << 10, 2 << 10, 8 << 10} {
		body := []byte(`{"event":"payment.succeeded","id":"evt_0001","data":{"object":{"amount":4200,"currency":"usd","note":"`)
		for len(body) < size-3 {
			body = append(body, "lorem ipsum dolor sit amet "[len(body)%27])
		}
		body = append(body, `"}}`...)
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			var n int
			for b.Loop() {
				n = len(pack(bytesSection(headers), bytesSection(body)))
			}
			b.ReportMetric(float64(n)/float64(len(headers)+len(body)), "stored/B")
		})
	}
}
