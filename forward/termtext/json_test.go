package termtext

import (
	"encoding/json"
	"testing"
)

func TestVisibleJSONIsTheSameJSON(t *testing.T) {
	in := "{\n  \"a\": \"x\u009b2J\u202e\x7fy שלום\",\n  \"b\": \"bad\xff\"\n}\n"
	got := string(VisibleJSON([]byte(in)))
	want := "{\n  \"a\": \"x\\u009b2J\\u202e\\u007fy שלום\",\n  \"b\": \"bad\\ufffd\"\n}\n"
	if got != want {
		t.Errorf("VisibleJSON = %q, want %q", got, want)
	}
	var before, after map[string]string
	if err := json.Unmarshal([]byte(in), &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(got), &after); err != nil || before["a"] != after["a"] || before["b"] != after["b"] {
		t.Errorf("decodes as %q (%v), want %q", after, err, before)
	}
	if plain := []byte("{\"a\": \"é\"}\n"); &VisibleJSON(plain)[0] != &plain[0] {
		t.Error("JSON with nothing to escape was copied")
	}
}
