-- The provider email APIs (SPEC §17) are given an inbox's SMTP password and
-- nothing else, so an inbox must be found by its password. It is found by a
-- SHA-256 of it: an index on the password itself would let the time a
-- lookup takes tell how much of a guess matched, a digest tells nothing.
-- capture_sha256 is registered with the driver by the store.

ALTER TABLE inboxes ADD COLUMN smtp_password_hash BLOB;
UPDATE inboxes SET smtp_password_hash = capture_sha256(smtp_password);
CREATE UNIQUE INDEX inboxes_smtp_password_hash ON inboxes(smtp_password_hash);
