-- A router's cold key lookup (catalog/keys.rs get_record_for_share, without FOR SHARE: read-only here);
-- the first statement only picks a key of a random database's owner.
\set g random(1, :dbs)
SELECT k.id AS kid FROM api_keys k WHERE k.user_id = (SELECT owner_id FROM databases WHERE position = :g) LIMIT 1 \gset
SELECT k.id, k.name, k.user_id, k.secret_hash, k.access, k.databases, k.created_at, k.version,
       u.email, u.name AS user_name, u.suspended_at IS NOT NULL AS suspended
FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.id = :kid;
