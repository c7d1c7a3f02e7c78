package apiclient

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// List is the envelope of every list route. Next is "" where the API says
// null.
type List[T any] struct {
	Items []T    `json:"items"`
	Next  string `json:"next"`
}

// Page selects one page of a list route; the zero value is the newest page
// of the default size.
type Page struct {
	Before, After string
	Limit         int
}

// Me is GET /me: the key's project, its plan and usage.
type Me struct {
	Project struct {
		ID        string    `json:"id"`
		Name      string    `json:"name"`
		CreatedAt time.Time `json:"created_at"`
	} `json:"project"`
	Plan struct {
		Name   string `json:"name"`
		Quotas Quotas `json:"quotas"`
	} `json:"plan"`
	Usage Usage `json:"usage"`
	Key   struct {
		ID        string    `json:"id"`
		CreatedAt time.Time `json:"created_at"`
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

// Inbox is an item of GET /inboxes.
type Inbox struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	CreatedAt    time.Time `json:"created_at"`
	MessageCount int64     `json:"message_count"`
	SMTP         struct {
		Host     string `json:"host"`
		Username string `json:"username"`
		Ports    struct {
			StartTLS []int `json:"starttls"`
			TLS      []int `json:"tls"`
		} `json:"ports"`
	} `json:"smtp"`
}

// Endpoint is an item of GET /endpoints.
type Endpoint struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	CaptureURL   string    `json:"capture_url"`
	TargetURL    *string   `json:"target_url"`
	Response     Response  `json:"response"`
	RequestCount int64     `json:"request_count"`
	CreatedAt    time.Time `json:"created_at"`
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
	if a.Name == nil || *a.Name == "" {
		return a.Address
	}
	return *a.Name + " <" + a.Address + ">"
}

// MessageSummary is an item of GET /inboxes/{id}/messages.
type MessageSummary struct {
	ID              string    `json:"id"`
	InboxID         string    `json:"inbox_id"`
	ReceivedAt      time.Time `json:"received_at"`
	From            *Address  `json:"from"`
	To              []Address `json:"to"`
	Cc              []Address `json:"cc"`
	Subject         string    `json:"subject"`
	Size            int64     `json:"size"`
	AttachmentCount int       `json:"attachment_count"`
	Snippet         string    `json:"snippet"`
}

// Message is GET /messages/{id}.
type Message struct {
	MessageSummary
	Envelope struct {
		From string   `json:"from"`
		To   []string `json:"to"`
	} `json:"envelope"`
	ReplyTo   []Address  `json:"reply_to"`
	Date      *time.Time `json:"date"`
	MessageID *string    `json:"message_id"`
	Headers   Headers    `json:"headers"`
	Body      struct {
		Text *string `json:"text"`
		HTML *string `json:"html"`
	} `json:"body"`
	Links       []Link       `json:"links"`
	Attachments []Attachment `json:"attachments"`
	Warnings    []string     `json:"warnings"`
}

// Link is a URL found in a message.
type Link struct {
	URL    string  `json:"url"`
	Text   *string `json:"text"`
	Origin string  `json:"origin"`
}

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
	ID          string    `json:"id"`
	EndpointID  string    `json:"endpoint_id"`
	Method      string    `json:"method"`
	Path        string    `json:"path"`
	Query       string    `json:"query"`
	ContentType *string   `json:"content_type"`
	Size        int64     `json:"size"`
	ReceivedAt  time.Time `json:"received_at"`
	RemoteAddr  string    `json:"remote_addr"`
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
	ID             string    `json:"id"`
	Kind           string    `json:"kind"`
	TargetURL      string    `json:"target_url"`
	Status         string    `json:"status"`
	ResponseStatus *int      `json:"response_status"`
	Error          *string   `json:"error"`
	DurationMS     int64     `json:"duration_ms"`
	CreatedAt      time.Time `json:"created_at"`
}

// Delivery kinds and statuses.
const (
	KindReplay  = "replay"
	KindForward = "forward"

	StatusDelivered = "delivered"
	StatusFailed    = "failed"
)

// DeliveryReport is what a forwarding client tells the server about one
// local delivery: a response status, or the error that prevented one.
type DeliveryReport struct {
	TargetURL      string  `json:"target_url"`
	ResponseStatus *int    `json:"response_status"`
	Error          *string `json:"error"`
	DurationMS     int64   `json:"duration_ms"`
}

// ReplayEdits change a replayed request; nil fields keep the captured
// value. A header mapped to a nil slice is removed.
type ReplayEdits struct {
	Method     *string             `json:"method,omitempty"`
	Path       *string             `json:"path,omitempty"`
	Query      *string             `json:"query,omitempty"`
	Headers    map[string][]string `json:"headers,omitempty"`
	Body       *string             `json:"body,omitempty"`
	BodyBase64 *string             `json:"body_base64,omitempty"`
}

// Replay is the answer of POST /requests/{id}/replay: the delivery, what
// was sent, and what the target answered (nil when it did not).
type Replay struct {
	Delivery
	Request struct {
		Method  string      `json:"method"`
		URL     string      `json:"url"`
		Headers http.Header `json:"headers"`
	} `json:"request"`
	Response *ReplayResponse `json:"response"`
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

// Headers keep the order in which the API lists them, which is the order a
// person reading a capture expects; a map would shuffle them.
type Headers []Header

// UnmarshalJSON reads {"Name": ["v", ...], ...} keeping the key order.
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

// MarshalJSON writes the object form back, in order.
func (hs Headers) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, h := range hs {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, err := json.Marshal(h.Name)
		if err != nil {
			return nil, err
		}
		values := h.Values
		if values == nil {
			values = []string{}
		}
		v, err := json.Marshal(values)
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
