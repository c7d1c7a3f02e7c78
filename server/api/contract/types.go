package contract

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Paging and waiting bounds of the list routes.
const (
	DefaultLimit = 20
	MaxLimit     = 100
	MaxWait      = 30 * time.Second
)

// TimeLayout is how every time is written: RFC 3339 in UTC with
// milliseconds and Z.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Time is a time on the wire, written in TimeLayout and read from any RFC
// 3339 time.
type Time struct{ time.Time }

// FormatTime writes t as the API does.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// TimeOf is t on the wire; nil stays nil.
func TimeOf(t *time.Time) *Time {
	if t == nil {
		return nil
	}
	return &Time{*t}
}

func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + FormatTime(t.Time) + `"`), nil
}

func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("time: %w", err)
	}
	v, err := ParseTime(s)
	if err != nil {
		return fmt.Errorf("time: %w", err)
	}
	t.Time = v
	return nil
}

// rfc3339 is RFC 3339's date-time (5.6), checked before time.Parse reads
// it: Parse checks each field's range but, to stay compatible with what it
// took before, also takes a comma before the fraction and any two digits
// as an offset's hours, so "+24:00" would read as a day's offset
// (go.dev/issue/54580).
var rfc3339 = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`)

// ParseTime reads a time as the API takes one (since=): RFC 3339 with a
// zone offset or Z; a naive time is ambiguous and refused. An unencoded
// "+02:00" in a query string arrives as " 02:00", which is still
// unambiguous and read as meant. Every reader of a time (the read API, the
// web UI, capture wait, the MCP tools) goes through here, so all take the
// same times.
func ParseTime(s string) (time.Time, error) {
	if i := strings.LastIndexByte(s, ' '); i > 0 && i >= len(s)-6 {
		s = s[:i] + "+" + s[i+1:]
	}
	// RFC 3339 (5.6) takes its T and Z in either case; Go only upper.
	if len(s) > 10 && (s[10] == 't' || strings.HasSuffix(s, "z")) {
		b := []byte(s)
		if b[10] == 't' {
			b[10] = 'T'
		}
		if b[len(b)-1] == 'z' {
			b[len(b)-1] = 'Z'
		}
		s = string(b)
	}
	if !rfc3339.MatchString(s) {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time: want 2006-01-02T15:04:05Z, "+
			"a fraction after a period (.250), and Z or an offset from -23:59 to +23:59", s)
	}
	return time.Parse(time.RFC3339Nano, s)
}

// LinkList is the links route's envelope: its one page (next is always
// null), and whether the message had more links than it keeps, so that a
// link looked for and not found can be told from one not kept.
type LinkList struct {
	Items          []Link  `json:"items"`
	Next           *string `json:"next"`
	LinksTruncated bool    `json:"links_truncated"`
}

// List is the envelope of every list route. Next is "" where the wire says
// null: no further page.
type List[T any] struct {
	Items []T
	Next  string
}

type wireList[T any] struct {
	Items []T     `json:"items"`
	Next  *string `json:"next"`
}

func (l List[T]) MarshalJSON() ([]byte, error) {
	w := wireList[T]{Items: l.Items}
	if w.Items == nil {
		w.Items = []T{}
	}
	if l.Next != "" {
		w.Next = &l.Next
	}
	return json.Marshal(w)
}

func (l *List[T]) UnmarshalJSON(b []byte) error {
	var w wireList[T]
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	l.Items, l.Next = w.Items, ""
	if w.Next != nil {
		l.Next = *w.Next
	}
	return nil
}

// All reads a whole list, newest first, the way SPEC §8 pages: each page's
// next is passed as before for the one after it. page returns one page of
// items older than before ("" for the newest page).
func All[T any](page func(before string) (items []T, next string, err error)) ([]T, error) {
	var out []T
	before := ""
	for {
		items, next, err := page(before)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if next == "" {
			return out, nil
		}
		before = next
	}
}

// Me is GET /me: the key's project, its plan and usage.
type Me struct {
	Project struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		CreatedAt Time   `json:"created_at"`
	} `json:"project"`
	Plan struct {
		Name   string `json:"name"`
		Quotas Quotas `json:"quotas"`
	} `json:"plan"`
	Usage Usage `json:"usage"`
	Key   struct {
		ID        string `json:"id"`
		CreatedAt Time   `json:"created_at"`
	} `json:"key"`
}

// Quotas are a plan's limits.
type Quotas struct {
	APIKeys               int64 `json:"api_keys"`
	Inboxes               int64 `json:"inboxes"`
	Endpoints             int64 `json:"endpoints"`
	RetentionDays         int64 `json:"retention_days"`
	CapturesPerCollection int64 `json:"captures_per_collection"`
	MessageBytes          int64 `json:"message_bytes"`
	RequestBodyBytes      int64 `json:"request_body_bytes"`
	ConcurrentWaits       int   `json:"concurrent_waits"`
	RequestsPerSecond     int   `json:"requests_per_second"`
	Burst                 int   `json:"burst"`
}

// Usage counts what a project holds now.
type Usage struct {
	APIKeys   int64 `json:"api_keys"`
	Inboxes   int64 `json:"inboxes"`
	Endpoints int64 `json:"endpoints"`
	Messages  int64 `json:"messages"`
	Requests  int64 `json:"requests"`
}

// Project is a project as `capture project … --json` prints it.
type Project struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Plan      string `json:"plan"`
	CreatedAt Time   `json:"created_at"`
}

// Key is an API key as `capture key … --json` prints it. Secret, the key
// itself, is there only when it was just created.
type Key struct {
	ID        string `json:"id"`
	ProjectID string `json:"project_id"`
	CreatedAt Time   `json:"created_at"`
	RevokedAt *Time  `json:"revoked_at"`
	Secret    string `json:"key,omitempty"`
}

// Inbox is an item of GET /inboxes.
type Inbox struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	CreatedAt    Time   `json:"created_at"`
	MessageCount int64  `json:"message_count"`
	SMTP         SMTP   `json:"smtp"`
}

// NewInbox is an inbox just created, as `capture inbox create --json`
// prints it: the one time its password is shown with it.
type NewInbox struct {
	Inbox
	SMTPPassword string `json:"smtp_password"`
}

// SMTP is how to send mail into an inbox; never its password.
type SMTP struct {
	Host     string `json:"host"`
	Username string `json:"username"`
	Ports    struct {
		StartTLS []int `json:"starttls"`
		TLS      []int `json:"tls"`
	} `json:"ports"`
}

// Endpoint is an item of GET /endpoints.
type Endpoint struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	CaptureURL   string   `json:"capture_url"`
	TargetURL    *string  `json:"target_url"`
	Response     Response `json:"response"`
	RequestCount int64    `json:"request_count"`
	CreatedAt    Time     `json:"created_at"`
}

// Response is what an endpoint answers its senders.
type Response struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	DelayMS int64             `json:"delay_ms"`
}

// Address is a mail address with its display name, if any.
type Address struct {
	Name    *string `json:"name"`
	Address string  `json:"address"`
}

func (a Address) String() string {
	if a.Name == nil {
		return a.Address
	}
	return FormatAddress(*a.Name, a.Address)
}

// FormatAddress shows a recipient as a mail client does: "Name
// <address>", with the name quoted when it holds a character that would
// otherwise read as the end of the recipient ("Smith, John"), so a list of
// them still shows where each ends.
func FormatAddress(name, address string) string {
	if name == "" {
		return address
	}
	if strings.ContainsAny(name, `()<>[]:;@\,."`) || strings.TrimSpace(name) != name {
		name = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(name) + `"`
	}
	return name + " <" + address + ">"
}

