package emailapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capturedev/capture/server/mailparse"
	"github.com/capturedev/capture/store"
)

// Each decoder is fuzzed from the seed requests in testdata/seeds/<route>.
// checkDecoded states what must hold for any body (a panic fails the run
// by itself).

func FuzzSendGrid(f *testing.F)      { fuzzJSON(f, "sendgrid", decodeSendGrid) }
func FuzzPostmark(f *testing.F)      { fuzzJSON(f, "postmark", postmarkEmail.decode) }
func FuzzPostmarkBatch(f *testing.F) { fuzzJSON(f, "postmark-batch", postmarkBatch.decode) }
func FuzzSES(f *testing.F)           { fuzzJSON(f, "ses", decodeSES) }
func FuzzResend(f *testing.F)        { fuzzJSON(f, "resend", decodeResend) }

func fuzzJSON(f *testing.F, route string, decode func(*http.Request, []byte, *budget) ([]*outgoing, *apiError)) {
	for _, seed := range seeds(f, route) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/", nil)
		out, apiErr := decode(r, body, fuzzBudget())
		checkDecoded(t, route, out, apiErr)
	})
}

// FuzzSESv1 decodes SES v1's parameters (SendEmail, SendRawEmail): a
// form body, and a query string when the input starts with "?": the
// query is then its first line, the body the rest (a GET when empty).
func FuzzSESv1(f *testing.F) {
	for _, seed := range seeds(f, "ses-v1") {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		query, body := "", input
		if rest, ok := bytes.CutPrefix(input, []byte("?")); ok {
			q, b, _ := bytes.Cut(rest, []byte("\n"))
			query, body = string(q), b
		}
		method := "POST"
		if len(body) == 0 {
			method = "GET"
		}
		r := httptest.NewRequest(method, "/", nil)
		r.URL.RawQuery = query
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
		out, apiErr := decodeSESv1(r, body, fuzzBudget())
		checkDecoded(t, "ses-v1", out, apiErr)
	})
}

// FuzzMailgun takes the form's Content-Type and body; a seed file holds
// "Content-Type: …", a blank line, then the body.
func FuzzMailgun(f *testing.F) {
	for _, seed := range seeds(f, "mailgun") {
		head, body, _ := bytes.Cut(seed, []byte("\n\n"))
		f.Add(strings.TrimPrefix(string(head), "Content-Type: "), body)
	}
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		r := httptest.NewRequest("POST", "/v3/mg.example.com/messages", nil)
		r.Header.Set("Content-Type", contentType)
		r.SetPathValue("domain", "mg.example.com")
		out, apiErr := decodeMailgun(r, body, fuzzBudget())
		checkDecoded(t, "mailgun", out, apiErr)
	})
}

func fuzzBudget() *budget {
	plan, _ := store.LookupPlan("free")
	return newBudget(plan)
}

func seeds(f *testing.F, route string) [][]byte {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "seeds", route, "*"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds for %s: %v", route, err)
	}
	var out [][]byte
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func checkDecoded(t *testing.T, route string, out []*outgoing, apiErr *apiError) {
	t.Helper()
	if apiErr != nil {
		if out != nil || apiErr.msg == "" {
			t.Fatalf("refusal %+v with %d messages or without a message", apiErr, len(out))
		}
		return
	}
	if len(out) == 0 && route != "postmark-batch" {
		t.Fatal("no refusal and no message")
	}
	for _, o := range out {
		if o.err != nil {
			if route != "postmark-batch" || o.err.msg == "" {
				t.Fatalf("item refusal %+v outside a batch", o.err)
			}
			continue
		}
		if o.from == "" || len(o.to) == 0 {
			t.Fatalf("message without envelope: from %q to %v", o.from, o.to)
		}
		msg, err := mail.ReadMessage(bytes.NewReader(o.raw))
		if err != nil {
			t.Fatalf("written message does not parse: %v\n%s", err, o.raw)
		}
		if msg.Header.Get("X-Capture-Provider") == "" {
			t.Fatalf("no X-Capture-Provider:\n%s", o.raw)
		}
		if bytes.HasPrefix(o.raw, []byte("X-Capture-Provider: ses")) {
			continue // an SES Raw message: its headers are the sender's
		}
		if _, ok := msg.Header["Bcc"]; ok {
			t.Fatalf("Bcc in the headers:\n%s", o.raw)
		}
		if p := mailparse.Parse(o.raw); p.From == nil || !strings.EqualFold(p.From.Address, o.from) {
			t.Fatalf("From reads back as %+v, envelope sender %q:\n%s", p.From, o.from, o.raw)
		}
	}
}
