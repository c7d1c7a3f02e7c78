package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/store"
)

// Large captures are written straight from the store to the client, one
// slice at a time (store.Part), so that what a request holds while a slow
// or stalled client reads is a slice, not the capture nor its JSON: 60
// clients that never read a 7.5 MB message must not hold 60 copies of it
// (SPEC §13).

// sliceBudget bounds the bytes SQLite loads for the slice queries running
// at once: each loads the whole value it slices. A value larger than the
// budget is sliced alone.
const sliceBudget = 4 << 20

// nextSlice returns the next slice of p, io.EOF after the last.
func (a *API) nextSlice(ctx context.Context, p *store.Part) ([]byte, error) {
	release, err := a.admitSlice(ctx, p.Size)
	if err != nil {
		return nil, err
	}
	defer release()
	return p.Slice()
}

// admitSlice waits until a slice query of a value of size bytes may run.
func (a *API) admitSlice(ctx context.Context, size int64) (func(), error) {
	weight := min(max(size, 1), sliceBudget)
	if err := a.sliceReads.Acquire(ctx, weight); err != nil {
		return nil, err
	}
	return func() { a.sliceReads.Release(weight) }, nil
}

// partReader reads a part through nextSlice.
type partReader struct {
	ctx  context.Context
	a    *API
	p    *store.Part
	rest []byte
}

