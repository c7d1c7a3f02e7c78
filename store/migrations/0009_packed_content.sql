-- A capture's large values move into one column, content: a pack
-- (store/pack.go), its sections compressed together with zstd in chunks
-- that are read one at a time. A message's sections are its headers, its
-- links, its text and HTML bodies and its raw bytes, so the bodies cost
-- little beside the raw message they were decoded from; a request's are
-- its headers and its body. An attachment's data is packed in place. The
-- functions that pack what is stored already are Go's, registered by the
-- store.
--
-- The tables are rebuilt rather than altered, as in 0004, so that content
-- comes last. (migrate puts back the triggers the rebuilt tables carried.)

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
    content          BLOB NOT NULL  -- pack of headers, links, text, HTML, raw
);

INSERT INTO messages_new (seq, id, inbox_id, received_at, envelope_from, from_name, from_address, subject,
    date, message_id, size, attachment_count, snippet, search_from, search_to, search_subject,
    recipients, codes, links_truncated, warnings, content)
SELECT seq, id, inbox_id, received_at, envelope_from, from_name, from_address, subject,
    date, message_id, size, attachment_count, snippet, search_from, search_to, search_subject,
    recipients, codes, links_truncated, warnings,
    capture_pack_message(headers, links, text_body, html_body, raw)
FROM messages;

DROP TABLE messages;
ALTER TABLE messages_new RENAME TO messages;
CREATE INDEX messages_inbox_seq ON messages(inbox_id, seq);

CREATE TABLE requests_new (
    seq          INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    endpoint_id  TEXT NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
    received_at  INTEGER NOT NULL,
    method       TEXT NOT NULL,
    path         TEXT NOT NULL,
    query        TEXT NOT NULL,
    content_type TEXT,
    size         INTEGER NOT NULL,
    remote_addr  TEXT NOT NULL,
    content      BLOB NOT NULL -- pack of headers, body
);

INSERT INTO requests_new (seq, id, endpoint_id, received_at, method, path, query, content_type, size,
    remote_addr, content)
SELECT seq, id, endpoint_id, received_at, method, path, query, content_type, size,
    remote_addr, capture_pack_request(headers, body)
FROM requests;

DROP TABLE requests;
ALTER TABLE requests_new RENAME TO requests;
CREATE INDEX requests_endpoint_seq ON requests(endpoint_id, seq);

UPDATE attachments SET data = capture_pack(data);