// MessageSummary is an item of GET /inboxes/{id}/messages.
type MessageSummary struct {
	ID         string   `json:"id"`
	InboxID    string   `json:"inbox_id"`
	ReceivedAt Time     `json:"received_at"`
	From       *Address `json:"from"`
	// To and Cc are the first 100 addresses of the To and Cc headers;
	// ToTruncated and CcTruncated say the header named more (the
	// message's headers hold them all, and the to filter matches them).
	To              []Address `json:"to"`
	ToTruncated     bool      `json:"to_truncated"`
	Cc              []Address `json:"cc"`
	CcTruncated     bool      `json:"cc_truncated"`
	Subject         string    `json:"subject"`
	Size            int64     `json:"size"`
	AttachmentCount int       `json:"attachment_count"`
	Snippet         string    `json:"snippet"`
}

// Message is GET /messages/{id}.
type Message struct {
	MessageSummary
	Envelope Envelope `json:"envelope"`
	// ReplyTo is the first 100 addresses of Reply-To, ReplyToTruncated
	// says it named more.
	ReplyTo          []Address `json:"reply_to"`
	ReplyToTruncated bool      `json:"reply_to_truncated"`
	Date             *Time     `json:"date"`
	MessageID        *string   `json:"message_id"`
	Headers          Headers   `json:"headers"`
	Body             Body      `json:"body"`
	Links            []Link    `json:"links"`
	// LinksTruncated says the message had more links than Links holds
	// (the first 1,000 are kept).
	LinksTruncated bool `json:"links_truncated"`
	// Codes are the verification codes found at ingest, most likely first
	// (SPEC §15); empty, never null, when there are none.
	Codes       []Code       `json:"codes"`
	Attachments []Attachment `json:"attachments"`
	Warnings    []string     `json:"warnings"`
}

