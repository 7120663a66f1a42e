-- The shops the app serves that were added while the fleet runs (`syncfleet shop add`, or a
-- seller's authorisation through OAuth; docs/design.md, "Shops in the ledger"). Their tokens
-- are rows of shop_tokens, sealed under the token key (src/seal.rs); this table holds no
-- secret. A removed shop keeps its row (`removed_at`) so its jobs' history still names it;
-- its tokens are deleted with it.

CREATE TABLE shops (
    platform    TEXT    NOT NULL,
    shop        TEXT    NOT NULL,
    weight      BIGINT NOT NULL,
    seller      TEXT,
    added_at    BIGINT NOT NULL,
    removed_at  BIGINT,
    PRIMARY KEY (platform, shop)
);
