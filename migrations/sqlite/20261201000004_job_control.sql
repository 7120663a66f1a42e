-- Job control (`syncfleet job pause|resume|cancel`, docs/design.md, "Job control").
--
-- 1. `jobs.control`: NULL (runs), 'paused' (its tasks go back to the queue uncharged until
--    resumed) or 'cancelled' (its pending items ended `cancelled`; nothing more is called).
-- 2. `job_items.status` gains 'cancelled'. SQLite cannot alter a CHECK constraint: the table
--    is rebuilt (the view that reads it is dropped first and recreated, with the new count).

ALTER TABLE jobs ADD COLUMN control TEXT CHECK (control IS NULL OR control IN ('paused', 'cancelled'));

DROP VIEW job_progress;

CREATE TABLE job_items_new (
    job_id        INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    item_key      TEXT    NOT NULL,
    seq           INTEGER NOT NULL,
    status        TEXT    NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'done', 'stale', 'failed', 'skipped', 'cancelled')),
    error_class   TEXT    CHECK (error_class IN ('retry', 'slow', 'fatal', 'unknown', 'dead')),
    error_message TEXT,
    result        TEXT,
    attempts      INTEGER NOT NULL DEFAULT 0,
    updated_at    INTEGER NOT NULL,
    carry         TEXT    CHECK (carry IS NULL OR json_valid(carry)),
    PRIMARY KEY (job_id, item_key)
) WITHOUT ROWID;

INSERT INTO job_items_new (job_id, item_key, seq, status, error_class, error_message, result, attempts, updated_at, carry)
SELECT job_id, item_key, seq, status, error_class, error_message, result, attempts, updated_at, carry FROM job_items;

DROP TABLE job_items;
ALTER TABLE job_items_new RENAME TO job_items;

CREATE INDEX job_items_status ON job_items (job_id, status);
CREATE UNIQUE INDEX job_items_seq ON job_items (job_id, seq);

CREATE VIEW job_progress AS
SELECT j.id AS job_id,
       j.kind AS kind,
       j.status AS job_status,
       j.control AS control,
       j.total_items AS total,
       COALESCE(SUM(i.status = 'pending'), 0) AS pending,
       COALESCE(SUM(i.status = 'done'), 0) AS done,
       COALESCE(SUM(i.status = 'stale'), 0) AS stale,
       COALESCE(SUM(i.status = 'failed'), 0) AS failed,
       COALESCE(SUM(i.status = 'skipped'), 0) AS skipped,
       COALESCE(SUM(i.status = 'cancelled'), 0) AS cancelled,
       CASE WHEN j.total_items = 0 THEN 100.0
            ELSE ROUND(100.0 * COALESCE(SUM(i.status <> 'pending'), 0) / j.total_items, 2)
       END AS percent
FROM jobs j
LEFT JOIN job_items i ON i.job_id = j.id
GROUP BY j.id;
