package cmd

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capturedev/capture/store"
)

func TestUserSetPassword(t *testing.T) {
	dir := withDatabase(t, filepath.Join(t.TempDir(), "data"))
	r := captureIn(t, "short\n", "user", "set-password", "--data-dir", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "at least 8 characters") {
		t.Fatalf("short password: %+v", r)
	}
	// Nothing a browser's password field could type back: blanks, NUL.
	for _, bad := range []struct{ in, want string }{
		{"        \n", "only spaces"},
		{" \t \t    \n", "only spaces"},
		{"password\x00one\n", `control characters (found '\x00')`},
		{"pass\x1b[Aword\n", "control characters"},
	} {
		if r := captureIn(t, bad.in, "user", "set-password", "--data-dir", dir); r.code != 1 ||
			!strings.Contains(r.stderr, bad.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("password %q: %+v", bad.in, r)
		}
	}
	st, err := store.OpenDir(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	has, err := st.HasPassword(t.Context())
	st.Close()
	if err != nil || has {
		t.Fatalf("a refused password was stored (%v)", err)
	}

	r = captureIn(t, "a long enough password\r\nsecond line\n", "user", "set-password", "--data-dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "web password set") {
		t.Fatalf("set-password: %+v", r)
	}
	st, err = store.OpenDir(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.CheckPassword(t.Context(), "a long enough password"); err != nil {
		t.Errorf("the stored password does not check: %v", err)
	}
}

func TestUserLoginLink(t *testing.T) {
	dir := withDatabase(t, filepath.Join(t.TempDir(), "data"))
	if r := capture(t, "user", "login-link", "--data-dir", dir); r.code != 1 || !strings.Contains(r.stderr, "capture serve") {
		t.Fatalf("login-link before any serve: %+v", r)
	}

	_, banner := startServeProcess(t, dir)
	web := strings.TrimSuffix(banner["Read API"], "/api/v1")
	if !strings.HasPrefix(banner["Web UI"], web+"/login?token=") {
		t.Fatalf("banner sign-in link %q, want one on %s", banner["Web UI"], web)
	}
	r := capture(t, "user", "login-link", "--data-dir", dir)
	link := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(link, web+"/login?token=") || link == banner["Web UI"] {
		t.Fatalf("login-link while serve runs: %+v", r)
	}
	// Each link signs in when opened, once.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, l := range []string{banner["Web UI"], link, link} {
		resp, err := noRedirect.Get(l)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		signedIn := false
		for _, c := range resp.Cookies() {
			signedIn = signedIn || (c.Name == "capture_session" && c.Value != "")
		}
		switch {
		case l == link && resp.StatusCode == http.StatusUnauthorized:
			if !strings.Contains(string(body), "cannot be used") || signedIn {
				t.Errorf("%s reused: %s", l, body)
			}
			link = "" // used up
		case resp.StatusCode != http.StatusSeeOther || !signedIn:
			t.Errorf("%s: %d %v", l, resp.StatusCode, resp.Header)
		}
	}
	if link != "" {
		t.Error("a link signed in twice")
	}
}