// Code is a one-time password or verification code a message presents,
// without its separators, with up to 80 characters of the text around it.
type Code struct {
	Value   string `json:"value"`
	Context string `json:"context"`
}

// Envelope is the SMTP envelope a message arrived with.
type Envelope struct {
	From string   `json:"from"`
	To   []string `json:"to"`
}

// Body holds a message's text and HTML bodies, nil where absent.
type Body struct {
	Text *string `json:"text"`
	HTML *string `json:"html"`
}

// Link is a URL found in a message.
type Link struct {
	URL    string  `json:"url"`
	Text   *string `json:"text"`
	Origin string  `json:"origin"`

	// Kind is what the link is for, one of LinkKinds, judged from its URL
	// and text at ingest.
	Kind string `json:"kind"`
}

// Link kinds (SPEC §15); every link is one of them.
const (
	LinkVerify      = "verify"
	LinkReset       = "reset"
	LinkLogin       = "login"
	LinkUnsubscribe = "unsubscribe"
	LinkOther       = "other"
)

// LinkKinds are the link kinds in the order SPEC §15 lists them.
var LinkKinds = []string{LinkVerify, LinkReset, LinkLogin, LinkUnsubscribe, LinkOther}

// Attachment describes one attachment or inline part of a message.
type Attachment struct {
	ID          string  `json:"id"`
	Filename    string  `json:"filename"`
	ContentType string  `json:"content_type"`
	Size        int64   `json:"size"`
	ContentID   *string `json:"content_id"`
	Inline      bool    `json:"inline"`
}

// RequestSummary is an item of GET /endpoints/{id}/requests.
type RequestSummary struct {
	ID          string  `json:"id"`
	EndpointID  string  `json:"endpoint_id"`
	Method      string  `json:"method"`
	Path        string  `json:"path"`
	Query       string  `json:"query"`
	ContentType *string `json:"content_type"`
	Size        int64   `json:"size"`
	ReceivedAt  Time    `json:"received_at"`
	RemoteAddr  string  `json:"remote_addr"`

	// LastDelivery is the newest replay or forward of the request; nil
	// (null) when there was none.
	LastDelivery *DeliverySummary `json:"last_delivery"`
}

// DeliverySummary is the part of a delivery a list item carries: enough to
// show whether the request reached its target.
type DeliverySummary struct {
	Kind           string `json:"kind"`
	Status         string `json:"status"`
	ResponseStatus *int   `json:"response_status"`
	CreatedAt      Time   `json:"created_at"`
}

