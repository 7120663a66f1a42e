-- Which source item was listed to which target shop, as which target item: a listing is made
-- once per target shop (docs/design.md, "Listed once"). A second job finds the item here and
-- skips it; the write's idempotency key is derived from this identity, not from the job.
CREATE TABLE listings (
    source_platform TEXT    NOT NULL,
    source_item     TEXT    NOT NULL,
    target_platform TEXT    NOT NULL,
    target_shop     TEXT    NOT NULL,
    target_item     TEXT    NOT NULL,
    job_id          BIGINT  NOT NULL,
    listed_at       BIGINT  NOT NULL,
    PRIMARY KEY (source_platform, source_item, target_platform, target_shop)
);
