package cmd

import (
	"encoding/json"
	"testing"
)

// Without --name a new inbox or endpoint takes the first free name of
// default, default-2, …: a second "default" would pass for the bootstrap
// one, which `capture wait` watches when --inbox or --endpoint is not given.
func TestCreateWithoutNameTakesAFreeName(t *testing.T) {
	dir := withDatabase(t, t.TempDir())
	d := "--data-dir=" + dir
	create := func(kind string, flags ...string) string {
		t.Helper()
		r := capture(t, append([]string{kind, "create", "--json", d}, flags...)...)
		var created struct{ Name string }
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &created) != nil {
			t.Fatalf("%s create %v: %+v", kind, flags, r)
		}
		return created.Name
	}
	for _, kind := range []string{"inbox", "endpoint"} {
		for _, want := range []string{"default-2", "default-3"} {
			if got := create(kind); got != want {
				t.Errorf("%s create: named %q, want %q", kind, got, want)
			}
		}
		// A name given is taken as it is; the next free one skips it.
		if got := create(kind, "--name", "default-4"); got != "default-4" {
			t.Errorf("%s create --name default-4: named %q", kind, got)
		}
		if got := create(kind); got != "default-5" {
			t.Errorf("%s create after default-4: named %q, want default-5", kind, got)
		}
		if r := capture(t, "project", "create", "other-"+kind, d); r.code != 0 {
			t.Fatalf("project create: %+v", r)
		}
		if got := create(kind, "--project", "other-"+kind); got != "default" {
			t.Errorf("%s create in a project without one: named %q, want default", kind, got)
		}
	}
}
