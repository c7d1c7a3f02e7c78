-- The list filters compare folded text (store/filters.go): the message
-- filter columns are folded as search folds words, and a request path's
-- key reads every spelling of its escapes alike. Only rows where the
-- result differs from what older builds wrote are written: messages with
-- a filtered field outside ASCII, requests whose path holds an escape or
-- a byte outside ASCII (the conditions are filters.go's messagesToRefold
-- and requestsToKey). The rest are read, not written.

-- A request's pathKey, for the paths whose key is not the path itself.
CREATE TABLE request_path_keys (
    seq      INTEGER PRIMARY KEY REFERENCES requests(seq) ON DELETE CASCADE,
    path_key TEXT NOT NULL
);

INSERT INTO request_path_keys (seq, path_key)
SELECT seq, k FROM (SELECT seq, path, capture_path_key(path) AS k FROM requests
    WHERE length(path) <> octet_length(path) OR instr(path, '%') > 0)
WHERE k <> path;

UPDATE messages SET
    search_from = f ->> 0,
    search_to = f ->> 1,
    search_subject = f ->> 2
FROM (SELECT seq AS fseq, capture_message_filters(subject, envelope_from, from_name, from_address, recipients) AS f
      FROM messages
      WHERE length(subject) <> octet_length(subject)
         OR length(envelope_from) <> octet_length(envelope_from)
         OR length(coalesce(from_name, '')) <> octet_length(coalesce(from_name, ''))
         OR length(coalesce(from_address, '')) <> octet_length(coalesce(from_address, ''))
         OR length(recipients) <> octet_length(recipients))
WHERE seq = fseq;
