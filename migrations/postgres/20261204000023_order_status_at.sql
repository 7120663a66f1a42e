-- When the status an order row holds was true (docs/design.md, "Change messages"): the
-- order's own `modified` for a state read from an order list, the message's publication time
-- for a state a change message brought. `modified` stays the platform's own time of the
-- order, so a later order list with the order's real time is never refused because a message
-- was published after it; 0 where no order list or message carrying it has given it yet.
ALTER TABLE orders ADD COLUMN status_at BIGINT NOT NULL DEFAULT 0;
UPDATE orders SET status_at = modified;
