package web

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/inbucket/html2text"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/store"
)

type messageView struct {
	ID, Subject, From, To, Cc, ReplyTo, Size, MessageID string
	Date                                                *timeView
	EnvelopeFrom, EnvelopeTo                            string
	Received                                            timeView
	Tab                                                 string
	Tabs                                                []tabLink
	InboxID, InboxURL, InboxName, DeleteURL, RawURL     string
	Warnings                                            []string

	// HTMLURL is empty for a message without an HTML part; HasText is
	// false for one without a text part. Their tabs say so.
	HTMLURL, LoadImagesURL string
	ImagesLoaded           bool
	Text                   string
	HasText                bool
	// TextFromHTML says Text is the HTML part made readable, the message
	// having no text part; TextCut that it is of the HTML's first
	// maxSourceShown bytes only.
	TextFromHTML, TextCut bool
	Source                string
	SourceTruncated       bool
	Headers               []fieldRow
	Links                 []linkRow
	// LinkKinds filter the Links tab by kind; LinksKept is how many links
	// the message keeps, LinksTruncated that it had more.
	LinkKinds      []kindLink
	LinksKept      int
	LinksTruncated bool
	Codes          []codeRow
	Attachments    []attachmentRow
}

// tabLink is one tab of a message. Its Count is shown beside its label
// but left out of its accessible name, so that the tab is found by its
// label alone ("Links", not "Links (2)").
type tabLink struct {
	ID, Label, Count, URL string
	Current               bool
}

type fieldRow struct{ Name, Value string }

type linkRow struct {
	URL, Text, Origin, Kind string
	// Safe is an http(s) URL the page may link to; others are shown as text.
	Safe bool
}

// kindLink is one choice of the Links tab's kind filter, with how many
// of the message's links it shows.
type kindLink struct {
	Label, URL string
	Count      int
	Current    bool
}

// codeRow is a verification code, with the text around it split where
// the code appears in it.
type codeRow struct {
	ID, Value                string
	Before, InContext, After string
}

type attachmentRow struct {
	Filename, ContentType, Size, URL string
	Inline                           bool
}

// maxSourceShown bounds the raw message shown in the Source tab; the
// download has all of it.
const maxSourceShown = 1 << 20

