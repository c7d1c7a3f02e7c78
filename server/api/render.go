package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/capturedev/capture/store"
)

// The JSON shapes of SPEC §8. Field order follows the spec for readability.

// Time renders as RFC 3339 UTC with milliseconds and Z.
type Time time.Time

const timeLayout = "2006-01-02T15:04:05.000Z"

func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format(timeLayout) + `"`), nil
}

func timePtr(t *time.Time) *Time {
	if t == nil {
		return nil
	}
	v := Time(*t)
	return &v
}

func strOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

type listJSON[T any] struct {
	Items []T     `json:"items"`
	Next  *string `json:"next"`
}

func renderList[S, T any](l store.List[S], f func(S) T) listJSON[T] {
	out := listJSON[T]{Items: make([]T, len(l.Items)), Next: strOrNil(l.Next)}
	for i, item := range l.Items {
		out.Items[i] = f(item)
	}
	return out
}

type addressJSON struct {
	Name    *string `json:"name"`
	Address string  `json:"address"`
}

func renderAddress(a store.Address) addressJSON {
	return addressJSON{Name: strOrNil(a.Name), Address: a.Address}
}

func renderAddresses(as []store.Address) []addressJSON {
	out := make([]addressJSON, len(as))
	for i, a := range as {
		out[i] = renderAddress(a)
	}
	return out
}

type inboxJSON struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	CreatedAt    Time     `json:"created_at"`
	MessageCount int64    `json:"message_count"`
	SMTP         smtpJSON `json:"smtp"`
}

type smtpJSON struct {
	Host     string `json:"host"`
	Username string `json:"username"`
	Ports    struct {
		StartTLS []int `json:"starttls"`
		TLS      []int `json:"tls"`
	} `json:"ports"`
}

func renderInbox(in store.Inbox, cfg Config) inboxJSON {
	out := inboxJSON{ID: in.ID, Name: in.Name, CreatedAt: Time(in.CreatedAt), MessageCount: in.MessageCount}
	out.SMTP.Host = cfg.SMTPHost
	out.SMTP.Username = in.ID
	out.SMTP.Ports.StartTLS = nonNilInts(cfg.StartTLSPorts)
	out.SMTP.Ports.TLS = nonNilInts(cfg.TLSPorts)
	return out
}

func nonNilInts(v []int) []int {
	if v == nil {
		return []int{}
	}
	return v
}

type endpointJSON struct {
	ID           string       `json:"id"`
	Name         string       `json:"name"`
	CaptureURL   string       `json:"capture_url"`
	TargetURL    *string      `json:"target_url"`
	Response     responseJSON `json:"response"`
	RequestCount int64        `json:"request_count"`
	CreatedAt    Time         `json:"created_at"`
}

type responseJSON struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	DelayMS int64             `json:"delay_ms"`
}

// CaptureURL is where senders post to an endpoint.
func CaptureURL(base, endpointID string) string { return base + "/" + endpointID }

// EndpointJSON is an endpoint in the API's shape, for the CLI's --json.
func EndpointJSON(e store.Endpoint, captureBase string) any { return renderEndpoint(e, captureBase) }

// InboxJSON is an inbox in the API's shape, for the CLI's --json.
func InboxJSON(in store.Inbox, cfg Config) any { return renderInbox(in, cfg) }

func renderEndpoint(e store.Endpoint, captureBase string) endpointJSON {
	headers := e.Response.Headers
	if headers == nil {
		headers = map[string]string{}
	}
	return endpointJSON{
		ID: e.ID, Name: e.Name, CaptureURL: CaptureURL(captureBase, e.ID), TargetURL: e.TargetURL,
		Response: responseJSON{Status: e.Response.Status, Headers: headers, Body: e.Response.Body,
			DelayMS: e.Response.Delay.Milliseconds()},
		RequestCount: e.RequestCount, CreatedAt: Time(e.CreatedAt),
	}
}

