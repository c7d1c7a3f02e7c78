package mcp

import (
	"errors"
	"strings"
	"testing"

	"github.com/capturedev/capture/server/api/contract"
)

// With no id given, the only inbox is taken, else the one named default;
// otherwise the error says which argument to pass and what it may be.
func TestDefaultOf(t *testing.T) {
	idName := func(i contract.Inbox) (string, string) { return i.ID, i.Name }
	for _, tt := range []struct {
		all     []contract.Inbox
		want    string
		wantErr []string
	}{
		{[]contract.Inbox{{ID: "inb_1", Name: "signup"}}, "inb_1", nil},
		{[]contract.Inbox{{ID: "inb_1", Name: "signup"}, {ID: "inb_2", Name: "default"}}, "inb_2", nil},
		{nil, "", []string{"inbox_id", "no inboxes yet"}},
		{[]contract.Inbox{{ID: "inb_1", Name: "signup"}, {ID: "inb_2", Name: "billing"}},
			"", []string{"inbox_id", "2 inboxes", "pass inbox_id", "inb_1 (signup)", "inb_2 (billing)"}},
	} {
		got, err := defaultOf("inbox_id", "inboxes", tt.all, idName)
		if got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.all, got, tt.want)
		}
		for _, w := range tt.wantErr {
			if err == nil || !strings.Contains(err.Error()+" "+strings.Join(mapValues(err), " "), w) {
				t.Errorf("%+v: error %v, want it to say %q", tt.all, err, w)
			}
		}
		if tt.wantErr == nil && err != nil {
			t.Errorf("%+v: %v", tt.all, err)
		}
	}
}

func mapValues(err error) []string {
	var out []string
	if e, ok := errors.AsType[*contract.Error](err); ok {
		for k, v := range e.Fields {
			out = append(out, k, v)
		}
	}
	return out
}
