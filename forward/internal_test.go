package forward

import (
	"testing"

	"github.com/capturedev/capture/forward/apiclient"
	"github.com/capturedev/capture/server/api/contract"
)

func TestParseTarget(t *testing.T) {
	tests := []struct{ in, want string }{
		{"localhost", "http://localhost"},
		{"localhost:3000", "http://localhost:3000"},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080"},
		{"https://dev.test/hooks/", "https://dev.test/hooks"},
		{"[::1]:3000", "http://[::1]:3000"},
	}
	for _, tt := range tests {
		if got, err := ParseTarget(tt.in); err != nil || got != tt.want {
			t.Errorf("ParseTarget(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "ftp://x", "http://", "localhost:3000?x=1", "http://u:p@host", "http://h/#f"} {
		if got, err := ParseTarget(bad); err == nil {
			t.Errorf("ParseTarget(%q) = %q, want an error", bad, got)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 20: "5.0 MiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestTargetURL(t *testing.T) {
	for _, tt := range []struct{ to, path, query, wantURI string }{
		{"http://h:1", "/a/b", "x=1", "/a/b?x=1"},
		{"http://h:1/base", "/a%2Fb", "", "/base/a%2Fb"},
		{"http://h:1", "/", "", "/"},
		{"http://h:1", "//double", "q", "//double?q"},
	} {
		f, err := newForwarder(Config{Endpoint: "whe_x", To: tt.to, Client: apiclient.New("http://api", "k", nil)})
		if err != nil {
			t.Fatal(err)
		}
		u := f.targetURL(tt.path, tt.query)
		if got := u.RequestURI(); got != tt.wantURI || u.Host != "h:1" {
			t.Errorf("targetURL(%q, %q, %q) = %q on %q, want %q", tt.to, tt.path, tt.query, got, u.Host, tt.wantURI)
		}
	}
}

func TestForwardHeaders(t *testing.T) {
	got := forwardHeaders(contract.Headers{
		{Name: "Connection", Values: []string{"close, X-Private"}},
		{Name: "X-Private", Values: []string{"1"}},
		{Name: "x-public", Values: []string{"a", "b"}},
		{Name: "Host", Values: []string{"sender"}},
		{Name: "Transfer-Encoding", Values: []string{"chunked"}},
	})
	if len(got) != 2 || len(got["X-Public"]) != 2 || got["User-Agent"][0] != "" {
		t.Errorf("forwardHeaders = %v", got)
	}
}