func (h *Handler) messagePage(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	pid := pc.project.ID
	m, err := h.store.Message(r.Context(), pid, r.PathValue("mid"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	in, err := h.store.Inbox(r.Context(), pid, m.InboxID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	base := messageURL(pid, m.ID)
	v := messageView{
		ID: m.ID, Subject: m.Subject, To: someAddresses(m.To, m.ToCount, store.ListedAddresses), Cc: someAddresses(m.Cc, m.CcCount, store.ListedAddresses),
		ReplyTo: someAddresses(m.ReplyTo, m.ReplyToCount, store.ListedAddresses),
		Size:    size(m.Size), MessageID: m.MessageID, EnvelopeFrom: envelopeSender(m.EnvelopeFrom), EnvelopeTo: strings.Join(m.EnvelopeTo, ", "),
		Received: timeOf(m.ReceivedAt), InboxID: in.ID, InboxURL: inboxURL(pid, in.ID), InboxName: in.Name,
		DeleteURL: base + "/delete", RawURL: base + "/raw", Warnings: m.Warnings,
	}
	if m.From != nil {
		v.From = addressString(*m.From)
	}
	if m.Date != nil {
		d := timeOf(*m.Date)
		v.Date = &d
	}

	// Every message has every tab (SPEC §11 lists them), in this order;
	// one whose part the message lacks says so.
	tabs := []tabLink{
		{ID: "html", Label: "HTML"},
		{ID: "text", Label: "Text"},
		{ID: "source", Label: "Source"},
		{ID: "headers", Label: "Headers"},
		{ID: "links", Label: "Links", Count: linkCount(m)},
		{ID: "codes", Label: "Codes", Count: strconv.Itoa(len(m.Codes))},
		{ID: "attachments", Label: "Attachments", Count: strconv.Itoa(len(m.Attachments))},
	}
	v.Tab = r.URL.Query().Get("tab")
	if v.Tab == "" {
		v.Tab = "source"
		if m.Text != nil {
			v.Tab = "text"
		}
		if m.HTML != nil {
			v.Tab = "html"
		}
	}
	known := false
	for _, t := range tabs {
		known = known || t.ID == v.Tab
		t.URL, t.Current = base+"?tab="+t.ID, t.ID == v.Tab
		v.Tabs = append(v.Tabs, t)
	}
	if !known {
		h.errorPage(w, r, http.StatusNotFound, "This message has no such tab.")
		return
	}

	switch v.Tab {
	case "html":
		if m.HTML == nil {
			break
		}
		v.ImagesLoaded = r.URL.Query().Get("images") == "1"
		v.HTMLURL = base + "/html"
		if v.ImagesLoaded {
			v.HTMLURL += "?images=1"
		}
		v.LoadImagesURL = base
	case "text":
		switch {
		case m.Text != nil:
			v.Text, v.HasText = *m.Text, true
		case m.HTML != nil:
			v.Text, v.TextCut = textOfHTML(*m.HTML)
			v.HasText, v.TextFromHTML = true, true
		}
	case "source":
		raw, err := h.store.MessageRaw(r.Context(), pid, m.ID)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if len(raw) > maxSourceShown {
			raw, v.SourceTruncated = raw[:maxSourceShown], true
		}
		v.Source = strings.ToValidUTF8(string(raw), "\uFFFD")
	case "headers":
		for _, hd := range m.Headers {
			for _, val := range hd.Values {
				v.Headers = append(v.Headers, fieldRow{Name: hd.Name, Value: val})
			}
		}
	case "links":
		kind := r.URL.Query().Get("kind")
		if kind != "" && !slices.Contains(store.LinkKinds, kind) {
			h.errorPage(w, r, http.StatusBadRequest, "There is no link kind "+strconv.Quote(kind)+
				"; the kinds are "+strings.Join(store.LinkKinds, ", ")+".")
			return
		}
		v.LinksKept, v.LinksTruncated = len(m.Links), m.LinksTruncated
		v.LinkKinds = []kindLink{{Label: "All", URL: base + "?tab=links", Count: len(m.Links), Current: kind == ""}}
		for _, k := range store.LinkKinds {
			n := 0
			for _, l := range m.Links {
				if l.Kind == k {
					n++
				}
			}
			v.LinkKinds = append(v.LinkKinds, kindLink{Label: k, URL: base + "?tab=links&kind=" + k, Count: n, Current: kind == k})
		}
		for _, l := range m.Links {
			if kind != "" && l.Kind != kind {
				continue
			}
			row := linkRow{URL: l.URL, Origin: l.Origin, Kind: l.Kind, Safe: isWebURL(l.URL)}
			if l.Text != nil {
				row.Text = *l.Text
			}
			v.Links = append(v.Links, row)
		}
	case "codes":
		for i, c := range m.Codes {
			row := codeRow{ID: "code-" + strconv.Itoa(i+1), Value: c.Value}
			row.Before, row.InContext, row.After = splitAround(c.Context, c.Value)
			v.Codes = append(v.Codes, row)
		}
	case "attachments":
		for _, a := range m.Attachments {
			v.Attachments = append(v.Attachments, attachmentRow{Filename: shownFilename(a), ContentType: a.ContentType,
				Size: size(a.Size), URL: base + "/attachments/" + url.PathEscape(a.ID), Inline: a.Inline})
		}
	}

	h.show(w, r, pc.session, pc, http.StatusOK, page{template: "message", title: subjectOrNone(m.Subject),
		section: "captures", current: in.ID, view: v})
}

// envelopeSender is the SMTP MAIL FROM as the page shows it: the null
// sender of a bounce written "<>", as mail servers write it.
func envelopeSender(from string) string {
	if from == "" {
		return "<>"
	}
	return from
}

// textOfHTML is an HTML body made readable, as the terminal interface
// shows a message without a text part, converted from its first
// maxSourceShown bytes only (cut reports it), which bounds the memory
// the conversion takes.
func textOfHTML(doc string) (text string, cut bool) {
	if len(doc) > maxSourceShown {
		// One byte past the cut is all bytesPreview reads to find a rune
		// boundary.
		b, _ := bytesPreview([]byte(doc[:maxSourceShown+1]), maxSourceShown)
		doc, cut = string(b), true
	}
	text, err := html2text.FromString(doc, html2text.Options{OmitLinks: true})
	if err != nil {
		// The parser reads any input; only its reader can fail.
		return "", cut
	}
	return strings.TrimSpace(text), cut
}

// linkCount is the Links tab's count: "1000+" when the message had more
// links than it keeps.
func linkCount(m store.Message) string {
	n := strconv.Itoa(len(m.Links))
	if m.LinksTruncated {
		n += "+"
	}
	return n
}

// splitAround finds a code in the text around it, where it may be written
// in groups ("123-456", "123 456"), and returns the text before it, the
// code as written, and the text after it; all of text in before when the
// code is not there.
func splitAround(text, code string) (before, inText, after string) {
	var pattern strings.Builder
	pattern.WriteString("(?i)")
	for i, r := range code {
		if i > 0 {
			pattern.WriteString(`[-\s.\x{00a0}]?`)
		}
		pattern.WriteString(regexp.QuoteMeta(string(r)))
	}
	re, err := regexp.Compile(pattern.String())
	if code == "" || err != nil {
		return text, "", ""
	}
	loc := re.FindStringIndex(text)
	if loc == nil {
		return text, "", ""
	}
	return text[:loc[0]], text[loc[0]:loc[1]], text[loc[1]:]
}

func subjectOrNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(no subject)"
	}
	return s
}

func isWebURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// untrustedCSP is the policy of a message's HTML: a sandbox (no script, a
// unique origin), nothing loaded from anywhere but inline styles, data:
// images and this site's (the message's own inline parts), and remote
// images only once the reader asked for them. 'self' is the site the
// frame was served from, whatever name the browser reached it by, which
// in the sandbox's unique origin still holds. base-uri 'none' keeps a
// <base href> in the message from moving the inline parts' addresses,
// which are relative to that site, to another.
func untrustedCSP(images bool) string {
	img := "img-src data: 'self'"
	if images {
		img += " http: https:"
	}
	return "sandbox allow-popups allow-popups-to-escape-sandbox; default-src 'none'; style-src 'unsafe-inline'; " +
		"font-src data:; " + img + "; form-action 'none'; base-uri 'none'; frame-ancestors 'self'"
}

// messageHTML serves a message's HTML body for the sandboxed frame of the
// HTML tab. Links open in a new tab, outside the sandbox.
func (h *Handler) messageHTML(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	m, err := h.store.Message(r.Context(), pc.project.ID, r.PathValue("mid"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if m.HTML == nil {
		h.errorPage(w, r, http.StatusNotFound, "This message has no HTML body.")
		return
	}
	doc, err := h.withInlineParts(r.Context(), pc.project.ID, m)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", untrustedCSP(r.URL.Query().Get("images") == "1"))
	hd.Set("X-Frame-Options", "SAMEORIGIN")
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	w.Write(withBaseTarget(doc))
}

// An inline part (an image a message carries, named by a cid: URL in its
// HTML) is served from an address of its own, so that the HTML grows by
// one short URL per reference rather than by a copy of the image. The
// message's frame is sandboxed and sends no session cookie, so each
// address carries a signature the HTML's own response made: it opens that
// one part of that one message, for inlineLifetime, on any replica
// sharing the database and after a restart: it is signed with a secret
// kept in the database (inlineSecret).
const inlineLifetime = time.Hour

// inlineSecret names the database's secret that signs inline addresses.
const inlineSecret = "inline-images"

// inlineKey holds the database's inline secret once read: it never
// changes, so it is asked for once per process, when first needed. Two
// requests that find it missing at once both ask and get the same bytes.
type inlineKey struct{ key atomic.Pointer[[]byte] }

// inlineSigningKey returns the key inline addresses are signed with.
func (h *Handler) inlineSigningKey(ctx context.Context) ([]byte, error) {
	if key := h.inlineKey.key.Load(); key != nil {
		return *key, nil
	}
	key, err := h.store.Secret(ctx, inlineSecret)
	if err != nil {
		return nil, err
	}
	h.inlineKey.key.Store(&key)
	return key, nil
}

// maxInlineRefs bounds the cid: references of one body made into
// addresses; past it, the rest stay cid: references. With it, the HTML
// served is at most maxInlineRefs short URLs longer than the body.
const maxInlineRefs = 1000

// withInlineParts returns m's HTML body with each cid: reference to a
// part of the message replaced by the signed address of that part. Which
// parts are images is decided when one is asked for (inlinePartType).
// The addresses are relative to this site, not absolute from the
// request's Host: behind a proxy that passes its own upstream name as
// Host, the browser still asks the site it reached.
func (h *Handler) withInlineParts(ctx context.Context, projectID string, m store.Message) (string, error) {
	doc := *m.HTML
	parts := map[string]string{} // Content-ID to attachment id
	for _, a := range m.Attachments {
		if _, seen := parts[a.ContentID]; a.ContentID != "" && !seen {
			parts[a.ContentID] = a.ID
		}
	}
	if len(parts) == 0 {
		return doc, nil
	}
	key, err := h.inlineSigningKey(ctx)
	if err != nil {
		return "", err
	}
	base := messageURL(projectID, m.ID) + "/inline/"
	expires := time.Now().Add(inlineLifetime).Unix()
	urls := map[string]string{}
	made := 0
	// One pass, whole references only: cid:logo is not the start of
	// cid:logo-dark.
	return cidReference.ReplaceAllStringFunc(doc, func(ref string) string {
		aid, ok := parts[contentIDOf(ref)]
		if !ok || made == maxInlineRefs {
			return ref
		}
		made++
		u, ok := urls[aid]
		if !ok {
			u = base + url.PathEscape(aid) + "?t=" + inlineToken(key, projectID, m.ID, aid, expires)
			urls[aid] = u
		}
		return u
	}), nil
}

// inlineToken signs the address of one inline part until expires (Unix
// seconds) with key: "expires.signature".
func inlineToken(key []byte, projectID, messageID, attachmentID string, expires int64) string {
	exp := strconv.FormatInt(expires, 36)
	mac := hmac.New(sha256.New, key)
	for _, s := range []string{projectID, messageID, attachmentID, exp} {
		mac.Write([]byte(s))
		mac.Write([]byte{0})
	}
	return exp + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:18])
}

// validInlineToken reports whether token is a live signature of the
// address of this inline part, made with key.
func validInlineToken(key []byte, projectID, messageID, attachmentID, token string) bool {
	exp, _, ok := strings.Cut(token, ".")
	expires, err := strconv.ParseInt(exp, 36, 64)
	if !ok || err != nil || time.Now().Unix() > expires {
		return false
	}
	return hmac.Equal([]byte(token), []byte(inlineToken(key, projectID, messageID, attachmentID, expires)))
}

// messageInlinePart serves an inline part of a message to its HTML frame,
// as an image only: a part whose bytes are no image stays a broken one.
func (h *Handler) messageInlinePart(w http.ResponseWriter, r *http.Request) {
	pid, mid, aid := r.PathValue("pid"), r.PathValue("mid"), r.PathValue("aid")
	key, err := h.inlineSigningKey(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if !validInlineToken(key, pid, mid, aid, r.URL.Query().Get("t")) {
		h.errorPage(w, r, http.StatusNotFound, "There is no such inline image, or its address has expired: open the message again.")
		return
	}
	a, data, err := h.store.AttachmentData(r.Context(), pid, mid, aid)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	mediaType, ok := inlinePartType(a.ContentType, data)
	if !ok {
		h.errorPage(w, r, http.StatusNotFound, "This part of the message is not an image.")
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", mediaType)
	// Opened on its own, an SVG image runs nothing and loads nothing.
	hd.Set("Content-Security-Policy", "sandbox; default-src 'none'; style-src 'unsafe-inline'")
	// The frame asking for it has an origin of its own (the sandbox's).
	hd.Set("Cross-Origin-Resource-Policy", "cross-origin")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data)
}

// inlinePartType is the image type an inline part is served as: the one
// its bytes show, whatever the sender labelled it (signatures often come
// as application/octet-stream). Bytes of a kind no sniffer knows are
// served as the image type they are labelled with, and SVG, which sniffs
// as text, only when labelled so; anything else is no image.
func inlinePartType(contentType string, data []byte) (string, bool) {
	sniffed, _, _ := mime.ParseMediaType(http.DetectContentType(data))
	if strings.HasPrefix(sniffed, "image/") {
		return sniffed, true
	}
	labelled, _, _ := mime.ParseMediaType(contentType)
	switch {
	case labelled == "image/svg+xml":
		return labelled, sniffed == "text/xml" || sniffed == "text/plain"
	case strings.HasPrefix(labelled, "image/"):
		return labelled, sniffed == "application/octet-stream"
	}
	return "", false
}

// cidReference is a cid: URL in an HTML body, up to the quote, bracket or
// space that ends it.
var cidReference = regexp.MustCompile(`(?i)\bcid:[^\s"'<>()]+`)

// contentIDOf is the Content-ID a cid: URL names (RFC 2392: URL-encoded),
// without the angle brackets of the header if the URL kept them.
func contentIDOf(ref string) string {
	id := ref[len("cid:"):]
	if u, err := url.PathUnescape(id); err == nil {
		id = u
	}
	if len(id) > 2 && id[0] == '<' && id[len(id)-1] == '>' {
		id = id[1 : len(id)-1]
	}
	return id
}

// withBaseTarget adds <base href="" target="_blank"> to an HTML document,
// after its doctype if it has one (anything before a doctype would switch
// the page to quirks mode). Only the first <base> with an href counts,
// and this one's is the document's own address: with base-uri 'none' in
// untrustedCSP, a <base href> in the message cannot move the relative
// addresses of its inline parts even where a browser ignores that
// directive.
func withBaseTarget(doc string) []byte {
	const base = `<base href="" target="_blank">`
	rest := strings.TrimLeft(doc, " \t\r\n\uFEFF")
	if len(rest) >= 9 && strings.EqualFold(rest[:9], "<!doctype") {
		if end := strings.IndexByte(rest, '>'); end >= 0 {
			return []byte(rest[:end+1] + base + rest[end+1:])
		}
	}
	return []byte(base + doc)
}

// download sends bytes as a file to save, never to render on this origin.
func download(w http.ResponseWriter, filename, contentType string, body []byte) {
	hd := w.Header()
	hd.Set("Content-Type", contentType)
	hd.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filename}))
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
}

