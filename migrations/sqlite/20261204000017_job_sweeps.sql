-- What the queue's heal loop last found of each running job (docs/design.md, "Self-healing
-- queue"): how many pending items no live task carried, and when it looked. `status` reads it
-- instead of reading every pending item and every queued task itself, so its cost does not
-- grow with the job.

ALTER TABLE jobs ADD COLUMN uncovered_items INTEGER;
ALTER TABLE jobs ADD COLUMN swept_at INTEGER;
