-- Synthetic control-plane catalog: :dbs databases, realistic ratios.
-- users = dbs/2, keys = 1.5 per user, memberships = owner (1 per db) + 0.5 shared per db,
-- support grants = dbs/1000, shards = 1000, moves = dbs/10 finished + 4 unfinished.
\set ON_ERROR_STOP 1
CREATE OR REPLACE FUNCTION b62(n bigint, len int) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT string_agg(substr('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz',
                           ((n / (62::bigint ^ (len - i))::bigint) % 62)::int + 1, 1), '' ORDER BY i)
  FROM generate_series(1::bigint, len) AS i $$;
-- 12 random-looking chars from a counter and a salt
CREATE OR REPLACE FUNCTION rid(g bigint, salt text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT b62(('x' || substr(md5(salt || g), 1, 15))::bit(60)::bigint % (62::bigint ^ 6)::bigint, 6)
      || b62(('x' || substr(md5(g || salt), 1, 15))::bit(60)::bigint % (62::bigint ^ 6)::bigint, 6) $$;

INSERT INTO shards (name, url, postgres, weight)
SELECT 'shard-' || s, 'http://10.1.' || (s / 250) || '.' || (s % 250) || ':7100',
       'postgres://shard:secretpassword@10.1.' || (s / 250) || '.' || (s % 250) || ':5432/cluster', 1
FROM generate_series(1::bigint, 1000) AS s;

INSERT INTO users (id, email, name)
SELECT 'usr_' || rid(g, 'u'), 'user' || g || '@example-company.com', 'User Number ' || g
FROM generate_series(1::bigint, :dbs / 2) AS g;

CREATE TEMP TABLE uid AS SELECT row_number() OVER () AS n, id FROM users;
CREATE INDEX ON uid (n); ANALYZE uid;

INSERT INTO api_keys (id, user_id, name, secret_hash, access, databases)
SELECT 'key_' || rid(g, 'k'), u.id, 'key ' || g,
       '$argon2id$v=19$m=19456,t=2,p=1$' || substr(encode(sha256(('s' || g)::bytea), 'base64'), 1, 22)
         || '$' || substr(encode(sha256(('h' || g)::bytea), 'base64'), 1, 43),
       CASE WHEN g % 5 = 0 THEN 'read_only' ELSE 'read_write' END,
       NULL
FROM generate_series(1::bigint, (:dbs / 2) * 3 / 2) AS g JOIN uid u ON u.n = 1 + (g % (:dbs / 2));

INSERT INTO databases (id, tag, owner_id, shard, state, position, epoch)
SELECT 'db_' || t.tag || substr(rid(g, 'd'), 1, 7), t.tag, u.id, 'shard-' || (1 + g % 1000), 'active', g, 1 + (g % 10 = 0)::int
FROM generate_series(1::bigint, :dbs) AS g
CROSS JOIN LATERAL (SELECT b62((g * 387420489 + 12345) % 916132832, 5) AS tag) t
JOIN uid u ON u.n = 1 + (g % (:dbs / 2));

CREATE TEMP TABLE did AS SELECT position AS n, id FROM databases;
CREATE INDEX ON did (n); ANALYZE did;

INSERT INTO memberships (database_id, user_id, role)
SELECT id, owner_id, 'owner' FROM databases;
INSERT INTO memberships (database_id, user_id, role)
SELECT d.id, u.id, CASE WHEN g % 2 = 0 THEN 'editor' ELSE 'viewer' END
FROM generate_series(1::bigint, :dbs / 2) AS g
JOIN did d ON d.n = 1 + (g * 7) % :dbs
JOIN uid u ON u.n = 1 + (g * 13 + 7) % (:dbs / 2)
ON CONFLICT DO NOTHING;

INSERT INTO support_grants (database_id, user_id)
SELECT d.id, u.id FROM generate_series(1::bigint, :dbs / 1000) AS g
JOIN did d ON d.n = g * 997 % :dbs + 1 JOIN uid u ON u.n = g;

INSERT INTO moves (id, database_id, from_shard, to_shard, state, pause_budget_ms, pause_ms, convergence_ms,
                   new_epoch, fence_lsn, tables_total, tables_copied, lag_bytes, finished_at)
SELECT 'mov_' || rid(g, 'm'), d.id, 'shard-' || (1 + g % 1000), 'shard-' || (1 + (g + 1) % 1000),
       CASE WHEN g <= 4 THEN 'copying' ELSE 'done' END, 400, 60 + g % 200, 100 + g % 500,
       2, '0/1A2B3C4D', 40, 40, 0, CASE WHEN g > 4 THEN now() END
FROM generate_series(1::bigint, :dbs / 10) AS g JOIN did d ON d.n = g * 10;

VACUUM ANALYZE;
