-- Shops paused because the platform refused their session (docs/design.md, "Shops"). A row
-- is a paused shop; `shop resume` (or a worker holding a different session for it) deletes
-- it. `session_mark` is a keyed fingerprint of the refused session, never the session.

CREATE TABLE shop_pauses (
    platform     TEXT   NOT NULL,
    shop         TEXT   NOT NULL,
    reason       TEXT   NOT NULL,
    session_mark TEXT   NOT NULL,
    paused_at    BIGINT NOT NULL,
    PRIMARY KEY (platform, shop)
);
