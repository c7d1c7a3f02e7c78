-- Full-text search (store/search.go explains the design).
--
-- messages_search and requests_search hold one row per capture, rowid =
-- the capture's seq: its distinct folded tokens, which Go writes separated
-- by spaces, so the ascii tokenizer only splits on them. Contentless (the
-- text lives in the capture's row already) and without positions
-- (detail=none): a phrase is checked against the row itself.
CREATE VIRTUAL TABLE messages_search USING fts5(tokens, content='', contentless_delete=1, detail=none, tokenize='ascii');
CREATE VIRTUAL TABLE requests_search USING fts5(tokens, content='', contentless_delete=1, detail=none, tokenize='ascii');

-- A capture's tokens are first written here, in the capture's own
-- transaction, and moved into the FTS5 tables above in batches: FTS5
-- writes a segment, and merges, at every transaction, which at one or two
-- captures a commit costs more than the captures themselves.
CREATE TABLE messages_search_staged (
    seq    INTEGER PRIMARY KEY, -- messages.seq
    tokens TEXT NOT NULL
);
CREATE TABLE requests_search_staged (
    seq    INTEGER PRIMARY KEY, -- requests.seq
    tokens TEXT NOT NULL
);

-- The vocabulary: every token of 3 to 32 characters in the FTS5 tables,
-- and the first 32 characters of longer ones, with a trigram index that
-- finds the tokens containing a query word. Terms are added as their rows
-- move into FTS5, in the same transaction.
CREATE TABLE search_terms (
    id   INTEGER PRIMARY KEY,
    term TEXT NOT NULL UNIQUE
);
CREATE VIRTUAL TABLE search_terms_trigram USING fts5(term, content='search_terms', content_rowid='id',
    detail=none, columnsize=0, tokenize='trigram');
CREATE TRIGGER search_terms_insert AFTER INSERT ON search_terms BEGIN
    INSERT INTO search_terms_trigram (rowid, term) VALUES (new.id, new.term);
END;

-- Every way a capture goes (delete, purge, prune, a cascade) takes its
-- index row along. A migration that rebuilds messages or requests must
-- create these triggers again.
CREATE TRIGGER messages_search_delete AFTER DELETE ON messages BEGIN
    DELETE FROM messages_search_staged WHERE seq = old.seq;
    DELETE FROM messages_search WHERE rowid = old.seq;
END;
CREATE TRIGGER requests_search_delete AFTER DELETE ON requests BEGIN
    DELETE FROM requests_search_staged WHERE seq = old.seq;
    DELETE FROM requests_search WHERE rowid = old.seq;
END;

-- Index what is already stored, with the functions store/searchtext.go
-- registers, so old and new captures are indexed alike.
INSERT INTO messages_search (rowid, tokens)
SELECT seq, search_message_tokens(subject, from_name, from_address, recipients, text_body, html_body,
    (SELECT json_group_array(filename ORDER BY position) FROM attachments WHERE message_seq = messages.seq))
FROM messages ORDER BY seq;

INSERT INTO requests_search (rowid, tokens)
SELECT seq, search_request_tokens(path, query, headers, body) FROM requests ORDER BY seq;

CREATE VIRTUAL TABLE temp.messages_search_vocab USING fts5vocab(main, messages_search, row);
CREATE VIRTUAL TABLE temp.requests_search_vocab USING fts5vocab(main, requests_search, row);
INSERT INTO search_terms (term)
SELECT substr(term, 1, 32) FROM temp.messages_search_vocab WHERE length(term) >= 3
UNION
SELECT substr(term, 1, 32) FROM temp.requests_search_vocab WHERE length(term) >= 3;
DROP TABLE temp.messages_search_vocab;
DROP TABLE temp.requests_search_vocab;
