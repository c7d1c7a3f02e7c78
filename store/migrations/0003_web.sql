-- The web interface's sign-in: one password (bcrypt), sessions and one-time
-- sign-in links. Tokens are kept only as SHA-256 hashes, so a copy of the
-- database signs nobody in.

CREATE TABLE web_password (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    hash       TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE web_sessions (
    hash       BLOB PRIMARY KEY,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE web_login_tokens (
    hash       BLOB PRIMARY KEY,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
