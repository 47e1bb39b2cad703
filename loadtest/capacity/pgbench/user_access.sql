-- A router's user access fetch (catalog/members.rs: memberships and support grants of a user).
\set g random(1, :dbs)
SELECT owner_id AS uid FROM databases WHERE position = :g \gset
SELECT m.database_id, m.role FROM memberships m JOIN databases d ON d.id = m.database_id
WHERE m.user_id = :uid AND d.state = 'active' ORDER BY d.position;
SELECT s.database_id FROM support_grants s JOIN databases d ON d.id = s.database_id
WHERE s.user_id = :uid AND d.state = 'active' ORDER BY d.position;
