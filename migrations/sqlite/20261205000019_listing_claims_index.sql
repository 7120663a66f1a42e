-- A task run renews its claims every few seconds and gives up what it still holds when it
-- ends, each by (job, holder) among the `claimed` rows. Without an index each was a walk of
-- every listing the ledger ever recorded, made while holding SQLite's one write lock; the
-- claimed rows are only the writes in flight, so the partial index stays small.
CREATE INDEX listings_claims ON listings (job_id, claim_holder) WHERE state = 'claimed';
