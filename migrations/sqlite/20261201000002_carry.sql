-- What an unfinished item already fetched and a later run may use instead of calling again
-- (docs/design.md, "No call thrown away"): the source item of a listing whose write was
-- deferred, the next page of an order slice. JSON; cleared when the item finishes.
ALTER TABLE job_items ADD COLUMN carry TEXT CHECK (carry IS NULL OR json_valid(carry));
