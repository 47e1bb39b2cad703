-- GET /api/databases fan-out: placements of a user's databases by id (PLACEMENT ... WHERE d.id = ANY($1)).
\set g random(1, :dbs)
SELECT owner_id AS uid FROM databases WHERE position = :g \gset
SELECT array_agg(database_id)::text AS ids FROM memberships WHERE user_id = :uid \gset
SELECT d.id, d.tag, d.epoch, d.state, s.name, s.url FROM databases d JOIN shards s ON s.name = d.shard
WHERE d.id = ANY(:ids::text[]) ORDER BY d.position;
