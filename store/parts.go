package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Part is one large value of a capture (a body, the raw message, an
// attachment, the links): a section of the capture's pack (pack.go), read
// a chunk at a time. A small pack comes whole with the capture's row; a
// large one stays in the database, and each Read that needs more of it
// runs one short query for the next few chunks. A reader that writes a
// large capture to a slow client therefore holds one slice of it, and
// never a read transaction, which would keep the WAL from being
// checkpointed for as long as the client dawdles.
type Part struct {
	// Size is the value's length in bytes.
	Size int64

	v     *packedValue
	start int64 // where the value starts in the unpacked bytes
	off   int64 // how much of the value was handed out
	buf   []byte
	// window holds stored bytes of the pack from byte windowOff: what
	// the last query fetched.
	window    []byte
	windowOff int64
}

// Each query fetches at least minSlice and at most maxSlice stored bytes
// (whole chunks, and at least one), and a value takes at most about
// sliceCount queries: each one makes SQLite load the whole pack, so a
// slice per query of a few bytes would cost quadratic time, and a slice of
// the whole pack would cost its whole size in memory for every slow
// reader.
const (
	minSlice   = 256 << 10
	maxSlice   = 1 << 20
	sliceCount = 16
)

// packedValue is a capture's pack: whole, or in its row to be read in
// slices.
type packedValue struct {
	ctx   context.Context
	s     *Store
	query string // selects ?1 bytes from byte ?2 (1-based) of the pack in the row keyed ?3
	key   any
	what  string // what the capture is, for errors
	h     packHeader
	whole []byte // the pack, when it came whole with the row
	head  []byte // the pack's start, as it came with the row
}

// packWith is how much of a pack a row's query brings along: all of a
// small one, and the header (and first chunks) of a larger one. The rest
// is read in slices, as a reader needs it.
const packWith = 64 << 10

// packColumns selects what packedValue needs of a pack column: its first
// packWith bytes and its length.
func packColumns(column string) string {
	return `substr(` + column + `, 1, ` + strconv.Itoa(packWith) + `), octet_length(` + column + `)`
}

// openPacked reads the header of the pack in column of the row of table
// whose keyColumn is key, given what packColumns selected: head, the
// pack's start, and its length.
func (s *Store) openPacked(ctx context.Context, table, column, keyColumn string, key any, head []byte, size int64, what string) (*packedValue, error) {
	v := &packedValue{ctx: ctx, s: s, key: key, what: what, query: s.b.partQuery(table, column, keyColumn)}
	v.head = head
	if int64(len(head)) == size {
		v.whole = head
	}
	for {
		h, err := parsePackHeader(head)
		if err == nil {
			if h.size() != size {
				return nil, fmt.Errorf("read %s: pack is %d bytes, its header says %d", what, size, h.size())
			}
			v.h = h
			return v, nil
		}
		if !errors.Is(err, errShortPack) || int64(len(head)) >= size {
			return nil, fmt.Errorf("read %s: %w", what, err)
		}
		if head, err = v.fetch(0, min(size, 4*int64(len(head))+1)); err != nil {
			return nil, err
		}
	}
}

// fetch reads n stored bytes of the pack from byte off.
func (v *packedValue) fetch(off, n int64) ([]byte, error) {
	var b []byte
	err := v.s.queryRow(v.ctx, v.query, n, off+1, v.key).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && int64(len(b)) != n) {
		return nil, fmt.Errorf("%w: %s was deleted while it was read", ErrNotFound, v.what)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", v.what, err)
	}
	return b, nil
}

// part is section i of the pack to be read, nil when the section is
// absent.
func (v *packedValue) part(i int) *Part {
	if i >= len(v.h.sections) || v.h.sections[i].absent {
		return nil
	}
	sp := v.h.sections[i]
	return &Part{Size: sp.len, v: v, start: sp.off, window: v.head}
}

// section reads section i whole, nil when it is absent.
func (v *packedValue) section(i int) ([]byte, error) {
	if v.whole != nil {
		u := unpacked{h: v.h, data: v.whole, cached: -1}
		b, _, err := u.section(i, -1)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", v.what, err)
		}
		return b, nil
	}
	p := v.part(i)
	if p == nil {
		return nil, nil
	}
	return io.ReadAll(p)
}

