package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// InsertMessage stores a message in its inbox and returns its id once the
// transaction holding it has committed.
func (s *Store) InsertMessage(ctx context.Context, m *NewMessage) (string, error) {
	ids, err := s.InsertMessages(ctx, []*NewMessage{m})
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// InsertMessages stores messages in one transaction, all or none, and
// returns their ids in order once it has committed. A request that sends
// several messages at once (a provider API's batch) is answered once, so
// it must never be half stored.
func (s *Store) InsertMessages(ctx context.Context, ms []*NewMessage) ([]string, error) {
	ids := make([]string, len(ms))
	inserts := make([]func(*wtx) error, len(ms))
	for i, m := range ms {
		var err error
		if ids[i], inserts[i], err = messageInsert(m); err != nil {
			return nil, err
		}
	}
	inboxes := make([]string, len(ms))
	for i, m := range ms {
		inboxes[i] = m.InboxID
	}
	err := s.enqueue(ctx, &writeOp{done: make(chan error, 1), capture: EmailCapture, collections: inboxes, ids: ids,
		fn: func(t *wtx) error {
			for _, insert := range inserts {
				if err := insert(t); err != nil {
					return err
				}
			}
			return nil
		}})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// messageInsert prepares what can be prepared outside the write
// transaction (encoding, compressing, tokenizing, on the caller's
// goroutine rather than the writer's) and returns the message's id with
// the statement work to run inside it.
func messageInsert(m *NewMessage) (string, func(*wtx) error, error) {
	id := m.ID
	if id == "" {
		id = NewID("msg_")
	}
	warnings := m.Warnings
	if warnings == nil {
		warnings = []string{}
	}
	warningsJSON, _ := json.Marshal(warnings)

	var fromName, fromAddr any
	if m.From != nil {
		fromName, fromAddr = nullString(m.From.Name), m.From.Address
	}
	searchFrom, searchTo := messageFilterFrom(m.EnvelopeFrom, m.From), messageFilterTo(m.EnvelopeTo, m.To, m.Cc)
	searchSubject := foldText(m.Subject)
	var date any
	if m.Date != nil {
		date = ms(*m.Date)
	}
	attIDs := make([]string, len(m.Attachments))
	attData := make([][]byte, len(m.Attachments))
	for i, a := range m.Attachments {
		attIDs[i] = NewID("att_")
		attData[i] = pack(bytesSection(a.Data))
	}

	rcpts, err := json.Marshal(recipientsOf(m))
	if err != nil {
		return "", nil, err
	}
	stored, err := linksOf(m.Links)
	if err != nil {
		return "", nil, err
	}
	links, err := json.Marshal(stored)
	if err != nil {
		return "", nil, err
	}
	codes, err := codesOf(m.Codes)
	if err != nil {
		return "", nil, err
	}
	attNames := make([]string, len(m.Attachments))
	for i, a := range m.Attachments {
		attNames[i] = a.Filename
	}
	fields := messageSearchFields(m.Subject, m.From, m.To, m.Cc, m.Text, m.HTML, attNames)
	for _, c := range m.Codes {
		fields = append(fields, c.Value)
	}
	tokens := searchTokens(fields)
	content := pack(bytesSection(appendHeaders(nil, m.Headers)), bytesSection(links),
		optionalText(m.Text), optionalText(m.HTML), bytesSection(m.Raw))

	return id, func(t *wtx) error {
		const insert = `INSERT INTO messages (id, inbox_id, received_at, envelope_from, from_name, from_address,
			subject, date, message_id, size, attachment_count, snippet, warnings,
			search_from, search_to, search_subject, recipients, codes, links_truncated, content)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
		args := []any{id, m.InboxID, ms(m.ReceivedAt), m.EnvelopeFrom, fromName, fromAddr,
			m.Subject, date, nullString(m.MessageID), len(m.Raw), len(m.Attachments), m.Snippet, string(warningsJSON),
			searchFrom, searchTo, searchSubject, string(rcpts), string(codes), m.LinksTruncated, content}
		// The index row and the attachments refer to the message by its
		// seq.
		seq, err := t.b.insertSeq(t, insert, args...)
		if err != nil {
			return fmt.Errorf("insert message: %w", err)
		}
		if err := t.indexMessage(seq, tokens); err != nil {
			return fmt.Errorf("index message: %w", err)
		}
		for i, a := range m.Attachments {
			if _, err := t.exec(`INSERT INTO attachments (id, message_seq, position, filename, content_type, content_id, inline, size, data)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				attIDs[i], seq, i, a.Filename, a.ContentType, nullString(a.ContentID), a.Inline, len(a.Data), attData[i]); err != nil {
				return err
			}
		}
		t.wakeAfterCommit(m.InboxID)
		return nil
	}, nil
}