type messageSummaryJSON struct {
	ID              string        `json:"id"`
	InboxID         string        `json:"inbox_id"`
	ReceivedAt      Time          `json:"received_at"`
	From            *addressJSON  `json:"from"`
	To              []addressJSON `json:"to"`
	Cc              []addressJSON `json:"cc"`
	Subject         string        `json:"subject"`
	Size            int64         `json:"size"`
	AttachmentCount int           `json:"attachment_count"`
	Snippet         string        `json:"snippet"`
}

func renderMessageSummary(m store.MessageSummary) messageSummaryJSON {
	out := messageSummaryJSON{
		ID: m.ID, InboxID: m.InboxID, ReceivedAt: Time(m.ReceivedAt),
		To: renderAddresses(m.To), Cc: renderAddresses(m.Cc),
		Subject: m.Subject, Size: m.Size, AttachmentCount: m.AttachmentCount, Snippet: m.Snippet,
	}
	if m.From != nil {
		a := renderAddress(*m.From)
		out.From = &a
	}
	return out
}

type messageJSON struct {
	messageSummaryJSON
	Envelope struct {
		From string   `json:"from"`
		To   []string `json:"to"`
	} `json:"envelope"`
	ReplyTo     []addressJSON    `json:"reply_to"`
	Date        *Time            `json:"date"`
	MessageID   *string          `json:"message_id"`
	Headers     orderedHeaders   `json:"headers"`
	Body        bodyJSON         `json:"body"`
	Links       []linkJSON       `json:"links"`
	Attachments []attachmentJSON `json:"attachments"`
	Warnings    []string         `json:"warnings"`
}

type bodyJSON struct {
	Text *string `json:"text"`
	HTML *string `json:"html"`
}

type linkJSON struct {
	URL    string  `json:"url"`
	Text   *string `json:"text"`
	Origin string  `json:"origin"`
}

type attachmentJSON struct {
	ID          string  `json:"id"`
	Filename    string  `json:"filename"`
	ContentType string  `json:"content_type"`
	Size        int64   `json:"size"`
	ContentID   *string `json:"content_id"`
	Inline      bool    `json:"inline"`
}

func renderLinks(ls []store.Link) []linkJSON {
	out := make([]linkJSON, len(ls))
	for i, l := range ls {
		out[i] = linkJSON{URL: l.URL, Text: l.Text, Origin: l.Origin}
	}
	return out
}

func renderMessage(m store.Message) messageJSON {
	out := messageJSON{messageSummaryJSON: renderMessageSummary(m.MessageSummary)}
	out.Envelope.From = m.EnvelopeFrom
	out.Envelope.To = m.EnvelopeTo
	if out.Envelope.To == nil {
		out.Envelope.To = []string{}
	}
	out.ReplyTo = renderAddresses(m.ReplyTo)
	out.Date = timePtr(m.Date)
	out.MessageID = strOrNil(m.MessageID)
	out.Headers = orderedHeaders(m.Headers)
	out.Body = bodyJSON{Text: m.Text, HTML: m.HTML}
	out.Links = renderLinks(m.Links)
	out.Attachments = make([]attachmentJSON, len(m.Attachments))
	for i, at := range m.Attachments {
		out.Attachments[i] = attachmentJSON{ID: at.ID, Filename: at.Filename, ContentType: at.ContentType,
			Size: at.Size, ContentID: strOrNil(at.ContentID), Inline: at.Inline}
	}
	out.Warnings = m.Warnings
	if out.Warnings == nil {
		out.Warnings = []string{}
	}
	return out
}

// orderedHeaders renders as a JSON object whose keys keep the order the
// headers arrived in, the values of a repeated name gathered under its first
// appearance.
type orderedHeaders []store.Header

