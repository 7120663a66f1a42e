-- Records that could not be read (docs/design.md, "Quarantine"): an order whose amount or
-- time is unreadable, a change message without a readable time. Each is kept here with the
-- reason and its raw text (capped), and the run, batch and watermark move on without it.
CREATE TABLE quarantine (
    source     TEXT    NOT NULL,
    platform   TEXT    NOT NULL,
    record_id  TEXT    NOT NULL,
    shop       TEXT    NOT NULL,
    reason     TEXT    NOT NULL,
    raw        TEXT    NOT NULL,
    first_seen INTEGER NOT NULL,
    last_seen  INTEGER NOT NULL,
    seen       INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (source, platform, record_id)
);

CREATE INDEX quarantine_last_seen ON quarantine (last_seen);
