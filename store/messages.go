package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// InsertMessage stores a message in its inbox and returns its id once the
// transaction holding it has committed.
func (s *Store) InsertMessage(ctx context.Context, m *NewMessage) (string, error) {
	id := NewID("msg_")
	headers, err := json.Marshal(headerPairs(m.Headers))
	if err != nil {
		return "", err
	}
	warnings := m.Warnings
	if warnings == nil {
		warnings = []string{}
	}
	warningsJSON, _ := json.Marshal(warnings)

	var fromName, fromAddr any
	searchFrom := []string{m.EnvelopeFrom}
	if m.From != nil {
		fromName, fromAddr = nullString(m.From.Name), m.From.Address
		searchFrom = append(searchFrom, m.From.Name, m.From.Address)
	}
	searchTo := append([]string{}, m.EnvelopeTo...)
	for _, a := range m.To {
		searchTo = append(searchTo, a.Address)
	}
	for _, a := range m.Cc {
		searchTo = append(searchTo, a.Address)
	}
	var date any
	if m.Date != nil {
		date = ms(*m.Date)
	}
	attIDs := make([]string, len(m.Attachments))
	for i := range attIDs {
		attIDs[i] = NewID("att_")
	}

	err = s.write(ctx, func(t *wtx) error {
		res, err := t.exec(`INSERT INTO messages (id, inbox_id, received_at, envelope_from, from_name, from_address,
			subject, date, message_id, size, attachment_count, snippet, headers, text_body, html_body, warnings,
			search_from, search_to, search_subject, raw)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id, m.InboxID, ms(m.ReceivedAt), m.EnvelopeFrom, fromName, fromAddr,
			m.Subject, date, nullString(m.MessageID), len(m.Raw), len(m.Attachments), m.Snippet, string(headers),
			nullStringPtr(m.Text), nullStringPtr(m.HTML), string(warningsJSON),
			strings.ToLower(strings.Join(searchFrom, "\n")), strings.ToLower(strings.Join(searchTo, "\n")),
			strings.ToLower(m.Subject), m.Raw)
		if err != nil {
			return fmt.Errorf("insert message: %w", err)
		}
		seq, err := res.LastInsertId()
		if err != nil {
			return err
		}
		// One multi-row statement per child table: each statement
		// execution costs far more than a row, and most messages have only
		// a few recipients and links.
		if err := t.insertRows("message_recipients", "message_seq, position, kind, name, address", recipients(seq, m)); err != nil {
			return err
		}
		links := make([][]any, len(m.Links))
		for i, l := range m.Links {
			links[i] = []any{seq, i, l.URL, nullStringPtr(l.Text), l.Origin}
		}
		if err := t.insertRows("message_links", "message_seq, position, url, text, origin", links); err != nil {
			return err
		}
		for i, a := range m.Attachments {
			if _, err := t.exec(`INSERT INTO attachments (id, message_seq, position, filename, content_type, content_id, inline, size, data)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				attIDs[i], seq, i, a.Filename, a.ContentType, nullString(a.ContentID), a.Inline, len(a.Data), a.Data); err != nil {
				return err
			}
		}
		t.countCapture("inboxes", "message_count", m.InboxID)
		t.wakeAfterCommit(m.InboxID)
		return nil
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// recipients lists the envelope and header addresses as rows of
// message_recipients, positions in order.
func recipients(seq int64, m *NewMessage) [][]any {
	var rows [][]any
	add := func(kind, name, addr string) {
		rows = append(rows, []any{seq, len(rows) + 1, kind, nullString(name), addr})
	}
	for _, a := range m.EnvelopeTo {
		add("envelope", "", a)
	}
	for _, group := range []struct {
		kind  string
		addrs []Address
	}{{"to", m.To}, {"cc", m.Cc}, {"reply_to", m.ReplyTo}} {
		for _, a := range group.addrs {
			add(group.kind, a.Name, a.Address)
		}
	}
	return rows
}

const messageSummaryCols = `messages.inbox_id, messages.received_at, messages.from_name, messages.from_address,
	messages.subject, messages.size, messages.attachment_count, messages.snippet`

func scanMessageSummary(r interface{ Scan(...any) error }, base *row, extra ...any) (MessageSummary, error) {
	var m MessageSummary
	var received int64
	var fromName, fromAddr sql.NullString
	dest := append([]any{&base.seq, &base.id, &m.InboxID, &received, &fromName, &fromAddr,
		&m.Subject, &m.Size, &m.AttachmentCount, &m.Snippet}, extra...)
	if err := r.Scan(dest...); err != nil {
		return MessageSummary{}, err
	}
	m.ID = base.id
	m.ReceivedAt = fromMS(received)
	if fromAddr.Valid {
		m.From = &Address{Name: fromName.String, Address: fromAddr.String}
	}
	m.To, m.Cc = []Address{}, []Address{}
	return m, nil
}

// Messages pages through an inbox's messages, newest first, filtered.
func (s *Store) Messages(ctx context.Context, inboxID string, f MessageFilter, p Page) (List[MessageSummary], error) {
	k := keyset{table: "messages", ownerCol: "inbox_id", owner: inboxID, columns: messageSummaryCols}
	if f.To != "" {
		k.where = append(k.where, "instr(messages.search_to, ?) > 0")
		k.whereArgs = append(k.whereArgs, likeNeedle(f.To))
	}
	if f.From != "" {
		k.where = append(k.where, "instr(messages.search_from, ?) > 0")
		k.whereArgs = append(k.whereArgs, likeNeedle(f.From))
	}
	if f.Subject != "" {
		k.where = append(k.where, "instr(messages.search_subject, ?) > 0")
		k.whereArgs = append(k.whereArgs, likeNeedle(f.Subject))
	}
	if !f.Since.IsZero() {
		k.where = append(k.where, "messages.received_at > ?")
		k.whereArgs = append(k.whereArgs, ms(f.Since))
	}
	seqs := map[string]int64{}
	list, err := page(ctx, s, k, p, func(r *sql.Rows, base *row) (MessageSummary, error) {
		m, err := scanMessageSummary(r, base)
		seqs[m.ID] = base.seq
		return m, err
	})
	if err != nil || len(list.Items) == 0 {
		return list, err
	}
	// One query for every item's To and Cc rather than one per item.
	bySeq := make(map[int64]*MessageSummary, len(list.Items))
	args := make([]any, 0, len(list.Items))
	for i := range list.Items {
		seq := seqs[list.Items[i].ID]
		bySeq[seq] = &list.Items[i]
		args = append(args, seq)
	}
	rows, err := s.query(ctx, `SELECT message_seq, kind, name, address FROM message_recipients
		WHERE message_seq IN (`+placeholders(len(args))+`) AND kind IN ('to', 'cc') ORDER BY message_seq, position`, args...)
	if err != nil {
		return List[MessageSummary]{}, err
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var kind string
		var name sql.NullString
		var a Address
		if err := rows.Scan(&seq, &kind, &name, &a.Address); err != nil {
			return List[MessageSummary]{}, err
		}
		a.Name = name.String
		m := bySeq[seq]
		if kind == "to" {
			m.To = append(m.To, a)
		} else {
			m.Cc = append(m.Cc, a)
		}
	}
	return list, rows.Err()
}

// messageSeq finds a message of the project (any project when projectID
// is "").
func (s *Store) messageSeq(ctx context.Context, projectID, id string) (int64, string, error) {
	var seq int64
	var inboxID string
	err := s.queryRow(ctx, `SELECT m.seq, m.inbox_id FROM messages m JOIN inboxes i ON i.id = m.inbox_id
		WHERE m.id = ? AND (?2 = '' OR i.project_id = ?2)`, id, projectID).Scan(&seq, &inboxID)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", fmt.Errorf("%w: no message %q", ErrNotFound, id)
	}
	return seq, inboxID, err
}

// Message returns one message of the project with everything parsed from it.
func (s *Store) Message(ctx context.Context, projectID, id string) (Message, error) {
	var base row
	var envFrom, headers, warnings string
	var date sql.NullInt64
	var msgID, text, html sql.NullString
	summary, err := scanMessageSummary(s.queryRow(ctx, `SELECT messages.seq, messages.id, `+messageSummaryCols+`,
		messages.envelope_from, messages.date, messages.message_id, messages.headers, messages.text_body,
		messages.html_body, messages.warnings
		FROM messages JOIN inboxes ON inboxes.id = messages.inbox_id
		WHERE messages.id = ? AND inboxes.project_id = ?`, id, projectID),
		&base, &envFrom, &date, &msgID, &headers, &text, &html, &warnings)
	if errors.Is(err, sql.ErrNoRows) {
		return Message{}, fmt.Errorf("%w: no message %q", ErrNotFound, id)
	}
	if err != nil {
		return Message{}, err
	}
	m := Message{MessageSummary: summary}
	m.EnvelopeFrom = envFrom
	m.EnvelopeTo, m.ReplyTo = []string{}, []Address{}
	if date.Valid {
		t := fromMS(date.Int64)
		m.Date = &t
	}
	m.MessageID = msgID.String
	m.Text, m.HTML = strPtr(text), strPtr(html)
	var pairs [][2]any
	if err := json.Unmarshal([]byte(headers), &pairs); err != nil {
		return Message{}, fmt.Errorf("message %s headers: %w", id, err)
	}
	m.Headers = headersFromPairs(pairs)
	if err := json.Unmarshal([]byte(warnings), &m.Warnings); err != nil {
		return Message{}, fmt.Errorf("message %s warnings: %w", id, err)
	}

	rows, err := s.query(ctx, `SELECT kind, name, address FROM message_recipients WHERE message_seq = ? ORDER BY position`, base.seq)
	if err != nil {
		return Message{}, err
	}
	for rows.Next() {
		var kind string
		var name sql.NullString
		var a Address
		if err := rows.Scan(&kind, &name, &a.Address); err != nil {
			rows.Close()
			return Message{}, err
		}
		a.Name = name.String
		switch kind {
		case "envelope":
			m.EnvelopeTo = append(m.EnvelopeTo, a.Address)
		case "to":
			m.To = append(m.To, a)
		case "cc":
			m.Cc = append(m.Cc, a)
		case "reply_to":
			m.ReplyTo = append(m.ReplyTo, a)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Message{}, err
	}
	if m.Links, err = s.links(ctx, base.seq, ""); err != nil {
		return Message{}, err
	}
	m.Attachments = []Attachment{}
	rows, err = s.query(ctx, `SELECT id, filename, content_type, content_id, inline, size
		FROM attachments WHERE message_seq = ? ORDER BY position`, base.seq)
	if err != nil {
		return Message{}, err
	}
	defer rows.Close()
	for rows.Next() {
		var a Attachment
		var cid sql.NullString
		if err := rows.Scan(&a.ID, &a.Filename, &a.ContentType, &cid, &a.Inline, &a.Size); err != nil {
			return Message{}, err
		}
		a.ContentID = cid.String
		m.Attachments = append(m.Attachments, a)
	}
	return m, rows.Err()
}

func (s *Store) links(ctx context.Context, seq int64, match string) ([]Link, error) {
	rows, err := s.query(ctx, `SELECT url, text, origin FROM message_links
		WHERE message_seq = ? AND (?2 = '' OR instr(url, ?2) > 0) ORDER BY position`, seq, match)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	links := []Link{}
	for rows.Next() {
		var l Link
		var text sql.NullString
		if err := rows.Scan(&l.URL, &text, &l.Origin); err != nil {
			return nil, err
		}
		l.Text = strPtr(text)
		links = append(links, l)
	}
	return links, rows.Err()
}

// MessageLinks returns the links of a message of the project whose URL
// contains match (all when match is "").
func (s *Store) MessageLinks(ctx context.Context, projectID, id, match string) ([]Link, error) {
	seq, _, err := s.messageSeq(ctx, projectID, id)
	if err != nil {
		return nil, err
	}
	return s.links(ctx, seq, match)
}

// MessageRaw returns the message exactly as received.
func (s *Store) MessageRaw(ctx context.Context, projectID, id string) ([]byte, error) {
	var raw []byte
	err := s.queryRow(ctx, `SELECT m.raw FROM messages m JOIN inboxes i ON i.id = m.inbox_id
		WHERE m.id = ? AND i.project_id = ?`, id, projectID).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: no message %q", ErrNotFound, id)
	}
	return raw, err
}

// AttachmentData returns one attachment of a message of the project.
func (s *Store) AttachmentData(ctx context.Context, projectID, messageID, attachmentID string) (Attachment, []byte, error) {
	seq, _, err := s.messageSeq(ctx, projectID, messageID)
	if err != nil {
		return Attachment{}, nil, err
	}
	var a Attachment
	var cid sql.NullString
	var data []byte
	err = s.queryRow(ctx, `SELECT id, filename, content_type, content_id, inline, size, data
		FROM attachments WHERE id = ? AND message_seq = ?`, attachmentID, seq).
		Scan(&a.ID, &a.Filename, &a.ContentType, &cid, &a.Inline, &a.Size, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return Attachment{}, nil, fmt.Errorf("%w: no attachment %q in message %q", ErrNotFound, attachmentID, messageID)
	}
	a.ContentID = cid.String
	return a, data, err
}

// DeleteMessage deletes one message of the project.
func (s *Store) DeleteMessage(ctx context.Context, projectID, id string) error {
	return s.deleteCapture(ctx, messagesTable, "message", projectID, id)
}

// PurgeInbox deletes every message of an inbox of the project.
func (s *Store) PurgeInbox(ctx context.Context, projectID, inboxID string) error {
	if _, err := s.Inbox(ctx, projectID, inboxID); err != nil {
		return err
	}
	return s.purge(ctx, messagesTable, inboxID)
}

// headerPairs keeps headers in order as JSON [[name, [values…]], …].
func headerPairs(hs []Header) [][2]any {
	out := make([][2]any, len(hs))
	for i, h := range hs {
		vals := h.Values
		if vals == nil {
			vals = []string{}
		}
		out[i] = [2]any{h.Name, vals}
	}
	return out
}

func headersFromPairs(pairs [][2]any) []Header {
	out := make([]Header, 0, len(pairs))
	for _, p := range pairs {
		name, _ := p[0].(string)
		h := Header{Name: name, Values: []string{}}
		if vals, ok := p[1].([]any); ok {
			for _, v := range vals {
				if s, ok := v.(string); ok {
					h.Values = append(h.Values, s)
				}
			}
		}
		out = append(out, h)
	}
	return out
}
