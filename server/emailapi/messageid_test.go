package emailapi_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/capturedev/capture/store"
)

// TestMessageIDOfAnInternationalDomain sends from a domain that is not
// ASCII with every provider: the Message-ID capture writes holds the
// domain in its IDNA form, never an RFC 2047 encoded-word (which no
// reader decodes in a Message-ID), and Mailgun's answered id is the
// stored Message-ID.
func TestMessageIDOfAnInternationalDomain(t *testing.T) {
	const domain = "xn--bcher-kva.de" // bücher.de
	e := newEnv(t)
	rawMessage := base64.StdEncoding.EncodeToString([]byte("From: a@bücher.de\r\nTo: b@example.com\r\nSubject: raw\r\n\r\nHi\r\n"))
	for _, c := range []struct {
		name string
		send func() response
	}{
		{"sendgrid", func() response {
			return e.sendgrid(`{"personalizations": [{"to": [{"email": "b@example.com"}]}], "from": {"email": "info@bücher.de"},
				"subject": "s", "content": [{"type": "text/plain", "value": "Hi"}]}`)
		}},
		{"postmark", func() response {
			return e.postmark("/email", `{"From": "info@bücher.de", "To": "b@example.com", "Subject": "s", "TextBody": "Hi"}`)
		}},
		{"resend", func() response {
			return e.resend(`{"from": "info@bücher.de", "to": "b@example.com", "subject": "s", "text": "Hi"}`)
		}},
		{"ses v2", func() response {
			return e.ses(`{"FromEmailAddress": "info@bücher.de", "Destination": {"ToAddresses": ["b@example.com"]},
				"Content": {"Simple": {"Subject": {"Data": "s"}, "Body": {"Text": {"Data": "Hi"}}}}}`)
		}},
		{"ses v2 raw", func() response {
			return e.ses(`{"Content": {"Raw": {"Data": "` + rawMessage + `"}}}`)
		}},
		{"ses v1", func() response {
			return do(t, signedSESv1(e, e.password(), url.Values{"Action": {"SendEmail"}, "Source": {"a@bücher.de"},
				"Destination.ToAddresses.member.1": {"b@example.com"}, "Message.Subject.Data": {"s"}, "Message.Body.Text.Data": {"Hi"}}))
		}},
		{"mailgun", func() response {
			form := url.Values{"from": {"info@bücher.de"}, "to": {"b@example.com"}, "subject": {"s"}, "text": {"Hi"}}
			req, _ := http.NewRequest("POST", e.base+"/v3/bücher.de/messages", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.SetBasicAuth("api", e.password())
			return do(t, req)
		}},
		{"mailgun mime", func() response {
			ct, body := multipartForm(t, [][2]string{{"to", "b@example.com"}},
				[]formFile{{"message", "MimeMessage", "", "From: info@bücher.de\r\nTo: b@example.com\r\nSubject: s\r\n\r\nHi\r\n"}})
			req, _ := http.NewRequest("POST", e.base+"/v3/bücher.de/messages.mime", strings.NewReader(string(body)))
			req.Header.Set("Content-Type", ct)
			req.SetBasicAuth("api", e.password())
			return do(t, req)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(e.messages())
			r := c.send()
			ms := e.messages()
			if r.status != 200 && r.status != 202 || len(ms) != before+1 {
				t.Fatalf("%d %s: %d messages", r.status, r.body, len(ms)-before)
			}
			m := ms[len(ms)-1]
			local, right, ok := strings.Cut(m.MessageID, "@")
			if !ok || local == "" || right != domain {
				t.Errorf("message_id %q, want one @%s", m.MessageID, domain)
			}
			if raw := rawHeader(t, e, m, "Message-Id"); strings.Contains(raw, "=?") || raw != "<"+m.MessageID+">" {
				t.Errorf("Message-ID written as %q", raw)
			}
			if strings.HasPrefix(c.name, "mailgun") {
				if id, _ := r.json(t).(map[string]any)["id"].(string); id != "<"+m.MessageID+">" {
					t.Errorf("Mailgun answered id %q for the message whose Message-Id is <%s>", id, m.MessageID)
				}
			}
		})
	}
}

// rawHeader is the first value of a field as the stored message writes it.
func rawHeader(t *testing.T, e *env, m store.Message, name string) string {
	t.Helper()
	raw, err := e.st.MessageRaw(t.Context(), e.boot.Project.ID, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(string(raw), "\r\n\r\n")
	for _, line := range strings.Split(head, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