// ListedAddresses is how many of the addresses of a message's To, Cc and
// Reply-To headers it keeps for its lists and its detail: the first 100,
// as many as SMTP takes recipients (SPEC §6). One hostile header naming
// hundreds of thousands would otherwise be read, decoded and sent with
// every list holding the message. The headers keep every address, and so
// do search_to and the search index, computed at insert from all of them;
// search checks a phrase against the headers' addresses when the lists
// were cut (searchedAddresses).
const ListedAddresses = 100

// storedRecipients is the JSON of messages.recipients. To, Cc and ReplyTo
// hold at most ListedAddresses each (a row stored before that bound may
// hold more), the counts how many the header named when it named more. A
// migration that recomputes search_to or the search index from this
// column reads only the kept addresses of such a message: one that needs
// them all must read its headers.
type storedRecipients struct {
	Envelope     []string        `json:"envelope"`
	To           []storedAddress `json:"to"`
	Cc           []storedAddress `json:"cc"`
	ReplyTo      []storedAddress `json:"reply_to"`
	ToCount      int             `json:"to_count,omitempty"`
	CcCount      int             `json:"cc_count,omitempty"`
	ReplyToCount int             `json:"reply_to_count,omitempty"`
}

// listedRecipients reads messages.recipients as lists and details show
// it: the first ListedAddresses of each header's addresses, and how many
// it named, without decoding the rest of a row stored before the bound.
type listedRecipients struct {
	Envelope     []string        `json:"envelope"`
	To           listedAddresses `json:"to"`
	Cc           listedAddresses `json:"cc"`
	ReplyTo      listedAddresses `json:"reply_to"`
	ToCount      int             `json:"to_count"`
	CcCount      int             `json:"cc_count"`
	ReplyToCount int             `json:"reply_to_count"`
}

// listedAddresses is a JSON array of addresses read up to the first
// ListedAddresses; the rest are only counted.
type listedAddresses struct {
	kept  []storedAddress
	total int
}

func (l *listedAddresses) UnmarshalJSON(data []byte) error {
	l.kept, l.total = nil, 0
	dec := json.NewDecoder(bytes.NewReader(data))
	t, err := dec.Token()
	if err != nil || t == nil {
		return err // null: no addresses
	}
	for dec.More() {
		if len(l.kept) == ListedAddresses {
			l.total = len(l.kept) + countArrayObjects(data[dec.InputOffset():])
			return nil
		}
		var a storedAddress
		if err := dec.Decode(&a); err != nil {
			return err
		}
		l.kept = append(l.kept, a)
	}
	l.total = len(l.kept)
	return nil
}

// countArrayObjects counts the objects at the top level of the rest of a
// valid JSON array of objects, byte by byte, decoding none.
func countArrayObjects(rest []byte) int {
	n, depth, inString := 0, 0, false
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth == 0 && c == '{' {
				n++
			}
			depth++
		case c == '}' || c == ']':
			depth--
		}
	}
	return n
}

// listed is how many addresses a header named: the count stored with a
// capped list, else as many as the list held.
func listed(l listedAddresses, count int) ([]Address, int) {
	return addressesOf(l.kept), max(count, l.total)
}

type storedAddress struct {
	Name    string `json:"name"`
	Address string `json:"address"`
}

// storedLink is one element of the JSON of messages.links.
type storedLink struct {
	URL    string  `json:"url"`
	Text   *string `json:"text"`
	Origin string  `json:"origin"`
	Kind   string  `json:"kind"`
}

// storedCode is one element of the JSON of messages.codes.
type storedCode struct {
	Value   string `json:"value"`
	Context string `json:"context"`
}