func (hs orderedHeaders) MarshalJSON() ([]byte, error) {
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

type requestSummaryJSON struct {
	ID          string  `json:"id"`
	EndpointID  string  `json:"endpoint_id"`
	Method      string  `json:"method"`
	Path        string  `json:"path"`
	Query       string  `json:"query"`
	ContentType *string `json:"content_type"`
	Size        int64   `json:"size"`
	ReceivedAt  Time    `json:"received_at"`
	RemoteAddr  string  `json:"remote_addr"`
}

func renderRequestSummary(r store.RequestSummary) requestSummaryJSON {
	return requestSummaryJSON{ID: r.ID, EndpointID: r.EndpointID, Method: r.Method, Path: r.Path, Query: r.Query,
		ContentType: r.ContentType, Size: r.Size, ReceivedAt: Time(r.ReceivedAt), RemoteAddr: r.RemoteAddr}
}

type requestJSON struct {
	requestSummaryJSON
	Headers    orderedHeaders `json:"headers"`
	Body       *string        `json:"body"`
	BodyBase64 *string        `json:"body_base64"`
	Deliveries []deliveryJSON `json:"deliveries"`
}

// splitBody puts valid UTF-8 in body and anything else in body_base64.
func splitBody(b []byte) (text, b64 *string) {
	if utf8.Valid(b) {
		s := string(b)
		return &s, nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return nil, &s
}

func renderRequest(r store.Request) requestJSON {
	out := requestJSON{requestSummaryJSON: renderRequestSummary(r.RequestSummary), Headers: orderedHeaders(r.Headers)}
	out.Body, out.BodyBase64 = splitBody(r.Body)
	out.Deliveries = make([]deliveryJSON, len(r.Deliveries))
	for i, d := range r.Deliveries {
		out.Deliveries[i] = renderDelivery(d)
	}
	return out
}

type deliveryJSON struct {
	ID             string  `json:"id"`
	Kind           string  `json:"kind"`
	TargetURL      string  `json:"target_url"`
	Status         string  `json:"status"`
	ResponseStatus *int    `json:"response_status"`
	Error          *string `json:"error"`
	DurationMS     int64   `json:"duration_ms"`
	CreatedAt      Time    `json:"created_at"`
}

func renderDelivery(d store.Delivery) deliveryJSON {
	return deliveryJSON{ID: d.ID, Kind: d.Kind, TargetURL: d.TargetURL, Status: d.Status,
		ResponseStatus: d.ResponseStatus, Error: d.Error, DurationMS: d.DurationMS, CreatedAt: Time(d.CreatedAt)}
}

type quotasJSON struct {
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

type meJSON struct {
	Project struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		CreatedAt Time   `json:"created_at"`
	} `json:"project"`
	Plan struct {
		Name   string     `json:"name"`
		Quotas quotasJSON `json:"quotas"`
	} `json:"plan"`
	Usage struct {
		APIKeys   int64 `json:"api_keys"`
		Inboxes   int64 `json:"inboxes"`
		Endpoints int64 `json:"endpoints"`
		Messages  int64 `json:"messages"`
		Requests  int64 `json:"requests"`
	} `json:"usage"`
	Key struct {
		ID        string `json:"id"`
		CreatedAt Time   `json:"created_at"`
	} `json:"key"`
}

func renderMe(c caller, u store.Usage) meJSON {
	var out meJSON
	out.Project.ID, out.Project.Name, out.Project.CreatedAt = c.project.ID, c.project.Name, Time(c.project.CreatedAt)
	p := c.project.Plan
	out.Plan.Name = p.Name
	out.Plan.Quotas = quotasJSON{
		APIKeys: p.APIKeys, Inboxes: p.Inboxes, Endpoints: p.Endpoints,
		RetentionDays: int64(p.Retention / (24 * time.Hour)), CapturesPerCollection: p.CapturesPerCollection,
		MessageBytes: p.MessageBytes, RequestBodyBytes: p.RequestBodyBytes, ConcurrentWaits: p.ConcurrentWaits,
		RequestsPerSecond: p.RequestsPerSecond, Burst: p.Burst(),
	}
	out.Usage.APIKeys, out.Usage.Inboxes, out.Usage.Endpoints = u.APIKeys, u.Inboxes, u.Endpoints
	out.Usage.Messages, out.Usage.Requests = u.Messages, u.Requests
	out.Key.ID, out.Key.CreatedAt = c.key.ID, Time(c.key.CreatedAt)
	return out
}
