-- Each job's items counted by status, kept by the database as items change (docs/design.md,
-- "The ledger on two backends"): `status` and the dashboard read a job's counts from here,
-- not by counting its items, so their cost does not grow with the job. `create_job` writes
-- the first row (every item pending); a statement-level trigger moves the items a statement
-- changed from their old status to their new one (one row lock per status, not one per
-- item); a job's rows go with the job. The status index gains `updated_at`, so "items
-- finished in the last minute" reads only those items.

CREATE TABLE job_status_counts (
    job_id  BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    status  TEXT   NOT NULL,
    n       BIGINT NOT NULL,
    PRIMARY KEY (job_id, status)
);

INSERT INTO job_status_counts (job_id, status, n)
    SELECT job_id, status, COUNT(*) FROM job_items GROUP BY job_id, status;

CREATE FUNCTION job_items_count_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_status_counts (job_id, status, n)
        SELECT job_id, status, SUM(d) FROM (
            SELECT o.job_id, o.status, -1 AS d
              FROM changed_old o JOIN changed_new n
                ON n.job_id = o.job_id AND n.item_key = o.item_key
             WHERE o.status <> n.status
            UNION ALL
            SELECT n.job_id, n.status, 1 AS d
              FROM changed_old o JOIN changed_new n
                ON n.job_id = o.job_id AND n.item_key = o.item_key
             WHERE o.status <> n.status
        ) AS moves
        GROUP BY job_id, status
        -- One lock order for every transaction: no two wait on each other's rows.
        ORDER BY job_id, status
    ON CONFLICT (job_id, status) DO UPDATE SET n = job_status_counts.n + excluded.n;
    RETURN NULL;
END $$;

CREATE TRIGGER job_items_status_counted AFTER UPDATE ON job_items
    REFERENCING OLD TABLE AS changed_old NEW TABLE AS changed_new
    FOR EACH STATEMENT EXECUTE FUNCTION job_items_count_status();

DROP INDEX job_items_status;
CREATE INDEX job_items_status ON job_items (job_id, status, updated_at);