func recipientsOf(m *NewMessage) storedRecipients {
	conv := func(as []Address) ([]storedAddress, int) {
		count := 0
		if len(as) > ListedAddresses {
			as, count = as[:ListedAddresses], len(as)
		}
		out := make([]storedAddress, len(as))
		for i, a := range as {
			out[i] = storedAddress(a)
		}
		return out, count
	}
	env := m.EnvelopeTo
	if env == nil {
		env = []string{}
	}
	r := storedRecipients{Envelope: env}
	r.To, r.ToCount = conv(m.To)
	r.Cc, r.CcCount = conv(m.Cc)
	r.ReplyTo, r.ReplyToCount = conv(m.ReplyTo)
	return r
}

// linksOf checks each link's kind; a link without one is "other".
func linksOf(ls []Link) ([]storedLink, error) {
	out := make([]storedLink, len(ls))
	for i, l := range ls {
		if l.Kind == "" {
			l.Kind = LinkOther
		} else if err := checkLinkKind(l.Kind); err != nil {
			return nil, err
		}
		out[i] = storedLink(l)
	}
	return out, nil
}

func checkLinkKind(kind string) error {
	if !slices.Contains(LinkKinds, kind) {
		return fmt.Errorf("%w: link kind %q (want one of %s)", ErrInvalid, kind, strings.Join(LinkKinds, ", "))
	}
	return nil
}

func codesOf(cs []Code) ([]byte, error) {
	out := make([]storedCode, len(cs))
	for i, c := range cs {
		if c.Value == "" {
			return nil, fmt.Errorf("%w: code %d has no value", ErrInvalid, i)
		}
		out[i] = storedCode(c)
	}
	return json.Marshal(out)
}

func decodeRecipients(id, data string) (listedRecipients, error) {
	var r listedRecipients
	if err := json.Unmarshal([]byte(data), &r); err != nil {
		return r, fmt.Errorf("message %s recipients: %w", id, err)
	}
	return r, nil
}

func addressesOf(as []storedAddress) []Address {
	out := make([]Address, len(as))
	for i, a := range as {
		out[i] = Address(a)
	}
	return out
}

const messageSummaryCols = `messages.inbox_id, messages.received_at, messages.from_name, messages.from_address,
	messages.subject, messages.size, messages.attachment_count, messages.snippet, messages.recipients,
	messages.envelope_from`

// scanMessageSummary scans messageSummaryCols (after seq and id) and then
// extra; rcpts, when not nil, receives the envelope and the listed
// Reply-To addresses of the message, ReplyToCount how many it named.
func scanMessageSummary(r interface{ Scan(...any) error }, base *row, rcpts *storedRecipients, extra ...any) (MessageSummary, error) {
	var m MessageSummary
	var received int64
	var fromName, fromAddr sql.NullString
	var recipients string
	dest := append([]any{&base.seq, &base.id, &m.InboxID, &received, &fromName, &fromAddr,
		&m.Subject, &m.Size, &m.AttachmentCount, &m.Snippet, &recipients, &m.EnvelopeFrom}, extra...)
	if err := r.Scan(dest...); err != nil {
		return MessageSummary{}, err
	}
	m.ID = base.id
	m.ReceivedAt = fromMS(received)
	if fromAddr.Valid {
		m.From = &Address{Name: fromName.String, Address: fromAddr.String}
	}
	rs, err := decodeRecipients(base.id, recipients)
	if err != nil {
		return MessageSummary{}, err
	}
	m.To, m.ToCount = listed(rs.To, rs.ToCount)
	m.Cc, m.CcCount = listed(rs.Cc, rs.CcCount)
	if rcpts != nil {
		*rcpts = storedRecipients{Envelope: rs.Envelope}
		replyTo, count := listed(rs.ReplyTo, rs.ReplyToCount)
		rcpts.ReplyTo, rcpts.ReplyToCount = make([]storedAddress, len(replyTo)), count
		for i, a := range replyTo {
			rcpts.ReplyTo[i] = storedAddress(a)
		}
	}
	return m, nil
}

