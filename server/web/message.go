package web

import (
	"bytes"
	"context"
	"encoding/base64"
	"mime"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

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
	Source                 string
	SourceTruncated        bool
	Headers                []fieldRow
	Links                  []linkRow
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
		ID: m.ID, Subject: m.Subject, To: addressList(m.To), Cc: addressList(m.Cc), ReplyTo: addressList(m.ReplyTo),
		Size: size(m.Size), MessageID: m.MessageID, EnvelopeFrom: m.EnvelopeFrom, EnvelopeTo: strings.Join(m.EnvelopeTo, ", "),
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
		if m.Text != nil {
			v.Text, v.HasText = *m.Text, true
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
// unique origin), nothing loaded from anywhere but inline styles and data:
// images, and remote images only once the reader asked for them.
func untrustedCSP(images bool) string {
	img := "img-src data:"
	if images {
		img = "img-src data: http: https:"
	}
	return "sandbox allow-popups allow-popups-to-escape-sandbox; default-src 'none'; style-src 'unsafe-inline'; " +
		"font-src data:; " + img + "; form-action 'none'; frame-ancestors 'self'"
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
	doc, err := h.withInlineImages(r.Context(), pc.project.ID, m)
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

// maxInlineImages bounds the bytes of the inline images one HTML body
// carries as data: URLs; past it, the rest stay cid: references.
const maxInlineImages = 8 << 20

// withInlineImages returns m's HTML body with each cid: reference to an
// image part of the message replaced by that image as a data: URL. The
// frame is sandboxed, without the session's cookie and with images from
// elsewhere blocked until asked, so inline images, which are part of the
// message and tell no one it was opened, travel inside the document.
func (h *Handler) withInlineImages(ctx context.Context, projectID string, m store.Message) (string, error) {
	doc := *m.HTML
	referenced := map[string]bool{}
	for _, ref := range cidReference.FindAllString(doc, maxInlineRefs) {
		referenced[contentIDOf(ref)] = true
	}
	urls := map[string]string{}
	budget := maxInlineImages
	for _, a := range m.Attachments {
		mediaType, _, err := mime.ParseMediaType(a.ContentType)
		if err != nil || !referenced[a.ContentID] || !strings.HasPrefix(mediaType, "image/") || a.Size > int64(budget) {
			continue
		}
		_, data, err := h.store.AttachmentData(ctx, projectID, m.ID, a.ID)
		if err != nil {
			return "", err
		}
		budget -= len(data)
		urls[a.ContentID] = "data:" + mediaType + ";base64," + base64.StdEncoding.EncodeToString(data)
	}
	if len(urls) == 0 {
		return doc, nil
	}
	// One pass, whole references only: cid:logo is not the start of
	// cid:logo-dark.
	return cidReference.ReplaceAllStringFunc(doc, func(ref string) string {
		if u, ok := urls[contentIDOf(ref)]; ok {
			return u
		}
		return ref
	}), nil
}

// cidReference is a cid: URL in an HTML body, up to the quote, bracket or
// space that ends it.
var cidReference = regexp.MustCompile(`(?i)\bcid:[^\s"'<>()]+`)

// maxInlineRefs bounds the cid: references one body is searched for.
const maxInlineRefs = 1000

// contentIDOf is the Content-ID a cid: URL names (RFC 2392: URL-encoded).
func contentIDOf(ref string) string {
	id := ref[len("cid:"):]
	if u, err := url.PathUnescape(id); err == nil {
		return u
	}
	return id
}

// withBaseTarget adds <base target="_blank"> to an HTML document, after
// its doctype if it has one (anything before a doctype would switch the
// page to quirks mode).
func withBaseTarget(doc string) []byte {
	const base = `<base target="_blank">`
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
	if err := h.store.DeleteMessage(r.Context(), pid, r.PathValue("mid")); err != nil {
		h.fail(w, r, err)
		return
	}
	back := "/"
	if inbox := r.PostFormValue("inbox"); inbox != "" {
		back = inboxURL(pid, url.PathEscape(inbox))
	}
	redirect(w, r, back, "Deleted the message.")
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
