-- The control plane's placement lookup (control-plane/src/catalog/databases.rs PLACEMENT ... WHERE d.tag = $1)
-- for a random database; the first statement only picks a tag (pgbench -r shows each statement's latency).
\set g random(1, :dbs)
SELECT tag FROM databases WHERE position = :g \gset
SELECT d.id, d.tag, d.epoch, d.state, CASE WHEN d.hold_until > now() THEN d.hold_until END AS hold_until,
       s.name AS shard_name, s.url AS shard_url
FROM databases d JOIN shards s ON s.name = d.shard WHERE d.tag = :tag;
