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

// A relative data dir is made absolute, and a relative $XDG_DATA_HOME is
// ignored (the XDG base directory spec), so that every path serve prints
// works from any directory.
func TestResolveRelative(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := Resolve("rel/dir"); d != filepath.Join(wd, "rel", "dir") {
		t.Fatalf("relative flag: %s", d)
	}
	t.Setenv(Env, "./env")
	if d, _ := Resolve(""); d != filepath.Join(wd, "env") {
		t.Fatalf("relative env: %s", d)
	}
	t.Setenv(Env, "")
	t.Setenv("XDG_DATA_HOME", "xdg")
	t.Setenv("HOME", "/home/someone")
	if d, _ := Resolve(""); d != "/home/someone/.local/share/capture" {
		t.Fatalf("relative XDG_DATA_HOME: %s", d)
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
