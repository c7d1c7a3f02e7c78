package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Part is one large value of a capture (a body, the raw message, an
// attachment, the links), left in the database and read in slices: each
// Read that needs more runs one short query for the next slice. A reader
// that writes a large capture to a slow client therefore holds one slice
// of it, and never a read transaction, which would keep the WAL from being
// checkpointed for as long as the client dawdles.
type Part struct {
	// Size is the value's length in bytes.
	Size int64

	ctx   context.Context
	s     *Store
	query string // selects the slice of ?1 bytes from byte ?2 (1-based) of the row keyed ?3
	key   any
	what  string // what the value is, for errors
	off   int64
	chunk int64
	buf   []byte
}

// Slices are at least minSlice and at most maxSlice bytes, and a value
// takes at most about sliceCount queries: each one makes SQLite load the
// whole value, so a slice per query of a few bytes would cost quadratic
// time, and a slice of the whole value would cost its whole size in memory
// for every slow reader.
const (
	minSlice   = 256 << 10
	maxSlice   = 1 << 20
	sliceCount = 16
)

// part reads column of the row of table whose keyColumn is key.
func (s *Store) part(ctx context.Context, table, column, keyColumn string, key any, size int64, what string) *Part {
	chunk := min(max(size/sliceCount, minSlice), maxSlice)
	return &Part{
		Size: size, ctx: ctx, s: s, key: key, what: what, chunk: chunk,
		query: s.b.partQuery(table, column, keyColumn),
	}
}

func (p *Part) Read(b []byte) (int, error) {
	if len(p.buf) == 0 {
		if p.off >= p.Size {
			return 0, io.EOF
		}
		want := min(p.chunk, p.Size-p.off)
		var slice []byte
		err := p.s.queryRow(p.ctx, p.query, want, p.off+1, p.key).Scan(&slice)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && len(slice) == 0) {
			return 0, fmt.Errorf("%w: %s was deleted while it was read", ErrNotFound, p.what)
		}
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", p.what, err)
		}
		p.off += int64(len(slice))
		p.buf = slice
	}
	n := copy(b, p.buf)
	p.buf = p.buf[n:]
	return n, nil
}

// WriteTo copies the value to w one slice at a time, with no buffer of
// its own.
func (p *Part) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if len(p.buf) == 0 {
			if _, err := p.Read(nil); err == io.EOF {
				return total, nil
			} else if err != nil {
				return total, err
			}
		}
		n, err := w.Write(p.buf)
		total += int64(n)
		p.buf = p.buf[n:]
		if err != nil {
			return total, err
		}
	}
}

// Slice returns the next slice of the value, io.EOF after the last.
func (p *Part) Slice() ([]byte, error) {
	if len(p.buf) == 0 {
		if _, err := p.Read(nil); err != nil {
			return nil, err
		}
	}
	b := p.buf
	p.buf = nil
	return b, nil
}

// MessageDetail is a message with its bodies and links left in the
// database as Parts, to be written out slice by slice; Text, HTML and
// Links of its Message are nil.
type MessageDetail struct {
	Message
	// TextPart and HTMLPart are nil when the message has no such body.
	TextPart, HTMLPart *Part
	// LinksPart is the links as stored; read them with ReadLinks.
	LinksPart *Part
}

