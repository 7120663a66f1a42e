-- The dead-lettered items of every job (the dashboard's dead-letter count, on every page load)
-- without reading any other item: a partial index holds only them, so the count costs what
-- there is to count, not the size of the table (docs/design.md, "Dashboard access").
CREATE INDEX job_items_dead ON job_items (job_id) WHERE status = 'failed' AND error_class = 'dead';
