-- Change messages received (docs/design.md, "Continuous sync"): one row per platform message
-- id, written after the change it carries is recorded and before the message is confirmed,
-- so a message delivered again is known and costs no second write.

CREATE TABLE platform_messages (
    platform    TEXT    NOT NULL,
    message_id  BIGINT  NOT NULL,
    topic       TEXT    NOT NULL,
    shop        TEXT    NOT NULL,
    order_id    TEXT,
    born_at     BIGINT  NOT NULL,
    received_at BIGINT  NOT NULL,
    PRIMARY KEY (platform, message_id)
);

CREATE INDEX platform_messages_received ON platform_messages (received_at);
