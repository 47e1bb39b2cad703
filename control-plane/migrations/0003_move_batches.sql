-- The rebalance (`reb_...`) or drain (`drn_...`) that started a move (NULL for a move
-- started on its own): `moves list --batch` and `moves abort --batch`
-- (or `rebalance --abort`) find every move of one rebalance by it.
ALTER TABLE moves ADD COLUMN batch text;
CREATE INDEX moves_batch ON moves (batch) WHERE batch IS NOT NULL;