// Target is the path with its query, as the sender appended it to the
// capture URL.
func (r RequestSummary) Target() string {
	if r.Query == "" {
		return r.Path
	}
	return r.Path + "?" + r.Query
}

// Request is GET /requests/{id}: the captured request exactly, and what was
// done with it since.
type Request struct {
	RequestSummary
	Headers    Headers    `json:"headers"`
	Body       *string    `json:"body"`
	BodyBase64 *string    `json:"body_base64"`
	Deliveries []Delivery `json:"deliveries"`
}

// SplitBody carries bytes the way every body is carried: valid UTF-8 as
// text, anything else as base64.
func SplitBody(b []byte) (text, b64 *string) {
	if utf8.Valid(b) {
		s := string(b)
		return &s, nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return nil, &s
}

// BodyBytes returns the body byte for byte, whichever field carries it.
func (r Request) BodyBytes() ([]byte, error) {
	switch {
	case r.Body != nil:
		return []byte(*r.Body), nil
	case r.BodyBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*r.BodyBase64)
		if err != nil {
			return nil, fmt.Errorf("request %s: body_base64: %w", r.ID, err)
		}
		return b, nil
	}
	return []byte{}, nil
}

// Delivery is one replay or forward of a captured request.
type Delivery struct {
	ID             string  `json:"id"`
	Kind           string  `json:"kind"`
	TargetURL      string  `json:"target_url"`
	Status         string  `json:"status"`
	ResponseStatus *int    `json:"response_status"`
	Error          *string `json:"error"`
	DurationMS     int64   `json:"duration_ms"`
	CreatedAt      Time    `json:"created_at"`
}

// Delivery kinds and statuses. "delivered" means the target answered
// 200–299.
const (
	KindReplay  = "replay"
	KindForward = "forward"

	StatusDelivered = "delivered"
	StatusFailed    = "failed"
)

// Caps of a delivery's fields, in bytes. POST /requests/{id}/deliveries
// refuses longer ones; a replay or a forwarding client keeps what fits
// (Clip).
const (
	MaxDeliveryTargetURL = 2 << 10
	MaxDeliveryError     = 4 << 10
	// MaxDeliveryDurationMS is a day: no delivery waits that long.
	MaxDeliveryDurationMS = 24 * 60 * 60 * 1000
)

// Clip cuts s to at most n bytes at a UTF-8 character boundary, marking a
// cut with "..." within the n bytes (ASCII, so a clipped URL stays one).
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "..."
	cut := n - len(mark)
	if cut < 0 {
		return ""
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	// Nor in a URL's percent escape, which would make it no URL.
	if i := strings.LastIndexByte(s[:cut], '%'); i >= 0 && i > cut-3 {
		cut = i
	}
	return s[:cut] + mark
}

// DeliveryReport is the body of POST /requests/{id}/deliveries: what a
// forwarding client tells the server about one local delivery, a response
// status or the error that prevented one.
type DeliveryReport struct {
	TargetURL      *string `json:"target_url"`
	ResponseStatus *int    `json:"response_status"`
	Error          *string `json:"error"`
	DurationMS     *int64  `json:"duration_ms"`
}

// ReplayEdits is the optional body of POST /requests/{id}/replay. Each
// field that is present changes the replayed request.
type ReplayEdits struct {
	Method     *string               `json:"method,omitempty"`
	Path       *string               `json:"path,omitempty"`
	Query      *string               `json:"query,omitempty"`
	Headers    map[string]HeaderEdit `json:"headers,omitempty"`
	Body       *string               `json:"body,omitempty"`
	BodyBase64 *string               `json:"body_base64,omitempty"`
}

// HeaderEdit is the new value of one header in a replay: on the wire a
// string, an array of strings, or null to remove the header.
type HeaderEdit struct {
	// Values replace the header's; nil with Remove.
	Values []string
	Remove bool
	// invalid marks a wire value of any other type. Decoding does not fail
	// on it, so that a server can name every bad header in one answer.
	invalid bool
}

