-- A message's recipients and links move into its own row as JSON: every
-- read wants all of them at once, and two child tables cost each ingest
-- two more statements and two more B-tree pages per commit.
--
-- The table is rebuilt rather than altered, to put the large columns last:
-- reading a column stored after a big value means walking that value's
-- overflow pages, so lists and filters must find everything they read
-- before the bodies and the raw message. (migrate runs this with foreign
-- keys off, as SQLite's procedure for changing a table asks, so dropping
-- the old table does not cascade to attachments.)

CREATE TABLE messages_new (
    seq              INTEGER PRIMARY KEY,
    id               TEXT NOT NULL UNIQUE,
    inbox_id         TEXT NOT NULL REFERENCES inboxes(id) ON DELETE CASCADE,
    received_at      INTEGER NOT NULL,
    envelope_from    TEXT NOT NULL,
    from_name        TEXT,
    from_address     TEXT,
    subject          TEXT NOT NULL,
    date             INTEGER,
    message_id       TEXT,
    size             INTEGER NOT NULL,
    attachment_count INTEGER NOT NULL,
    snippet          TEXT NOT NULL,
    -- Lower-cased haystacks for the case-insensitive substring filters.
    search_from      TEXT NOT NULL,
    search_to        TEXT NOT NULL,
    search_subject   TEXT NOT NULL,
    -- JSON {"envelope": [address], "to"|"cc"|"reply_to": [{"name", "address"}]}
    recipients       TEXT NOT NULL,
    warnings         TEXT NOT NULL, -- JSON array of strings
    links            TEXT NOT NULL, -- JSON array of {"url", "text", "origin"}
    headers          TEXT NOT NULL, -- JSON array of [name, [values]] in order
    text_body        TEXT,
    html_body        TEXT,
    raw              BLOB NOT NULL
);

INSERT INTO messages_new (seq, id, inbox_id, received_at, envelope_from, from_name, from_address, subject,
    date, message_id, size, attachment_count, snippet, search_from, search_to, search_subject,
    recipients, warnings, links, headers, text_body, html_body, raw)
SELECT seq, id, inbox_id, received_at, envelope_from, from_name, from_address, subject,
    date, message_id, size, attachment_count, snippet, search_from, search_to, search_subject,
    json_object(
        'envelope', json((SELECT json_group_array(address ORDER BY position) FROM message_recipients
            WHERE message_seq = messages.seq AND kind = 'envelope')),
        'to', json((SELECT json_group_array(json_object('name', coalesce(name, ''), 'address', address) ORDER BY position)
            FROM message_recipients WHERE message_seq = messages.seq AND kind = 'to')),
        'cc', json((SELECT json_group_array(json_object('name', coalesce(name, ''), 'address', address) ORDER BY position)
            FROM message_recipients WHERE message_seq = messages.seq AND kind = 'cc')),
        'reply_to', json((SELECT json_group_array(json_object('name', coalesce(name, ''), 'address', address) ORDER BY position)
            FROM message_recipients WHERE message_seq = messages.seq AND kind = 'reply_to'))),
    warnings,
    json((SELECT json_group_array(json_object('url', url, 'text', text, 'origin', origin) ORDER BY position)
        FROM message_links WHERE message_seq = messages.seq)),
    headers, text_body, html_body, raw
FROM messages;

DROP TABLE message_recipients;
DROP TABLE message_links;
DROP TABLE messages;
ALTER TABLE messages_new RENAME TO messages;
CREATE INDEX messages_inbox_seq ON messages(inbox_id, seq);
