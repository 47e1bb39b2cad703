-- The match clock works through a `record_matches` webhook's records in
-- keyset batches, a bounded number per pass (issue 27): `match_cursor` is
-- the last record id a finished batch looked at in the current sweep, NULL
-- before the first batch of a sweep. It is written in the batch's own
-- transaction (with the memory and the deliveries of that batch), so a
-- crash redoes at most that batch. A change that clears the match memory
-- clears it too.
ALTER TABLE webhooks ADD COLUMN match_cursor text;
