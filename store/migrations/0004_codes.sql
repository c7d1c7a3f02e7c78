-- Verification codes and link kinds are found at ingest (SPEC §15): a
-- message gains its codes, JSON [{"value", "context"}] most likely first,
-- and whether its links were cut at the first 1,000; each link in the
-- links JSON gains its "kind".
--
-- The table is rebuilt rather than altered, as in 0002, so that the new
-- small columns sit before the large ones: ALTER TABLE ADD COLUMN would
-- put them after the raw message. (migrate puts back any trigger or index
-- a migration before this one hung on the table.)
--
-- Messages stored before this version were never read for codes and
-- kinds: their codes stay empty and their links count as "other".

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
    codes            TEXT NOT NULL DEFAULT '[]', -- JSON array of {"value", "context"}
    links_truncated  INTEGER NOT NULL DEFAULT 0,
    warnings         TEXT NOT NULL, -- JSON array of strings
    links            TEXT NOT NULL, -- JSON array of {"url", "text", "origin", "kind"}
    headers          TEXT NOT NULL, -- JSON array of [name, [values]] in order
    text_body        TEXT,
    html_body        TEXT,
    raw              BLOB NOT NULL
);

INSERT INTO messages_new (seq, id, inbox_id, received_at, envelope_from, from_name, from_address, subject,
    date, message_id, size, attachment_count, snippet, search_from, search_to, search_subject,
    recipients, codes, links_truncated, warnings, links, headers, text_body, html_body, raw)
SELECT seq, id, inbox_id, received_at, envelope_from, from_name, from_address, subject,
    date, message_id, size, attachment_count, snippet, search_from, search_to, search_subject,
    recipients, '[]', 0, warnings,
    json((SELECT json_group_array(json_set(value, '$.kind', 'other') ORDER BY key) FROM json_each(messages.links))),
    headers, text_body, html_body, raw
FROM messages;

DROP TABLE messages;
ALTER TABLE messages_new RENAME TO messages;
CREATE INDEX messages_inbox_seq ON messages(inbox_id, seq);