// Messages pages through an inbox's messages, newest first, filtered.
func (s *Store) Messages(ctx context.Context, inboxID string, f MessageFilter, p Page) (List[MessageSummary], error) {
	k := keyset{table: "messages", ownerCol: "inbox_id", owner: inboxID, columns: messageSummaryCols}
	// The search columns are folded (filters.go), and so is each filter:
	// substrings, case- and accent-insensitive as q= is.
	if f.To != "" {
		k.where = append(k.where, "instr(messages.search_to, ?) > 0")
		k.whereArgs = append(k.whereArgs, foldText(f.To))
	}
	if f.From != "" {
		k.where = append(k.where, "instr(messages.search_from, ?) > 0")
		k.whereArgs = append(k.whereArgs, foldText(f.From))
	}
	if f.Subject != "" {
		k.where = append(k.where, "instr(messages.search_subject, ?) > 0")
		k.whereArgs = append(k.whereArgs, foldText(f.Subject))
	}
	if !f.Since.IsZero() {
		k.where = append(k.where, "messages.received_at > ?")
		k.whereArgs = append(k.whereArgs, ms(f.Since))
	}
	return searchPage(ctx, s, k, p, f.Q, scanMessageRow, s.searchMessages)
}

func scanMessageRow(r *sql.Rows, base *row) (MessageSummary, error) {
	return scanMessageSummary(r, base, nil)
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

// Message returns one message of the project with everything parsed from
// it, its bodies and links read whole.
func (s *Store) Message(ctx context.Context, projectID, id string) (Message, error) {
	d, err := s.MessageDetail(ctx, projectID, id)
	if err != nil {
		return Message{}, err
	}
	m := d.Message
	if m.Text, err = readString(d.TextPart); err != nil {
		return Message{}, err
	}
	if m.HTML, err = readString(d.HTMLPart); err != nil {
		return Message{}, err
	}
	m.Links = []Link{}
	err = ReadLinks(id, d.LinksPart, func(l Link) error {
		m.Links = append(m.Links, l)
		return nil
	})
	return m, err
}

// readString reads a whole part; nil stays nil.
func readString(p *Part) (*string, error) {
	if p == nil {
		return nil, nil
	}
	b, err := io.ReadAll(p)
	if err != nil {
		return nil, err
	}
	s := string(b)
	return &s, nil
}

// MessageLinks returns the links of a message of the project that f
// selects, and whether the message had more links than it keeps (the
// first 1,000, SPEC §8): a link looked for and not found may be one not
// kept.
func (s *Store) MessageLinks(ctx context.Context, projectID, id string, f LinkFilter) ([]Link, bool, error) {
	if f.Kind != "" {
		if err := checkLinkKind(f.Kind); err != nil {
			return nil, false, err
		}
	}
	var truncated bool
	v, err := s.openMessagePack(ctx, projectID, id, "m.links_truncated", &truncated)
	if err != nil {
		return nil, false, err
	}
	part := v.part(messageLinks)
	if part == nil {
		return nil, false, fmt.Errorf("message %s: no links in its pack", id)
	}
	links := []Link{}
	selects := f.matcher()
	err = ReadLinks(id, part, func(l Link) error {
		if selects(l) {
			links = append(links, l)
		}
		return nil
	})
	return links, truncated, err
}

// MessageRaw returns the message exactly as received.
func (s *Store) MessageRaw(ctx context.Context, projectID, id string) ([]byte, error) {
	p, err := s.RawPart(ctx, projectID, id)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(p)
}

// AttachmentData returns one attachment of a message of the project.
func (s *Store) AttachmentData(ctx context.Context, projectID, messageID, attachmentID string) (Attachment, []byte, error) {
	a, p, err := s.AttachmentPart(ctx, projectID, messageID, attachmentID)
	if err != nil {
		return Attachment{}, nil, err
	}
	data, err := io.ReadAll(p)
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

// appendHeaders appends headers as JSON [[name, [values…]], …], in
// order. Written by hand: it runs for every capture, and encoding/json's
// reflection cost more than the rest of preparing a request. Strings are
// escaped as encoding/json escapes them, invalid UTF-8 included.
func appendHeaders(dst []byte, hs []Header) []byte {
	dst = append(dst, '[')
	for i, h := range hs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		dst = appendJSONString(dst, h.Name)
		dst = append(dst, ",["...)
		for j, v := range h.Values {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, v)
		}
		dst = append(dst, "]]"...)
	}
	return append(dst, ']')
}

// appendJSONString appends s as a JSON string: control characters,
// quotation marks and backslashes escaped, invalid UTF-8 replaced by
// U+FFFD, and U+2028 and U+2029 escaped as encoding/json does.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// decodeHeaders reads what appendHeaders wrote.
func decodeHeaders(b []byte) ([]Header, error) {
	var pairs [][2]any
	if err := json.Unmarshal(b, &pairs); err != nil {
		return nil, err
	}
	return headersFromPairs(pairs), nil
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