// MessageDetail returns one message of the project with everything parsed
// from it, its large parts to be read.
func (s *Store) MessageDetail(ctx context.Context, projectID, id string) (MessageDetail, error) {
	var base row
	var envFrom, headers, warnings string
	var date, textSize, htmlSize sql.NullInt64
	var linksSize int64
	var msgID sql.NullString
	var rcpts storedRecipients
	var codes string
	var truncated bool
	summary, err := scanMessageSummary(s.queryRow(ctx, `SELECT messages.seq, messages.id, `+messageSummaryCols+`,
		messages.envelope_from, messages.date, messages.message_id, messages.codes, messages.links_truncated,
		messages.headers, messages.warnings,
		octet_length(messages.text_body), octet_length(messages.html_body), octet_length(messages.links)
		FROM messages JOIN inboxes ON inboxes.id = messages.inbox_id
		WHERE messages.id = ? AND inboxes.project_id = ?`, id, projectID),
		&base, &rcpts, &envFrom, &date, &msgID, &codes, &truncated, &headers, &warnings, &textSize, &htmlSize, &linksSize)
	if errors.Is(err, sql.ErrNoRows) {
		return MessageDetail{}, fmt.Errorf("%w: no message %q", ErrNotFound, id)
	}
	if err != nil {
		return MessageDetail{}, err
	}
	m := Message{MessageSummary: summary}
	m.EnvelopeFrom = envFrom
	m.EnvelopeTo, m.ReplyTo = rcpts.Envelope, addressesOf(rcpts.ReplyTo)
	if m.EnvelopeTo == nil {
		m.EnvelopeTo = []string{}
	}
	if date.Valid {
		t := fromMS(date.Int64)
		m.Date = &t
	}
	m.MessageID = msgID.String
	var pairs [][2]any
	if err := json.Unmarshal([]byte(headers), &pairs); err != nil {
		return MessageDetail{}, fmt.Errorf("message %s headers: %w", id, err)
	}
	m.Headers = headersFromPairs(pairs)
	if err := json.Unmarshal([]byte(warnings), &m.Warnings); err != nil {
		return MessageDetail{}, fmt.Errorf("message %s warnings: %w", id, err)
	}
	m.LinksTruncated = truncated
	var stored []storedCode
	if err := json.Unmarshal([]byte(codes), &stored); err != nil {
		return MessageDetail{}, fmt.Errorf("message %s codes: %w", id, err)
	}
	m.Codes = make([]Code, len(stored))
	for i, c := range stored {
		m.Codes[i] = Code(c)
	}
	if m.Attachments, err = s.attachments(ctx, base.seq); err != nil {
		return MessageDetail{}, err
	}
	d := MessageDetail{Message: m}
	what := "message " + id
	if textSize.Valid {
		d.TextPart = s.part(ctx, "messages", "text_body", "seq", base.seq, textSize.Int64, what)
	}
	if htmlSize.Valid {
		d.HTMLPart = s.part(ctx, "messages", "html_body", "seq", base.seq, htmlSize.Int64, what)
	}
	d.LinksPart = s.part(ctx, "messages", "links", "seq", base.seq, linksSize, what)
	return d, nil
}

// ReadLinks calls fn with each link of a message's stored links (its
// LinksPart, or a reader of it) in order, decoding one at a time.
func ReadLinks(messageID string, links io.Reader, fn func(Link) error) error {
	dec := json.NewDecoder(links)
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("message %s links: %w", messageID, err)
	}
	for dec.More() {
		var l storedLink
		if err := dec.Decode(&l); err != nil {
			return fmt.Errorf("message %s links: %w", messageID, err)
		}
		if err := fn(Link(l)); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) attachments(ctx context.Context, messageSeq int64) ([]Attachment, error) {
	out := []Attachment{}
	rows, err := s.query(ctx, `SELECT id, filename, content_type, content_id, inline, size
		FROM attachments WHERE message_seq = ? ORDER BY position`, messageSeq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var a Attachment
		var cid sql.NullString
		if err := rows.Scan(&a.ID, &a.Filename, &a.ContentType, &cid, &a.Inline, &a.Size); err != nil {
			return nil, err
		}
		a.ContentID = cid.String
		out = append(out, a)
	}
	return out, rows.Err()
}

// RawPart returns the message of the project exactly as received, to be
// read.
func (s *Store) RawPart(ctx context.Context, projectID, id string) (*Part, error) {
	var seq, size int64
	err := s.queryRow(ctx, `SELECT m.seq, octet_length(m.raw) FROM messages m JOIN inboxes i ON i.id = m.inbox_id
		WHERE m.id = ? AND i.project_id = ?`, id, projectID).Scan(&seq, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: no message %q", ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	return s.part(ctx, "messages", "raw", "seq", seq, size, "message "+id), nil
}

// AttachmentPart returns one attachment of a message of the project, its
// bytes to be read.
func (s *Store) AttachmentPart(ctx context.Context, projectID, messageID, attachmentID string) (Attachment, *Part, error) {
	seq, _, err := s.messageSeq(ctx, projectID, messageID)
	if err != nil {
		return Attachment{}, nil, err
	}
	var a Attachment
	var cid sql.NullString
	var size int64
	err = s.queryRow(ctx, `SELECT id, filename, content_type, content_id, inline, size, octet_length(data)
		FROM attachments WHERE id = ? AND message_seq = ?`, attachmentID, seq).
		Scan(&a.ID, &a.Filename, &a.ContentType, &cid, &a.Inline, &a.Size, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return Attachment{}, nil, fmt.Errorf("%w: no attachment %q in message %q", ErrNotFound, attachmentID, messageID)
	}
	if err != nil {
		return Attachment{}, nil, err
	}
	a.ContentID = cid.String
	return a, s.part(ctx, "attachments", "data", "id", a.ID, size, "attachment "+attachmentID), nil
}
