-- Dead letters and fleet identity.
--
-- 1. `job_items.error_class` gains 'dead': the items of a task that exhausted its attempts
--    (its handler failed or its worker died every time) end `failed` with class 'dead', so
--    the job still finishes and SQL shows why; `syncfleet dead --requeue` puts them back.
--    SQLite cannot alter a CHECK constraint: the table is rebuilt (the view that reads it
--    is dropped first and recreated after).
-- 2. `fleet` holds one row: this ledger's identity. The queue (Redis) records the identity
--    of the ledger it serves, and a worker whose ledger is not that one is refused.

DROP VIEW job_progress;

CREATE TABLE job_items_new (
    job_id        INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    item_key      TEXT    NOT NULL,
    seq           INTEGER NOT NULL,
    status        TEXT    NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'done', 'stale', 'failed', 'skipped')),
    error_class   TEXT    CHECK (error_class IN ('retry', 'slow', 'fatal', 'unknown', 'dead')),
    error_message TEXT,
    result        TEXT,
    attempts      INTEGER NOT NULL DEFAULT 0,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (job_id, item_key)
) WITHOUT ROWID;

INSERT INTO job_items_new (job_id, item_key, seq, status, error_class, error_message, result, attempts, updated_at)
SELECT job_id, item_key, seq, status, error_class, error_message, result, attempts, updated_at FROM job_items;

DROP TABLE job_items;
ALTER TABLE job_items_new RENAME TO job_items;

CREATE INDEX job_items_status ON job_items (job_id, status);
CREATE UNIQUE INDEX job_items_seq ON job_items (job_id, seq);

CREATE VIEW job_progress AS
SELECT j.id AS job_id,
       j.kind AS kind,
       j.status AS job_status,
       j.total_items AS total,
       COALESCE(SUM(i.status = 'pending'), 0) AS pending,
       COALESCE(SUM(i.status = 'done'), 0) AS done,
       COALESCE(SUM(i.status = 'stale'), 0) AS stale,
       COALESCE(SUM(i.status = 'failed'), 0) AS failed,
       COALESCE(SUM(i.status = 'skipped'), 0) AS skipped,
       CASE WHEN j.total_items = 0 THEN 100.0
            ELSE ROUND(100.0 * COALESCE(SUM(i.status <> 'pending'), 0) / j.total_items, 2)
       END AS percent
FROM jobs j
LEFT JOIN job_items i ON i.job_id = j.id
GROUP BY j.id;

CREATE TABLE fleet (
    one        INTEGER PRIMARY KEY CHECK (one = 1),
    id         TEXT    NOT NULL,
    created_at INTEGER NOT NULL
);

INSERT INTO fleet (one, id, created_at)
VALUES (1, lower(hex(randomblob(16))), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
