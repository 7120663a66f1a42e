-- A listing's identity is claimed before its write is sent (docs/design.md, "Listed once"):
-- a row `claimed` by a job means a write may be on the wire or its outcome is unknown; the
-- row turns `listed` with the target item once the write's answer is read. The seller's own
-- code the write carried (`outer_id` on TOP, `outerId` on JD) is kept, so a worker that does
-- not know a write's outcome looks the code up on the target before writing again. The
-- holder is the queued task whose run may be writing (NULL: given up, nothing on the wire);
-- `claimed_at` is renewed while it runs.
CREATE TABLE listings_next (
    source_platform TEXT    NOT NULL,
    source_item     TEXT    NOT NULL,
    target_platform TEXT    NOT NULL,
    target_shop     TEXT    NOT NULL,
    state           TEXT    NOT NULL DEFAULT 'listed',
    target_item     TEXT,
    seller_code     TEXT,
    job_id          INTEGER NOT NULL,
    claim_holder    TEXT,
    claimed_at      INTEGER,
    listed_at       INTEGER,
    PRIMARY KEY (source_platform, source_item, target_platform, target_shop)
);
INSERT INTO listings_next (source_platform, source_item, target_platform, target_shop, state,
                           target_item, job_id, listed_at)
    SELECT source_platform, source_item, target_platform, target_shop, 'listed',
           target_item, job_id, listed_at
    FROM listings;
DROP TABLE listings;
ALTER TABLE listings_next RENAME TO listings;
