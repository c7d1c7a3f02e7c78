-- A message's recipients and links move into its own row as JSON: every
-- read wants all of them at once, and two child tables cost each ingest
-- two more statements and two more B-tree pages per commit.

ALTER TABLE messages ADD COLUMN recipients TEXT NOT NULL DEFAULT '{}';
ALTER TABLE messages ADD COLUMN links TEXT NOT NULL DEFAULT '[]';

UPDATE messages SET
    recipients = json_object(
        'envelope', json((SELECT json_group_array(address) FROM (
            SELECT address FROM message_recipients
            WHERE message_seq = messages.seq AND kind = 'envelope' ORDER BY position))),
        'to', json((SELECT json_group_array(json_object('name', coalesce(name, ''), 'address', address)) FROM (
            SELECT name, address FROM message_recipients
            WHERE message_seq = messages.seq AND kind = 'to' ORDER BY position))),
        'cc', json((SELECT json_group_array(json_object('name', coalesce(name, ''), 'address', address)) FROM (
            SELECT name, address FROM message_recipients
            WHERE message_seq = messages.seq AND kind = 'cc' ORDER BY position))),
        'reply_to', json((SELECT json_group_array(json_object('name', coalesce(name, ''), 'address', address)) FROM (
            SELECT name, address FROM message_recipients
            WHERE message_seq = messages.seq AND kind = 'reply_to' ORDER BY position)))),
    links = json((SELECT json_group_array(json_object('url', url, 'text', text, 'origin', origin)) FROM (
        SELECT url, text, origin FROM message_links
        WHERE message_seq = messages.seq ORDER BY position)));

DROP TABLE message_recipients;
DROP TABLE message_links;
