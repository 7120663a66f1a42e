-- Job control (`syncfleet job pause|resume|cancel`, docs/design.md, "Job control").
--
-- 1. `jobs.control`: NULL (runs), 'paused' (its tasks go back to the queue uncharged until
--    resumed) or 'cancelled' (its pending items ended `cancelled`; nothing more is called).
-- 2. `job_items.status` gains 'cancelled'; the progress view counts it.

ALTER TABLE jobs ADD COLUMN control TEXT CHECK (control IS NULL OR control IN ('paused', 'cancelled'));

ALTER TABLE job_items DROP CONSTRAINT job_items_status_check;
ALTER TABLE job_items ADD CONSTRAINT job_items_status_check
    CHECK (status IN ('pending', 'done', 'stale', 'failed', 'skipped', 'cancelled'));

DROP VIEW job_progress;

CREATE VIEW job_progress AS
SELECT j.id AS job_id,
       j.kind AS kind,
       j.status AS job_status,
       j.control AS control,
       j.total_items AS total,
       COUNT(i.item_key) FILTER (WHERE i.status = 'pending') AS pending,
       COUNT(i.item_key) FILTER (WHERE i.status = 'done') AS done,
       COUNT(i.item_key) FILTER (WHERE i.status = 'stale') AS stale,
       COUNT(i.item_key) FILTER (WHERE i.status = 'failed') AS failed,
       COUNT(i.item_key) FILTER (WHERE i.status = 'skipped') AS skipped,
       COUNT(i.item_key) FILTER (WHERE i.status = 'cancelled') AS cancelled,
       CASE WHEN j.total_items = 0 THEN 100.0
            ELSE ROUND(100.0 * COUNT(i.item_key) FILTER (WHERE i.status <> 'pending') / j.total_items, 2)
       END AS percent
FROM jobs j
LEFT JOIN job_items i ON i.job_id = j.id
GROUP BY j.id;
