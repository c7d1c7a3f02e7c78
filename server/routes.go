package server

import (
	"net/http"
	"path"
	"strings"

	"github.com/capturedev/capture/server/api/contract"
)

// envelopeRoutes answers, on the whole --http listener, the requests mux
// has no route for with the API's error envelope, where http.ServeMux would
// answer plain text or an HTML redirect: a path that is not clean (a
// doubled slash, a dot segment) or lacks its subtree's trailing slash is
// not_found, a method the path does not take is method_not_allowed with
// Allow. A GET pattern answers HEAD as ServeMux does. A path mux knows
// nothing of goes to fallback (the web interface, which answers its own
// unknown pages by the same rule).
func envelopeRoutes(mux *http.ServeMux, fallback http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect && !isCleanPath(r.URL.EscapedPath()) {
			contract.WriteError(w, contract.NoRoute(r))
			return
		}
		h, pattern := mux.Handler(r)
		switch {
		case pattern == "":
			// ServeMux's own answer: no route, or not this method. Its
			// handler only sets headers and writes text; run it on a probe
			// to learn which, and answer in the envelope instead.
			probe := &headerProbe{header: http.Header{}}
			h.ServeHTTP(probe, r)
			if probe.status == http.StatusMethodNotAllowed {
				contract.WriteError(w, contract.MethodNotAllowed(r, strings.Split(probe.header.Get("Allow"), ", ")))
				return
			}
			fallback.ServeHTTP(w, r)
		case len(literalPrefix(pattern)) > len(r.URL.EscapedPath()):
			// Every path a pattern matches starts with its literal part,
			// so this is ServeMux's redirect from /tree to /tree/.
			contract.WriteError(w, contract.NoRoute(r))
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// isCleanPath reports whether p is how ServeMux would clean it: no empty,
// "." or ".." segment, a trailing slash kept.
func isCleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean == p
}

// literalPrefix is the path of a ServeMux pattern ("[METHOD ][HOST]/path")
// up to its first wildcard.
func literalPrefix(pattern string) string {
	if _, rest, ok := strings.Cut(pattern, " "); ok {
		pattern = rest
	}
	if i := strings.IndexByte(pattern, '/'); i >= 0 {
		pattern = pattern[i:]
	}
	if i := strings.IndexByte(pattern, '{'); i >= 0 {
		pattern = pattern[:i]
	}
	return pattern
}

// headerProbe records what a handler answers, body discarded.
type headerProbe struct {
	header http.Header
	status int
}

func (p *headerProbe) Header() http.Header { return p.header }

func (p *headerProbe) WriteHeader(status int) {
	if p.status == 0 {
		p.status = status
	}
}

func (p *headerProbe) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return len(b), nil
}
