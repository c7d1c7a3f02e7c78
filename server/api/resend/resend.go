// Package resend sends a captured webhook request again, exactly as it was
// captured: its method, its headers but those that described the old
// connection, its body bytes, to a target base URL joined with the captured
// path and query. Nothing is added on the way (no Accept-Encoding, no
// User-Agent), nothing taken from the answer (no transparent gunzip), and
// the joined path never climbs above the target's base path.
//
// A replay (server/replay) and a forwarded delivery (forward) both build
// their request here, so the two send the same bytes for the same capture.
// Like the contract beside it, the package imports only the standard
// library: the forwarding client links neither the store nor SQLite.
package resend

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// hopByHop headers describe one connection, not the request (RFC 9110
// §7.6.1), so they are never resent; Host and Content-Length follow the
// new target and body, and net/http writes them itself.
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Host": true, "Content-Length": true,
}

// IsHopByHop reports whether the header called name is one that is never
// resent (and so cannot be set by an edit either).
func IsHopByHop(name string) bool { return hopByHop[http.CanonicalHeaderKey(name)] }

// Header returns the captured headers to resend: all but the hop-by-hop
// ones and those the captured Connection header named.
func Header(captured http.Header) http.Header {
	named := map[string]bool{}
	for _, v := range captured.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				named[http.CanonicalHeaderKey(name)] = true
			}
		}
	}
	out := make(http.Header, len(captured))
	for name, values := range captured {
		name = http.CanonicalHeaderKey(name)
		if !hopByHop[name] && !named[name] {
			out[name] = append(out[name], values...)
		}
	}
	return out
}

// Join returns the URL a capture is resent to: base with the captured path
// appended and the captured query. The path is sent byte for byte as
// captured, except that its dot segments ("." and "..", also
// percent-encoded) are resolved within it, so that the result stays under
// base's path. A capture of the bare capture URL (path "/") goes to base's
// path as it is given ("/webhook", not "/webhook/"), as `stripe listen
// --forward-to` delivers: most frameworks answer a trailing slash their
// handler lacks with a 404 or a redirect. It returns the URL to send to
// and the same as text.
func Join(base *url.URL, path, rawQuery string) (*url.URL, string) {
	u := *base
	u.Fragment, u.RawFragment, u.User = "", "", nil
	switch {
	case u.RawQuery == "":
		u.RawQuery = rawQuery
	case rawQuery != "":
		u.RawQuery += "&" + rawQuery
	}
	u.ForceQuery = false
	var joined string
	if path == "" || path == "/" {
		joined = base.EscapedPath()
	} else {
		joined = strings.TrimSuffix(base.EscapedPath(), "/") + resolveDots(path)
	}
	if joined == "" {
		joined = "/"
	}
	text := u.Scheme + "://" + u.Host + joined
	if u.RawQuery != "" {
		text += "?" + u.RawQuery
	}
	// An opaque path is written to the request line as it is, where a
	// parsed one could be re-escaped; but an opaque "//…" would be written
	// as an absolute URL of another host, so that one is parsed.
	u.Opaque, u.Path, u.RawPath = joined, "", ""
	if strings.HasPrefix(joined, "//") {
		if p, err := url.Parse("http://host" + joined); err == nil {
			u.Opaque, u.Path, u.RawPath = "", p.Path, p.RawPath
		}
	}
	return &u, text
}

// resolveDots removes the dot segments of an absolute path as RFC 3986
// §5.2.4 does, reading "%2e" as "."; a ".." at the top stays at the top.
// A path without dot segments comes back unchanged.
func resolveDots(p string) string {
	if p == "" {
		return "/"
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	segs := strings.Split(p[1:], "/")
	if !hasDotSegment(segs) {
		return p
	}
	out := make([]string, 0, len(segs))
	for i, seg := range segs {
		last := i == len(segs)-1
		switch dotSegment(seg) {
		case 1:
			if last {
				out = append(out, "")
			}
		case 2:
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, seg)
		}
	}
	return "/" + strings.Join(out, "/")
}

func hasDotSegment(segs []string) bool {
	for _, s := range segs {
		if dotSegment(s) > 0 {
			return true
		}
	}
	return false
}

// dotSegment is 1 for ".", 2 for "..", 0 otherwise, reading %2e as ".".
func dotSegment(seg string) int {
	s := strings.ReplaceAll(strings.ToLower(seg), "%2e", ".")
	switch s {
	case ".":
		return 1
	case "..":
		return 2
	}
	return 0
}

// NewRequest builds the request that resends: method, the URL from Join,
// exactly header, and body with its length. net/http gives a request
// without a User-Agent its own; an absent one is sent as none.
func NewRequest(ctx context.Context, method string, u *url.URL, header http.Header, body []byte) (*http.Request, error) {
	// NewRequest checks the method; the URL it is given is replaced by u
	// itself, as Join built it, rather than by u printed and parsed again.
	req, err := http.NewRequestWithContext(ctx, method, "http://target.invalid/", nil)
	if err != nil {
		return nil, err
	}
	req.URL, req.Host = u, ""
	req.Header = header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		// Present but empty keeps net/http from writing its own.
		req.Header["User-Agent"] = []string{""}
	}
	if len(body) == 0 {
		req.Body, req.ContentLength = http.NoBody, 0
		return req, nil
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return req, nil
}

// FrameEmpty makes a request of NewRequest with an empty body carry
// "Content-Length: 0" exactly when withLength says the capture did. Left
// alone, net/http adds one to every empty POST, PUT and PATCH and to no
// other method. An explicit "identity" transfer coding is net/http's
// documented way to say "no chunking, length as given": with a length of 0
// it writes "Content-Length: 0" for any method but GET and HEAD, and with
// an unknown length and an empty body it writes no framing header at all,
// which HTTP/1.1 reads as no body (RFC 9112 §6.3). A GET or HEAD is never
// sent with "Content-Length: 0".
func FrameEmpty(req *http.Request, withLength bool) {
	req.TransferEncoding = []string{"identity"}
	if withLength {
		return // http.NoBody and a length of 0: "Content-Length: 0"
	}
	// A body that is not http.NoBody with a length of 0 is one of unknown
	// length, which the identity coding keeps from being chunked.
	req.Body = io.NopCloser(strings.NewReader(""))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("")), nil }
}

// Transport sends without adding anything: no Accept-Encoding of its own,
// and so no transparent gunzip of the answer, whose bytes stay as the
// target sent them. proxy is http.ProxyFromEnvironment or nil for none.
func Transport(proxy func(*http.Request) (*url.URL, error)) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = proxy
	t.DisableCompression = true
	return t
}
