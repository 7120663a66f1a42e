-- A completion hook's claim names its holder (docs/design.md, "Completion hooks"): a worker
-- records what came of a delivery only while the claim is still its own, so a slow worker
-- whose claim lapsed and was taken by another cannot turn `delivered` back into `pending`.
ALTER TABLE hook_deliveries ADD COLUMN claim TEXT;
