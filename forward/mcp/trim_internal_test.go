package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/capturedev/capture/server/api/contract"
)

// A header value too long for what is left of the budget is cut to fit,
// escapes counted, and no header after it is kept.
func TestCutHeadersCutsTheValueThatCrossesTheBudget(t *testing.T) {
	hs := contract.Headers{
		{Name: "Subject", Values: []string{"hello"}},
		{Name: "X-Long", Values: []string{strings.Repeat("<&\"", 10000)}},
		{Name: "X-After", Values: []string{"gone"}},
	}
	if !cutHeaders(&hs, 1024) {
		t.Fatal("not cut")
	}
	b, err := json.Marshal(hs)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 1024 || len(hs) != 2 || hs[0].Values[0] != "hello" || len(hs[1].Values) != 1 ||
		!strings.HasPrefix(strings.Repeat("<&\"", 10000), hs[1].Values[0]) || len(hs[1].Values[0]) < 100 {
		t.Errorf("cut to %d bytes: %s", len(b), b)
	}
	small := contract.Headers{{Name: "Subject", Values: []string{"hello"}}}
	if cutHeaders(&small, 1024) || len(small) != 1 {
		t.Errorf("headers within the budget cut: %+v", small)
	}
}