func (r *partReader) Read(b []byte) (int, error) {
	if len(r.rest) == 0 {
		s, err := r.a.nextSlice(r.ctx, r.p)
		if err != nil {
			return 0, err
		}
		r.rest = s
	}
	n := copy(b, r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

// writePart answers with the bytes of p, their length known up front.
func (a *API) writePart(w http.ResponseWriter, r *http.Request, p *store.Part) {
	w.Header().Set("Content-Length", strconv.FormatInt(p.Size, 10))
	w.WriteHeader(http.StatusOK)
	for {
		s, err := a.nextSlice(r.Context(), p)
		if err == io.EOF {
			return
		}
		if err != nil {
			a.abort(r, err)
		}
		if _, err := w.Write(s); err != nil {
			return // the client is gone or too slow; net/http closes
		}
	}
}

// abort ends a response whose status is already sent: the client sees a
// cut connection, never a body that looks whole.
func (a *API) abort(r *http.Request, err error) {
	if r.Context().Err() == nil {
		a.log.Warn("API response cut short", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	panic(http.ErrAbortHandler)
}

// writeMessage answers GET /messages/{id}: the message as renderMessage
// shapes it, encoded whole but for its bodies and links, which stand as
// markers in the encoding and are written from the store in their place.
// The contract's type stays the one description of the shape.
func (a *API) writeMessage(w http.ResponseWriter, r *http.Request, d store.MessageDetail) {
	out := renderMessage(d.Message)
	nonce := make([]byte, 12)
	rand.Read(nonce)
	marker := func(what string) string { return "\x00" + hex.EncodeToString(nonce) + what + "\x00" }

	type splice struct {
		encoded []byte
		write   func(io.Writer) error
		at      int
	}
	var splices []splice
	if d.TextPart != nil {
		m := marker("text")
		out.Body.Text = &m
		splices = append(splices, splice{encoded: marshal(m), write: func(w io.Writer) error { return a.writeString(r.Context(), w, d.TextPart) }})
	}
	if d.HTMLPart != nil {
		m := marker("html")
		out.Body.HTML = &m
		splices = append(splices, splice{encoded: marshal(m), write: func(w io.Writer) error { return a.writeString(r.Context(), w, d.HTMLPart) }})
	}
	out.Links = []contract.Link{{URL: marker("links")}}
	splices = append(splices, splice{encoded: marshal(out.Links), write: func(w io.Writer) error { return a.writeLinks(r.Context(), w, d) }})

	doc := append(marshal(out), '\n')
	for i := range splices {
		splices[i].at = bytes.Index(doc, splices[i].encoded)
	}
	slices.SortFunc(splices, func(x, y splice) int { return x.at - y.at })

	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	done := 0
	for _, s := range splices {
		if _, err := w.Write(doc[done:s.at]); err != nil {
			return
		}
		if err := s.write(w); err != nil {
			if errors.Is(err, errClientGone) {
				return
			}
			a.abort(r, err)
		}
		done = s.at + len(s.encoded)
	}
	w.Write(doc[done:])
}

// writeRequest answers GET /requests/{id}: the request as renderRequest
// shapes it, its body written from the store in the place of a marker, as
// text when valid is set (the body is valid UTF-8), else as base64.
func (a *API) writeRequest(w http.ResponseWriter, r *http.Request, d store.RequestDetail, valid bool) {
	out := renderRequest(d.Request)
	nonce := make([]byte, 12)
	rand.Read(nonce)
	m := "\x00" + hex.EncodeToString(nonce) + "body\x00"
	var write func(io.Writer) error
	if valid {
		out.Body, out.BodyBase64 = &m, nil
		write = func(w io.Writer) error { return a.writeString(r.Context(), w, d.Body()) }
	} else {
		out.Body, out.BodyBase64 = nil, &m
		write = func(w io.Writer) error { return a.writeBase64(r.Context(), w, d.Body()) }
	}
	doc := append(marshal(out), '\n')
	encoded := marshal(m)
	at := bytes.Index(doc, encoded)

	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(doc[:at]); err != nil {
		return
	}
	if err := write(w); err != nil {
		if errors.Is(err, errClientGone) {
			return
		}
		a.abort(r, err)
	}
	w.Write(doc[at+len(encoded):])
}

// validUTF8 reads p through and reports whether it is valid UTF-8, which
// decides how a body is carried (contract.SplitBody).
func (a *API) validUTF8(ctx context.Context, p *store.Part) (bool, error) {
	var carry []byte // the start of a character the last slice cut off
	err := a.eachSlice(ctx, p, func(s []byte) error {
		if len(carry) > 0 {
			s, carry = append(carry, s...), nil
		}
		if i := lastRuneStart(s); i >= 0 && !utf8.FullRune(s[i:]) {
			s, carry = s[:i], append([]byte(nil), s[i:]...)
		}
		if !utf8.Valid(s) {
			return errNotUTF8
		}
		return nil
	})
	if errors.Is(err, errNotUTF8) {
		return false, nil
	}
	return err == nil && len(carry) == 0, err
}

var errNotUTF8 = errors.New("not UTF-8")

// eachSlice calls fn with each slice of p in turn, until fn fails.
func (a *API) eachSlice(ctx context.Context, p *store.Part, fn func([]byte) error) error {
	for {
		s, err := a.nextSlice(ctx, p)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(s); err != nil {
			return err
		}
	}
}

// writeBase64 writes the part as a JSON string of its standard base64.
func (a *API) writeBase64(ctx context.Context, w io.Writer, p *store.Part) error {
	if _, err := io.WriteString(w, `"`); err != nil {
		return errClientGone
	}
	enc := base64.NewEncoder(base64.StdEncoding, w)
	err := a.eachSlice(ctx, p, func(s []byte) error {
		if _, err := enc.Write(s); err != nil {
			return errClientGone
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return errClientGone
	}
	if _, err := io.WriteString(w, `"`); err != nil {
		return errClientGone
	}
	return nil
}

// errClientGone is a write to the client that failed: nothing more to do.
var errClientGone = errors.New("client gone")

// marshal encodes v as every answer is encoded (no HTML escaping), without
// the trailing newline.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// escapePiece is how much text is escaped at a time.
const escapePiece = 32 << 10

// writeString writes the part as a JSON string, escaped exactly as
// encoding/json escapes it whole: it is cut only between characters.
func (a *API) writeString(ctx context.Context, w io.Writer, p *store.Part) error {
	var esc bytes.Buffer
	enc := json.NewEncoder(&esc)
	enc.SetEscapeHTML(false)
	escape := func(b []byte) error {
		esc.Reset()
		enc.Encode(string(b))
		out := esc.Bytes() // "…"\n
		if _, err := w.Write(out[1 : len(out)-2]); err != nil {
			return errClientGone
		}
		return nil
	}
	if _, err := io.WriteString(w, `"`); err != nil {
		return errClientGone
	}
	var pending []byte // the start of a character the last slice cut off
	err := a.eachSlice(ctx, p, func(s []byte) error {
		for len(pending) > 0 && !utf8.FullRune(pending) && len(s) > 0 {
			pending, s = append(pending, s[0]), s[1:]
		}
		if len(pending) > 0 && utf8.FullRune(pending) {
			if err := escape(pending); err != nil {
				return err
			}
			pending = pending[:0]
		}
		if i := lastRuneStart(s); i >= 0 && !utf8.FullRune(s[i:]) {
			pending, s = append(pending, s[i:]...), s[:i]
		}
		for len(s) > 0 {
			n := min(len(s), escapePiece)
			for n < len(s) && n > 0 && !utf8.RuneStart(s[n]) {
				n--
			}
			if n == 0 { // no character starts here: invalid bytes, each its own
				n = min(len(s), escapePiece)
			}
			if err := escape(s[:n]); err != nil {
				return err
			}
			s = s[n:]
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(pending) > 0 {
		if err := escape(pending); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(w, `"`); err != nil {
		return errClientGone
	}
	return nil
}

// lastRuneStart is where the last character of b starts, looking at most
// utf8.UTFMax bytes back; -1 for an empty b.
func lastRuneStart(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return len(b) - 1
}

// writeLinks writes the message's links as a JSON array, decoding and
// encoding one at a time.
func (a *API) writeLinks(ctx context.Context, w io.Writer, d store.MessageDetail) error {
	if _, err := io.WriteString(w, "["); err != nil {
		return errClientGone
	}
	sep := ""
	err := store.ReadLinks(d.ID, &partReader{ctx: ctx, a: a, p: d.LinksPart}, func(l store.Link) error {
		b := append([]byte(sep), marshal(renderLink(l))...)
		sep = ","
		if _, err := w.Write(b); err != nil {
			return errClientGone
		}
		return nil
	})
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, "]"); err != nil {
		return errClientGone
	}
	return nil
}
