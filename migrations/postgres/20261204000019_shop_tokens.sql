-- Each renewable shop's current tokens (docs/design.md, "Token lifetimes"), so one renewal
-- serves the whole fleet. The tokens are sealed (AES-256-GCM under a key derived from the app
-- secret, src/seal.rs): the ledger never holds one in the clear. `generation` moves on with
-- every renewal; a worker renews only after claiming the row (`renewing_until`, a
-- compare-and-set), so two never renew one token. `source_mark` is a keyed fingerprint of
-- the refresh token the operator gave (its environment variable): a new one reseeds the row.

CREATE TABLE shop_tokens (
    platform       TEXT   NOT NULL,
    shop           TEXT   NOT NULL,
    sealed_access  TEXT   NOT NULL,
    sealed_refresh TEXT   NOT NULL,
    source_mark    TEXT   NOT NULL,
    generation     BIGINT NOT NULL,
    expires_at     BIGINT NOT NULL,
    lifetime_ms    BIGINT NOT NULL,
    renewing_until BIGINT,
    last_error     TEXT,
    updated_at     BIGINT NOT NULL,
    PRIMARY KEY (platform, shop)
);
