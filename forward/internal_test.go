package forward

import (
	"testing"
)

func TestParseTarget(t *testing.T) {
	tests := []struct{ in, want string }{
		{"localhost", "http://localhost"},
		{"localhost:3000", "http://localhost:3000"},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080"},
		{"http://127.0.0.1:8080//", "http://127.0.0.1:8080"},
		{"https://dev.test/hooks", "https://dev.test/hooks"},
		// Kept: a bare capture is delivered to the path as given.
		{"https://dev.test/hooks/", "https://dev.test/hooks/"},
		{"[::1]:3000", "http://[::1]:3000"},
		// Escaped as a URL path: a space or é cannot go on a request line.
		{"localhost:3000/a b/", "http://localhost:3000/a%20b/"},
		{"localhost:3000/é", "http://localhost:3000/%C3%A9"},
	}
	for _, tt := range tests {
		if got, err := ParseTarget(tt.in); err != nil || got != tt.want {
			t.Errorf("ParseTarget(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "ftp://x", "http://", "localhost:3000?x=1", "http://u:p@host", "http://h/#f", "localhost:99999", "localhost:0", "http://[::1]:65536"} {
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
