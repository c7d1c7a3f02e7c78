package store

import (
	"errors"
	"net/url"
	"strings"
	"time"
)

// Errors callers map to protocol replies. Wrapped errors carry the detail.
var (
	ErrNotFound      = errors.New("not found")
	ErrQuotaExceeded = errors.New("quota_exceeded")
	ErrInvalidCursor = errors.New("invalid cursor")
	ErrInvalid       = errors.New("invalid")
	ErrExists        = errors.New("already exists")
	// ErrUnavailable means a write was not committed and will not be: the
	// store is closing, or the database could not commit within 5 s
	// (another process holding the write lock, a stalled disk). Callers
	// refuse the capture (503, SMTP 451) so that its sender retries.
	ErrUnavailable = errors.New("database unavailable")
	// ErrDiskFull comes with ErrUnavailable when the disk the database is
	// on has no room left: the same refusal, with the reason to say.
	ErrDiskFull = errors.New("the disk is full")
)

type Project struct {
	ID        string
	Name      string
	Plan      Plan
	CreatedAt time.Time
}

type Key struct {
	ID        string
	ProjectID string
	CreatedAt time.Time
	RevokedAt *time.Time
}

type Inbox struct {
	ID           string
	ProjectID    string
	Name         string
	SMTPPassword string
	MessageCount int64
	CreatedAt    time.Time
}

// Response is what the capture listener answers to the sender of a webhook.
type Response struct {
	Status  int
	Headers map[string]string
	Body    string
	Delay   time.Duration
}

// DefaultResponse is an endpoint's response until one is set.
func DefaultResponse() Response {
	return Response{Status: 200, Headers: map[string]string{}}
}

type Endpoint struct {
	ID           string
	ProjectID    string
	Name         string
	TargetURL    *string
	Response     Response
	RequestCount int64
	CreatedAt    time.Time
}

type Address struct {
	Name    string
	Address string
}

// Header is one header name with its values in the order received.
type Header struct {
	Name   string
	Values []string
}

type Link struct {
	URL    string
	Text   *string
	Origin string
	Kind   string // one of LinkKinds; "" is stored as LinkOther
}

// Link kinds (SPEC §15).
const (
	LinkVerify      = "verify"
	LinkReset       = "reset"
	LinkLogin       = "login"
	LinkUnsubscribe = "unsubscribe"
	LinkOther       = "other"
)

// LinkKinds lists every link kind.
var LinkKinds = []string{LinkVerify, LinkReset, LinkLogin, LinkUnsubscribe, LinkOther}

// Code is a verification code found in a message (SPEC §15).
type Code struct {
	Value   string
	Context string
}

// LinkFilter selects links of a message: URLs containing Match, of Kind
// (any when empty).
type LinkFilter struct {
	// Match is a substring of the URL, compared without regard to case,
	// either of them as stored (a URI: "%C3%BC", "%40") or decoded ("ü",
	// "@").
	Match string
	Kind  string
}

// selects reports whether f keeps l.
func (f LinkFilter) selects(l Link) bool { return f.matcher()(l) }

// matcher is selects with the match's forms worked out once, for the
// links of a message.
func (f LinkFilter) matcher() func(Link) bool {
	// Either side may be escaped or not: an escaped match ("%40example")
	// finds the URL as sent ("a@example"), and a decoded one ("ü") finds
	// its escapes.
	var matches []string
	if f.Match != "" {
		matches = forms(f.Match)
	}
	return func(l Link) bool {
		if f.Kind != "" && l.Kind != f.Kind {
			return false
		}
		if matches == nil {
			return true
		}
		urls := forms(l.URL)
		for _, match := range matches {
			for _, u := range urls {
				if strings.Contains(u, match) {
					return true
				}
			}
		}
		return false
	}
}

// forms is s in lower case, and decoded too when it holds escapes.
func forms(s string) []string {
	lower := strings.ToLower(s)
	if decoded, err := url.PathUnescape(s); err == nil && decoded != s {
		return []string{lower, strings.ToLower(decoded)}
	}
	return []string{lower}
}

type Attachment struct {
	ID          string
	Filename    string
	ContentType string
	ContentID   string
	Inline      bool
	Size        int64
}