// Valid reports whether the edit was a string, an array of strings or null.
func (h HeaderEdit) Valid() bool { return !h.invalid }

func (h HeaderEdit) MarshalJSON() ([]byte, error) {
	if h.Remove {
		return []byte("null"), nil
	}
	if h.Values == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(h.Values)
}

func (h *HeaderEdit) UnmarshalJSON(b []byte) error {
	*h = HeaderEdit{}
	if string(bytes.TrimSpace(b)) == "null" {
		h.Remove = true
		return nil
	}
	var one string
	if json.Unmarshal(b, &one) == nil {
		h.Values = []string{one}
		return nil
	}
	var many []string
	if json.Unmarshal(b, &many) == nil && many != nil {
		h.Values = many
		return nil
	}
	h.invalid = true
	return nil
}

// Replay is the answer of POST /requests/{id}/replay: the delivery, what
// was sent, and what the target answered (nil when it did not).
type Replay struct {
	Delivery
	Request  SentRequest     `json:"request"`
	Response *ReplayResponse `json:"response"`
}

// SentRequest is the request a replay sent.
type SentRequest struct {
	Method  string      `json:"method"`
	URL     string      `json:"url"`
	Headers http.Header `json:"headers"`
}

// ReplayResponse is the target's answer to a replay, its body cut at 64 KiB.
type ReplayResponse struct {
	Status     int         `json:"status"`
	Headers    http.Header `json:"headers"`
	Body       *string     `json:"body"`
	BodyBase64 *string     `json:"body_base64"`
	Truncated  bool        `json:"truncated"`
}

// Header is one header name with its values.
type Header struct {
	Name   string
	Values []string
}

// Headers are written as a JSON object of canonical name → values in the
// order the headers arrived, the values of a repeated name gathered under
// its first appearance; read back, they keep that order, which a person
// reading a capture expects and a map would lose.
type Headers []Header

func (hs Headers) MarshalJSON() ([]byte, error) {
	var names []string
	values := map[string][]string{}
	for _, h := range hs {
		name := http.CanonicalHeaderKey(h.Name)
		if _, seen := values[name]; !seen {
			names = append(names, name)
			values[name] = []string{}
		}
		values[name] = append(values[name], h.Values...)
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, name := range names {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, err := json.Marshal(name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(values[name])
		if err != nil {
			return nil, err
		}
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func (hs *Headers) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		*hs = nil
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("headers: want an object, got %v", tok)
	}
	out := Headers{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		var values []string
		if err := dec.Decode(&values); err != nil {
			return fmt.Errorf("headers: %s: %w", name, err)
		}
		out = append(out, Header{Name: name, Values: values})
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	*hs = out
	return nil
}

// Get returns the first value of the named header, matched
// case-insensitively.
func (hs Headers) Get(name string) string {
	name = http.CanonicalHeaderKey(name)
	for _, h := range hs {
		if http.CanonicalHeaderKey(h.Name) == name && len(h.Values) > 0 {
			return h.Values[0]
		}
	}
	return ""
}

// HTTP returns the headers as an http.Header.
func (hs Headers) HTTP() http.Header {
	out := make(http.Header, len(hs))
	for _, h := range hs {
		name := http.CanonicalHeaderKey(h.Name)
		out[name] = append(out[name], h.Values...)
	}
	return out
}

// FileExtension is the usual file extension of a content type: the subtype
// where it is one (.pdf, .png, .csv), else .txt for text the system also
// knows by it, else the first one the system knows, else .txt for any text
// and .bin for anything else. The web interface and the terminal viewer
// name a download without a file name of its own by it.
func FileExtension(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ".bin"
	}
	exts, _ := mime.ExtensionsByType(mt)
	_, sub, _ := strings.Cut(mt, "/")
	switch {
	case slices.Contains(exts, "."+sub):
		return "." + sub
	case slices.Contains(exts, ".txt"):
		return ".txt"
	case len(exts) > 0:
		return exts[0]
	case strings.HasPrefix(mt, "text/"):
		return ".txt"
	}
	return ".bin"
}
