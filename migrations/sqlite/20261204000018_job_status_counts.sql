-- Each job's items counted by status, kept by the database as items change (docs/design.md,
-- "The ledger on two backends"): `status` and the dashboard read a job's counts from here,
-- not by counting its items, so their cost does not grow with the job (a 1,000,000-item
-- job's GROUP BY took 270 ms). `create_job` writes the first row (every item pending); the
-- trigger moves one item from its old status to its new one; a job's rows go with the job.
-- The status index gains `updated_at`, so "items finished in the last minute" reads only
-- those items.

CREATE TABLE job_status_counts (
    job_id  INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    status  TEXT    NOT NULL,
    n       INTEGER NOT NULL,
    PRIMARY KEY (job_id, status)
);

INSERT INTO job_status_counts (job_id, status, n)
    SELECT job_id, status, COUNT(*) FROM job_items GROUP BY job_id, status;

CREATE TRIGGER job_items_status_counted AFTER UPDATE OF status ON job_items
WHEN old.status <> new.status
BEGIN
    UPDATE job_status_counts SET n = n - 1 WHERE job_id = old.job_id AND status = old.status;
    INSERT INTO job_status_counts (job_id, status, n) VALUES (new.job_id, new.status, 1)
        ON CONFLICT (job_id, status) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER jobs_counts_removed AFTER DELETE ON jobs
BEGIN
    DELETE FROM job_status_counts WHERE job_id = old.id;
END;

DROP INDEX job_items_status;
CREATE INDEX job_items_status ON job_items (job_id, status, updated_at);
