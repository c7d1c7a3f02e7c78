-- settings_version changes whenever something a listener may hold on to
-- changes: an endpoint's response or target, an inbox's password, a key, a
-- project's plan. A listener caching these compares it (after the cheap
-- PRAGMA data_version says something was committed at all) instead of
-- reading its settings again for every capture. Triggers keep it true for
-- every writer, this process or an admin command. Columns that every
-- capture updates (the counters) are left out on purpose.

CREATE TABLE settings_version (version INTEGER NOT NULL);
INSERT INTO settings_version (version) VALUES (0);

CREATE TRIGGER settings_projects_update AFTER UPDATE OF plan, name ON projects
BEGIN UPDATE settings_version SET version = version + 1; END;
CREATE TRIGGER settings_projects_delete AFTER DELETE ON projects
BEGIN UPDATE settings_version SET version = version + 1; END;

CREATE TRIGGER settings_keys_insert AFTER INSERT ON api_keys
BEGIN UPDATE settings_version SET version = version + 1; END;
CREATE TRIGGER settings_keys_update AFTER UPDATE OF revoked_at, hash, project_id ON api_keys
BEGIN UPDATE settings_version SET version = version + 1; END;
CREATE TRIGGER settings_keys_delete AFTER DELETE ON api_keys
BEGIN UPDATE settings_version SET version = version + 1; END;

CREATE TRIGGER settings_inboxes_insert AFTER INSERT ON inboxes
BEGIN UPDATE settings_version SET version = version + 1; END;
CREATE TRIGGER settings_inboxes_update AFTER UPDATE OF smtp_password, name, project_id ON inboxes
BEGIN UPDATE settings_version SET version = version + 1; END;
CREATE TRIGGER settings_inboxes_delete AFTER DELETE ON inboxes
BEGIN UPDATE settings_version SET version = version + 1; END;

CREATE TRIGGER settings_endpoints_insert AFTER INSERT ON endpoints
BEGIN UPDATE settings_version SET version = version + 1; END;
CREATE TRIGGER settings_endpoints_update AFTER UPDATE OF target_url, response_status, response_headers,
    response_body, response_delay_ms, name, project_id ON endpoints
BEGIN UPDATE settings_version SET version = version + 1; END;
CREATE TRIGGER settings_endpoints_delete AFTER DELETE ON endpoints
BEGIN UPDATE settings_version SET version = version + 1; END;
