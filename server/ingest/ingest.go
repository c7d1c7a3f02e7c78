// Package ingest turns a received email into what the store keeps. Every
// way mail arrives (SMTP, the provider email APIs) goes through it, so a
// message reads back the same whichever way it came.
package ingest

import (
	"time"

	"github.com/capturedev/capture/server/mailparse"
	"github.com/capturedev/capture/store"
)

// NewMessage maps a raw message, its envelope and its parsed form to what
// the store keeps.
func NewMessage(inbox, from string, to []string, raw []byte, p *mailparse.Message) *store.NewMessage {
	m := &store.NewMessage{
		InboxID:      inbox,
		ReceivedAt:   time.Now(),
		EnvelopeFrom: from,
		EnvelopeTo:   to,
		To:           addresses(p.To),
		Cc:           addresses(p.Cc),
		ReplyTo:      addresses(p.ReplyTo),
		Subject:      p.Subject,
		Date:         p.Date,
		MessageID:    p.MessageID,
		Text:         p.Text,
		HTML:         p.HTML,
		Snippet:      p.Snippet,
		Warnings:     p.Warnings,
		Raw:          raw,
	}
	if p.From != nil {
		m.From = &store.Address{Name: p.From.Name, Address: p.From.Address}
	}
	if len(p.Headers) > 0 {
		m.Headers = make([]store.Header, len(p.Headers))
		for i, h := range p.Headers {
			m.Headers[i] = store.Header{Name: h.Name, Values: h.Values}
		}
	}
	if len(p.Links) > 0 {
		m.Links = make([]store.Link, len(p.Links))
		for i, l := range p.Links {
			m.Links[i] = store.Link{URL: l.URL, Text: l.Text, Origin: l.Origin, Kind: l.Kind}
		}
	}
	m.LinksTruncated = p.LinksTruncated
	if len(p.Codes) > 0 {
		m.Codes = make([]store.Code, len(p.Codes))
		for i, c := range p.Codes {
			m.Codes[i] = store.Code{Value: c.Value, Context: c.Context}
		}
	}
	if len(p.Attachments) > 0 {
		m.Attachments = make([]store.NewAttachment, len(p.Attachments))
		for i, a := range p.Attachments {
			m.Attachments[i] = store.NewAttachment{Filename: a.Filename, ContentType: a.ContentType,
				ContentID: a.ContentID, Inline: a.Inline, Data: a.Data}
		}
	}
	return m
}

func addresses(as []mailparse.Address) []store.Address {
	if len(as) == 0 {
		return nil
	}
	out := make([]store.Address, len(as))
	for i, a := range as {
		out[i] = store.Address{Name: a.Name, Address: a.Address}
	}
	return out
}
