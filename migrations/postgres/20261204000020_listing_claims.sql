-- A listing's identity is claimed before its write is sent (docs/design.md, "Listed once"):
-- a row `claimed` by a job means a write may be on the wire or its outcome is unknown; the
-- row turns `listed` with the target item once the write's answer is read. The seller's own
-- code the write carried (`outer_id` on TOP, `outerId` on JD) is kept, so a worker that does
-- not know a write's outcome looks the code up on the target before writing again. The
-- holder is the queued task whose run may be writing (NULL: given up, nothing on the wire);
-- `claimed_at` is renewed while it runs.
ALTER TABLE listings ADD COLUMN state TEXT NOT NULL DEFAULT 'listed';
ALTER TABLE listings ALTER COLUMN target_item DROP NOT NULL;
ALTER TABLE listings ALTER COLUMN listed_at DROP NOT NULL;
ALTER TABLE listings ADD COLUMN seller_code TEXT;
ALTER TABLE listings ADD COLUMN claim_holder TEXT;
ALTER TABLE listings ADD COLUMN claimed_at BIGINT;
