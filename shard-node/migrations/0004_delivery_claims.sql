-- The deliverer's claims go webhook by webhook: the webhooks with
-- unfinished deliveries (a skip scan over this index, one probe per
-- webhook), the earliest due row of each, then each webhook's due rows up
-- to what it may still have in flight. A webhook with a large backlog (a
-- dead receiver at its cap, a paused webhook) costs one probe, never a
-- scan over its rows.
CREATE INDEX deliveries_webhook_due ON deliveries (webhook_id, due_at)
    WHERE finished_at IS NULL;
-- Replaced by the index above: a scan in due order has to step over every
-- due row of the webhooks a claim skips, and the planner, misled by the
-- LIMIT of a per-webhook probe, would walk it instead of the index above.
DROP INDEX deliveries_due;
