-- SQLite's migration 0010 on PostgreSQL: the table here, the rows' keys
-- and folded filter columns in Go (refoldPostgres in store/filters.go),
-- in the same transaction.
CREATE TABLE request_path_keys (
    seq      bigint PRIMARY KEY REFERENCES requests(seq) ON DELETE CASCADE,
    path_key text NOT NULL
);
