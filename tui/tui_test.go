package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/capturedev/capture/store"
)

func seed(e *env) {
	text := "Hi Alice, confirm your account: https://shop.test/confirm?t=abc\nor enter the code 482-915. Thanks, the Shop"
	linkText := "Confirm"
	e.insert(mail{from: "noreply@shop.test", to: "alice@example.test", subject: "Welcome to the Shop", text: "Hello Alice"})
	e.insert(mail{from: "noreply@shop.test", to: "bob@example.test", subject: "Your receipt #1042",
		html:  "<h1>Receipt</h1><p>Total: <b>42.00 EUR</b></p><p><a href=\"https://shop.test/r/1042\">View online</a></p>",
		links: []store.Link{{URL: "https://shop.test/r/1042", Text: &linkText, Origin: "https://shop.test"}},
		attachments: []store.NewAttachment{{Filename: "receipt-1042.pdf", ContentType: "application/pdf",
			Data: []byte("%PDF-1.4 receipt")}}})
	e.insert(mail{from: "noreply@shop.test", to: "alice@example.test", cc: "audit@example.test",
		subject: "Confirm your account", text: text,
		links: []store.Link{{URL: "https://shop.test/confirm?t=abc", Text: &linkText, Origin: "https://shop.test", Kind: store.LinkVerify},
			{URL: "https://shop.test/unsubscribe?u=1", Origin: "https://shop.test", Kind: store.LinkUnsubscribe}},
		codes: []store.Code{{Value: "482915", Context: "https://shop.test/confirm?t=abc or enter the code 482-915. Thanks, the Shop"}}})
}

func TestGoldenMain(t *testing.T) {
	e := newEnv(t)
	seed(e)
	e.post("POST", "/hooks/stripe?attempt=1", "application/json", `{"type":"invoice.paid","data":{"amount":4200,"paid":true,"note":null}}`)
	u := e.run(e.config())
	s := u.settled("Confirm your account", "Welcome to the Shop", "● live")
	golden.RequireEqual(t, []byte(mask(s)))
}

func TestGoldenMessageDetail(t *testing.T) {
	e := newEnv(t)
	seed(e)
	u := e.run(e.config())
	u.waitText("Confirm your account", "● live")
	u.keys("enter") // open the newest
	s := u.settled("confirm your account: https://shop.test/confirm?t=abc", "audit@example.test", "[unsubscribe]")
	golden.RequireEqual(t, []byte(mask(s)))
}

func TestGoldenRequestDetail(t *testing.T) {
	e := newEnv(t)
	e.post("POST", "/hooks/stripe?attempt=1&mode=live", "application/json", `{"type":"invoice.paid","data":{"amount":4200,"paid":true,"note":null}}`)
	u := e.run(e.config())
	u.waitText("Inboxes", "● live")
	u.keys("shift+tab", "j") // to the endpoint
	u.waitText("/hooks/stripe?attempt=1")
	u.keys("tab", "enter")
	s := u.settled(`"type": "invoice.paid"`, `"note": null`)
	golden.RequireEqual(t, []byte(mask(s)))
}

func TestGoldenHelp(t *testing.T) {
	e := newEnv(t)
	seed(e)
	u := e.run(e.config())
	u.waitText("Confirm your account", "● live")
	u.keys("?")
	s := u.settled("Captures", "this help")
	golden.RequireEqual(t, []byte(mask(s)))
	u.keys("esc")
	if s := u.waitGone("this help"); !strings.Contains(s, "Welcome to the Shop") {
		t.Errorf("after esc:\n%s", s)
	}
}