// NewMessage is a parsed email ready to be stored.
type NewMessage struct {
	// ID is the id to store the message under, made with NewID("msg_")
	// by a caller whose message names its own id; empty, one is made.
	ID           string
	InboxID      string
	ReceivedAt   time.Time
	EnvelopeFrom string
	EnvelopeTo   []string
	From         *Address
	To, Cc       []Address
	ReplyTo      []Address
	Subject      string
	Date         *time.Time
	MessageID    string
	Headers      []Header
	Text, HTML   *string
	Links        []Link
	Attachments  []NewAttachment
	Snippet      string
	Warnings     []string
	Raw          []byte

	// LinksTruncated says the message had more links than Links holds.
	LinksTruncated bool
	Codes          []Code // most likely first
}

type NewAttachment struct {
	Filename    string
	ContentType string
	ContentID   string
	Inline      bool
	Data        []byte
}

// MessageSummary is a message as lists show it.
type MessageSummary struct {
	ID         string
	InboxID    string
	ReceivedAt time.Time
	From       *Address
	// To and Cc are the first ListedAddresses of the addresses the
	// headers named, ToCount and CcCount how many they named.
	To, Cc           []Address
	ToCount, CcCount int
	Subject          string
	Size             int64
	AttachmentCount  int
	Snippet          string
	// EnvelopeFrom is the SMTP MAIL FROM, "" for the null sender; lists
	// show it when the message has no From.
	EnvelopeFrom string
}

type Message struct {
	MessageSummary
	EnvelopeTo []string
	// ReplyTo is the first ListedAddresses of the addresses Reply-To
	// named, ReplyToCount how many it named.
	ReplyTo      []Address
	ReplyToCount int
	Date         *time.Time
	MessageID    string
	Headers      []Header
	Text, HTML   *string
	Links        []Link
	Attachments  []Attachment
	Warnings     []string

	LinksTruncated bool
	Codes          []Code
}

// NewRequest is a captured webhook request ready to be stored.
type NewRequest struct {
	EndpointID  string
	ReceivedAt  time.Time
	Method      string
	Path        string
	Query       string
	ContentType string
	RemoteAddr  string
	Headers     []Header
	Body        []byte
}

type RequestSummary struct {
	ID          string
	EndpointID  string
	Method      string
	Path        string
	Query       string
	ContentType *string
	Size        int64
	ReceivedAt  time.Time
	RemoteAddr  string
	// LastDelivery is the newest delivery of the request; nil when it was
	// never replayed or forwarded.
	LastDelivery *DeliverySummary
}

// DeliverySummary is what a list shows of a delivery: enough to tell
// whether the request reached its target.
type DeliverySummary struct {
	Kind           string
	Status         string
	ResponseStatus *int
	CreatedAt      time.Time
}

type Request struct {
	RequestSummary
	Headers    []Header
	Body       []byte
	Deliveries []Delivery
}

const (
	DeliveryReplay  = "replay"
	DeliveryForward = "forward"

	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

type NewDelivery struct {
	Kind           string
	TargetURL      string
	ResponseStatus *int
	Error          *string
	Duration       time.Duration
}

type Delivery struct {
	ID             string
	Kind           string
	TargetURL      string
	Status         string
	ResponseStatus *int
	Error          *string
	DurationMS     int64
	CreatedAt      time.Time
}

// Usage counts what a project holds against its plan's quotas.
type Usage struct {
	APIKeys   int64
	Inboxes   int64
	Endpoints int64
	Messages  int64
	Requests  int64
}

// Page selects a slice of a collection newest first, by keyset on seq.
type Page struct {
	Limit  int
	Before string
	After  string
}

// Since, when non-zero, keeps captures received strictly after it. Q, when
// not "", is a full-text search (see search.go): words ANDed, "quoted
// phrases", each matched as a substring, ignoring case and accents.
type MessageFilter struct {
	To, From, Subject string
	Since             time.Time
	Q                 string
}

type RequestFilter struct {
	Method     string
	PathPrefix string
	Since      time.Time
	Q          string
}

// List is one page of a collection, newest first. Next is the cursor to pass
// back (as Before when the page was taken without a cursor or with Before, as
// After when taken with After), or "" when nothing further exists.
type List[T any] struct {
	Items []T
	Next  string
}
