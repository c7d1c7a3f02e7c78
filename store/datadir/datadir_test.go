package datadir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestResolve(t *testing.T) {
	t.Setenv(Env, "/env/dir")
	if d, _ := Resolve("/flag/dir"); d != "/flag/dir" {
		t.Fatalf("flag: %s", d)
	}
	if d, _ := Resolve(""); d != "/env/dir" {
		t.Fatalf("env: %s", d)
	}
	t.Setenv(Env, "")
	t.Setenv("XDG_DATA_HOME", "/xdg")
	if d, _ := Resolve(""); d != "/xdg/capture" {
		t.Fatalf("xdg: %s", d)
	}
}

func TestCredentialsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := Credentials{API: "http://127.0.0.1:7780/api/v1", Key: "cap_x"}
	if err := WriteCredentials(dir, want); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, CredentialsFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials.json: %v, mode %v", err, fi.Mode())
	}
	got, err := ReadCredentials(dir)
	if err != nil || got != want {
		t.Fatalf("ReadCredentials = %+v, %v", got, err)
	}
	if _, err := ReadCredentials(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}
