-- Times are Unix milliseconds (UTC). Every capture table has an INTEGER
-- PRIMARY KEY "seq" so that lists page on (collection, seq) with an index
-- instead of OFFSET.

CREATE TABLE projects (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    plan       TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

CREATE TABLE api_keys (
    id         TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    hash       BLOB NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE INDEX api_keys_project ON api_keys(project_id);

CREATE TABLE inboxes (
    seq           INTEGER PRIMARY KEY,
    id            TEXT NOT NULL UNIQUE,
    project_id    TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    smtp_password TEXT NOT NULL,
    message_count INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL
);
CREATE INDEX inboxes_project_seq ON inboxes(project_id, seq);

CREATE TABLE endpoints (
    seq               INTEGER PRIMARY KEY,
    id                TEXT NOT NULL UNIQUE,
    project_id        TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name              TEXT NOT NULL,
    target_url        TEXT,
    response_status   INTEGER NOT NULL DEFAULT 200,
    response_headers  TEXT NOT NULL DEFAULT '{}',
    response_body     TEXT NOT NULL DEFAULT '',
    response_delay_ms INTEGER NOT NULL DEFAULT 0,
    request_count     INTEGER NOT NULL DEFAULT 0,
    created_at        INTEGER NOT NULL
);
CREATE INDEX endpoints_project_seq ON endpoints(project_id, seq);

CREATE TABLE messages (
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
    headers          TEXT NOT NULL, -- JSON array of [name, [values]] in order
    text_body        TEXT,
    html_body        TEXT,
    warnings         TEXT NOT NULL, -- JSON array of strings
    -- Lower-cased haystacks for the case-insensitive substring filters.
    search_from      TEXT NOT NULL,
    search_to        TEXT NOT NULL,
    search_subject   TEXT NOT NULL,
    raw              BLOB NOT NULL
);
CREATE INDEX messages_inbox_seq ON messages(inbox_id, seq);

CREATE TABLE message_recipients (
    message_seq INTEGER NOT NULL REFERENCES messages(seq) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('envelope', 'to', 'cc', 'reply_to')),
    name        TEXT,
    address     TEXT NOT NULL,
    PRIMARY KEY (message_seq, position)
) WITHOUT ROWID;

CREATE TABLE message_links (
    message_seq INTEGER NOT NULL REFERENCES messages(seq) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    url         TEXT NOT NULL,
    text        TEXT,
    origin      TEXT NOT NULL,
    PRIMARY KEY (message_seq, position)
) WITHOUT ROWID;

CREATE TABLE attachments (
    id           TEXT PRIMARY KEY,
    message_seq  INTEGER NOT NULL REFERENCES messages(seq) ON DELETE CASCADE,
    position     INTEGER NOT NULL,
    filename     TEXT NOT NULL,
    content_type TEXT NOT NULL,
    content_id   TEXT,
    inline       INTEGER NOT NULL,
    size         INTEGER NOT NULL,
    data         BLOB NOT NULL
);
CREATE INDEX attachments_message ON attachments(message_seq, position);

CREATE TABLE requests (
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
    headers      TEXT NOT NULL, -- JSON array of [name, [values]] in order
    body         BLOB NOT NULL
);
CREATE INDEX requests_endpoint_seq ON requests(endpoint_id, seq);

CREATE TABLE deliveries (
    seq             INTEGER PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    request_seq     INTEGER NOT NULL REFERENCES requests(seq) ON DELETE CASCADE,
    kind            TEXT NOT NULL CHECK (kind IN ('replay', 'forward')),
    target_url      TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('delivered', 'failed')),
    response_status INTEGER,
    error           TEXT,
    duration_ms     INTEGER NOT NULL,
    created_at      INTEGER NOT NULL
);
CREATE INDEX deliveries_request ON deliveries(request_seq, seq);