// safeFilename keeps a sender's file name usable and harmless: no
// directories, no control characters, not empty.
func safeFilename(name, fallback string) string {
	name = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == '"' {
			return '_'
		}
		return r
	}, withoutControls(path.Base(strings.ReplaceAll(name, "\\", "/"))))
	name = strings.Trim(name, ". ")
	if name == "" || !utf8.ValidString(name) {
		return fallback
	}
	return name
}

// shownFilename is an attachment's name as the page shows it: the
// sender's own (the page escapes it), control characters aside; the
// download's name (attachmentName) is made safe for a file system.
func shownFilename(a store.Attachment) string {
	name := strings.TrimSpace(withoutControls(a.Filename))
	if name == "" || !utf8.ValidString(name) {
		return attachmentName(a)
	}
	return name
}

// withoutControls is name with its control characters as "_".
func withoutControls(name string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '_'
		}
		return r
	}, name)
}

func attachmentName(a store.Attachment) string {
	return safeFilename(a.Filename, a.ID+contract.FileExtension(a.ContentType))
}

func (h *Handler) messageRaw(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	id := r.PathValue("mid")
	raw, err := h.store.MessageRaw(r.Context(), pc.project.ID, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	download(w, safeFilename(id, "message")+".eml", "message/rfc822", raw)
}

func (h *Handler) messageAttachment(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	a, data, err := h.store.AttachmentData(r.Context(), pc.project.ID, r.PathValue("mid"), r.PathValue("aid"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	download(w, attachmentName(a), "application/octet-stream", data)
}

func (h *Handler) deleteMessage(w http.ResponseWriter, r *http.Request, pc *projectCtx) {
	pid := pc.project.ID
	back := "/"
	if inbox := r.PostFormValue("inbox"); inbox != "" {
		back = inboxURL(pid, url.PathEscape(inbox))
	}
	err := h.store.DeleteMessage(r.Context(), pid, r.PathValue("mid"))
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Another tab, client or a purge got there first: what the user
		// asked for is done.
		redirect(w, r, back, "The message was already deleted.")
	case err != nil:
		h.fail(w, r, err)
	default:
		redirect(w, r, back, "Deleted the message.")
	}
}

// bytesPreview is the start of b, cut at a rune boundary.
func bytesPreview(b []byte, max int) ([]byte, bool) {
	if len(b) <= max {
		return b, false
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return bytes.Clone(b[:cut]), true
}