func (p *Part) Read(b []byte) (int, error) {
	if len(p.buf) == 0 {
		if p.off >= p.Size {
			return 0, io.EOF
		}
		if err := p.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(b, p.buf)
	p.buf = p.buf[n:]
	return n, nil
}

// fill decompresses the chunk that holds the next bytes of the value.
func (p *Part) fill() error {
	h := &p.v.h
	at := p.start + p.off
	c := int(at / packChunk)
	stored, err := p.storedChunk(c)
	if err != nil {
		return err
	}
	chunk, err := h.unpackChunk(c, stored, nil)
	if err != nil {
		return fmt.Errorf("read %s: %w", p.v.what, err)
	}
	base := int64(c) * packChunk
	end := min(int64(len(chunk)), p.start+p.Size-base)
	p.buf = chunk[at-base : end]
	p.off += end - (at - base)
	return nil
}

// storedChunk returns the stored bytes of chunk c, fetching them with the
// chunks after it that the value needs, as many as one slice holds.
func (p *Part) storedChunk(c int) ([]byte, error) {
	h := &p.v.h
	sp := h.chunks[c]
	if p.v.whole != nil {
		return p.v.whole[sp.off : sp.off+sp.len], nil
	}
	if sp.off >= p.windowOff && sp.off+sp.len <= p.windowOff+int64(len(p.window)) {
		return p.window[sp.off-p.windowOff : sp.off+sp.len-p.windowOff], nil
	}
	budget := min(max(h.size()/sliceCount, minSlice), maxSlice)
	last := int((p.start + p.Size - 1) / packChunk)
	end := sp.off + sp.len
	for i := c + 1; i <= last && h.chunks[i].off+h.chunks[i].len-sp.off <= budget; i++ {
		end = h.chunks[i].off + h.chunks[i].len
	}
	p.window = nil // let the old window go before fetching the next
	w, err := p.v.fetch(sp.off, end-sp.off)
	if err != nil {
		return nil, err
	}
	p.window, p.windowOff = w, sp.off
	return w[:sp.len], nil
}

// WriteTo copies the value to w one chunk at a time, with no buffer of
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

// The sections of a message's pack.
const (
	messageHeaders = iota // JSON array of [name, [values]] in order
	messageLinks          // JSON array of {"url", "text", "origin", "kind"}
	messageText
	messageHTML
	messageRaw
)

// MessageDetail returns one message of the project with everything parsed
// from it, its large parts to be read.
func (s *Store) MessageDetail(ctx context.Context, projectID, id string) (MessageDetail, error) {
	var base row
	var warnings string
	var date sql.NullInt64
	var msgID sql.NullString
	var rcpts storedRecipients
	var codes string
	var truncated bool
	var head []byte
	var packSize int64
	summary, err := scanMessageSummary(s.queryRow(ctx, `SELECT messages.seq, messages.id, `+messageSummaryCols+`,
		messages.date, messages.message_id, messages.codes, messages.links_truncated,
		messages.warnings, `+packColumns("messages.content")+`
		FROM messages JOIN inboxes ON inboxes.id = messages.inbox_id
		WHERE messages.id = ? AND inboxes.project_id = ?`, id, projectID),
		&base, &rcpts, &date, &msgID, &codes, &truncated, &warnings, &head, &packSize)
	if errors.Is(err, sql.ErrNoRows) {
		return MessageDetail{}, fmt.Errorf("%w: no message %q", ErrNotFound, id)
	}
	if err != nil {
		return MessageDetail{}, err
	}
	what := "message " + id
	v, err := s.openPacked(ctx, "messages", "content", "seq", base.seq, head, packSize, what)
	if err != nil {
		return MessageDetail{}, err
	}
	m := Message{MessageSummary: summary}
	m.EnvelopeTo, m.ReplyTo, m.ReplyToCount = rcpts.Envelope, addressesOf(rcpts.ReplyTo), rcpts.ReplyToCount
	if m.EnvelopeTo == nil {
		m.EnvelopeTo = []string{}
	}
	if date.Valid {
		t := fromMS(date.Int64)
		m.Date = &t
	}
	m.MessageID = msgID.String
	headers, err := v.section(messageHeaders)
	if err != nil {
		return MessageDetail{}, err
	}
	if m.Headers, err = decodeHeaders(headers); err != nil {
		return MessageDetail{}, fmt.Errorf("message %s headers: %w", id, err)
	}
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
	d := MessageDetail{Message: m, TextPart: v.part(messageText), HTMLPart: v.part(messageHTML),
		LinksPart: v.part(messageLinks)}
	if d.LinksPart == nil {
		return MessageDetail{}, fmt.Errorf("message %s: no links in its pack", id)
	}
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

// messagePart opens the pack of a message of the project and returns one
// of its sections (what names it in the error when the pack lacks it), to
// be read.
func (s *Store) messagePart(ctx context.Context, projectID, id string, section int, what string) (*Part, error) {
	v, err := s.openMessagePack(ctx, projectID, id, "")
	if err != nil {
		return nil, err
	}
	p := v.part(section)
	if p == nil {
		return nil, fmt.Errorf("message %s: no %s in its pack", id, what)
	}
	return p, nil
}

// openMessagePack opens the pack of a message of the project, its large
// values to be read section by section. column, when not "", is one more
// of the message's columns, read into dest in the same query.
func (s *Store) openMessagePack(ctx context.Context, projectID, id, column string, dest ...any) (*packedValue, error) {
	var seq, size int64
	var head []byte
	extra := ""
	if column != "" {
		extra = ", " + column
	}
	err := s.queryRow(ctx, `SELECT m.seq, `+packColumns("m.content")+extra+` FROM messages m JOIN inboxes i ON i.id = m.inbox_id
		WHERE m.id = ? AND i.project_id = ?`, id, projectID).Scan(append([]any{&seq, &head, &size}, dest...)...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: no message %q", ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	v, err := s.openPacked(ctx, "messages", "content", "seq", seq, head, size, "message "+id)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// RawPart returns the message of the project exactly as received, to be
// read.
func (s *Store) RawPart(ctx context.Context, projectID, id string) (*Part, error) {
	return s.messagePart(ctx, projectID, id, messageRaw, "raw bytes")
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
	var head []byte
	err = s.queryRow(ctx, `SELECT id, filename, content_type, content_id, inline, size, `+packColumns("data")+`
		FROM attachments WHERE id = ? AND message_seq = ?`, attachmentID, seq).
		Scan(&a.ID, &a.Filename, &a.ContentType, &cid, &a.Inline, &a.Size, &head, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return Attachment{}, nil, fmt.Errorf("%w: no attachment %q in message %q", ErrNotFound, attachmentID, messageID)
	}
	if err != nil {
		return Attachment{}, nil, err
	}
	a.ContentID = cid.String
	what := "attachment " + attachmentID
	v, err := s.openPacked(ctx, "attachments", "data", "id", a.ID, head, size, what)
	if err != nil {
		return Attachment{}, nil, err
	}
	p := v.part(0)
	if p == nil {
		return Attachment{}, nil, fmt.Errorf("%s: no data in its pack", what)
	}
	return a, p, nil
}
