-- Settings the process that serves records for the administration
-- commands, one JSON value per name (e.g. the addresses serve announces).
CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
