package api

import (
	"time"

	"github.com/capturedev/capture/server/api/contract"
	"github.com/capturedev/capture/store"
)

// Rendering: store types into the contract's shapes (SPEC §8).

func wireTime(v time.Time) contract.Time { return contract.Time{Time: v} }

func strOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

func renderList[S, T any](l store.List[S], f func(S) T) contract.List[T] {
	out := contract.List[T]{Items: make([]T, len(l.Items)), Next: l.Next}
	for i, item := range l.Items {
		out.Items[i] = f(item)
	}
	return out
}

func renderAddress(a store.Address) contract.Address {
	return contract.Address{Name: strOrNil(a.Name), Address: a.Address}
}

func renderAddresses(as []store.Address) []contract.Address {
	out := make([]contract.Address, len(as))
	for i, a := range as {
		out[i] = renderAddress(a)
	}
	return out
}

// RenderInbox is an inbox in the API's shape, its SMTP settings those of
// cfg.
func RenderInbox(in store.Inbox, cfg Config) contract.Inbox {
	out := contract.Inbox{ID: in.ID, Name: in.Name, CreatedAt: wireTime(in.CreatedAt), MessageCount: in.MessageCount}
	out.SMTP.Host = cfg.SMTPHost
	out.SMTP.Username = in.ID
	out.SMTP.Ports.StartTLS = nonNil(cfg.StartTLSPorts)
	out.SMTP.Ports.TLS = nonNil(cfg.TLSPorts)
	return out
}

// CaptureURL is where senders post to an endpoint.
func CaptureURL(base, endpointID string) string { return base + "/" + endpointID }

// RenderEndpoint is an endpoint in the API's shape, its capture URL under
// captureBase.
func RenderEndpoint(e store.Endpoint, captureBase string) contract.Endpoint {
	headers := e.Response.Headers
	if headers == nil {
		headers = map[string]string{}
	}
	return contract.Endpoint{
		ID: e.ID, Name: e.Name, CaptureURL: CaptureURL(captureBase, e.ID), TargetURL: e.TargetURL,
		Response: contract.Response{Status: e.Response.Status, Headers: headers, Body: e.Response.Body,
			DelayMS: e.Response.Delay.Milliseconds()},
		RequestCount: e.RequestCount, CreatedAt: wireTime(e.CreatedAt),
	}
}

func renderMessageSummary(m store.MessageSummary) contract.MessageSummary {
	out := contract.MessageSummary{
		ID: m.ID, InboxID: m.InboxID, ReceivedAt: wireTime(m.ReceivedAt),
		To: renderAddresses(m.To), ToTruncated: m.ToCount > len(m.To),
		Cc: renderAddresses(m.Cc), CcTruncated: m.CcCount > len(m.Cc),
		Subject: m.Subject, Size: m.Size, AttachmentCount: m.AttachmentCount, Snippet: m.Snippet,
	}
	if m.From != nil {
		a := renderAddress(*m.From)
		out.From = &a
	}
	return out
}

func renderLink(l store.Link) contract.Link {
	kind := l.Kind
	if kind == "" {
		kind = contract.LinkOther
	}
	return contract.Link{URL: l.URL, Text: l.Text, Origin: l.Origin, Kind: kind}
}

func renderLinks(ls []store.Link) []contract.Link {
	out := make([]contract.Link, len(ls))
	for i, l := range ls {
		out[i] = renderLink(l)
	}
	return out
}

func renderHeaders(hs []store.Header) contract.Headers {
	out := make(contract.Headers, len(hs))
	for i, h := range hs {
		out[i] = contract.Header{Name: h.Name, Values: h.Values}
	}
	return out
}

func renderMessage(m store.Message) contract.Message {
	out := contract.Message{MessageSummary: renderMessageSummary(m.MessageSummary)}
	out.Envelope = contract.Envelope{From: m.EnvelopeFrom, To: nonNil(m.EnvelopeTo)}
	out.ReplyTo, out.ReplyToTruncated = renderAddresses(m.ReplyTo), m.ReplyToCount > len(m.ReplyTo)
	out.Date = contract.TimeOf(m.Date)
	out.MessageID = strOrNil(m.MessageID)
	out.Headers = renderHeaders(m.Headers)
	out.Body = contract.Body{Text: m.Text, HTML: m.HTML}
	out.Links = renderLinks(m.Links)
	out.LinksTruncated = m.LinksTruncated
	out.Codes = make([]contract.Code, len(m.Codes))
	for i, c := range m.Codes {
		out.Codes[i] = contract.Code{Value: c.Value, Context: c.Context}
	}
	out.Attachments = make([]contract.Attachment, len(m.Attachments))
	for i, at := range m.Attachments {
		out.Attachments[i] = contract.Attachment{ID: at.ID, Filename: at.Filename, ContentType: at.ContentType,
			Size: at.Size, ContentID: strOrNil(at.ContentID), Inline: at.Inline}
	}
	out.Warnings = nonNil(m.Warnings)
	return out
}

func renderRequestSummary(r store.RequestSummary) contract.RequestSummary {
	out := contract.RequestSummary{ID: r.ID, EndpointID: r.EndpointID, Method: r.Method, Path: r.Path, Query: r.Query,
		ContentType: r.ContentType, Size: r.Size, ReceivedAt: wireTime(r.ReceivedAt), RemoteAddr: r.RemoteAddr}
	if d := r.LastDelivery; d != nil {
		out.LastDelivery = &contract.DeliverySummary{Kind: d.Kind, Status: d.Status, ResponseStatus: d.ResponseStatus,
			CreatedAt: wireTime(d.CreatedAt)}
	}
	return out
}

func renderRequest(r store.Request) contract.Request {
	out := contract.Request{RequestSummary: renderRequestSummary(r.RequestSummary), Headers: renderHeaders(r.Headers)}
	out.Body, out.BodyBase64 = contract.SplitBody(r.Body)
	out.Deliveries = make([]contract.Delivery, len(r.Deliveries))
	for i, d := range r.Deliveries {
		out.Deliveries[i] = renderDelivery(d)
	}
	return out
}

func renderDelivery(d store.Delivery) contract.Delivery {
	return contract.Delivery{ID: d.ID, Kind: d.Kind, TargetURL: d.TargetURL, Status: d.Status,
		ResponseStatus: d.ResponseStatus, Error: d.Error, DurationMS: d.DurationMS, CreatedAt: wireTime(d.CreatedAt)}
}

func renderMe(c caller, u store.Usage) contract.Me {
	var out contract.Me
	out.Project.ID, out.Project.Name, out.Project.CreatedAt = c.project.ID, c.project.Name, wireTime(c.project.CreatedAt)
	p := c.project.Plan
	out.Plan.Name = p.Name
	out.Plan.Quotas = contract.Quotas{
		APIKeys: p.APIKeys, Inboxes: p.Inboxes, Endpoints: p.Endpoints,
		RetentionDays: int64(p.Retention / (24 * time.Hour)), CapturesPerCollection: p.CapturesPerCollection,
		MessageBytes: p.MessageBytes, RequestBodyBytes: p.RequestBodyBytes, ConcurrentWaits: p.ConcurrentWaits,
		RequestsPerSecond: p.RequestsPerSecond, Burst: p.Burst(),
	}
	out.Usage = contract.Usage{APIKeys: u.APIKeys, Inboxes: u.Inboxes, Endpoints: u.Endpoints,
		Messages: u.Messages, Requests: u.Requests}
	out.Key.ID, out.Key.CreatedAt = c.key.ID, wireTime(c.key.CreatedAt)
	return out
}
