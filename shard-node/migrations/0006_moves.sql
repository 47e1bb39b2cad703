-- Database moves (ARCHITECTURE.md "Database moves", docs/moves.md).
--
-- `placements` says which databases this shard serves, at which epoch, and
-- whether a move of it is under way. It is the one catalog table a move
-- never replicates: a database's rows arrive on the target long before the
-- target may serve it, and they stay on the source until cleanup after it
-- no longer may. A request is served only when its database has a row
-- here, not `fenced`, at the epoch the router routed by; every transaction
-- that writes a database's rows first takes `FOR KEY SHARE` on its row
-- (`catalog::placements::fence`), so the control plane's fence (`FOR
-- UPDATE`, then `state = 'fenced'`) waits for the writers in flight and
-- turns away the ones after it.
--   owned   serving
--   moving  serving; a move copies it away, so structural changes (tables,
--           fields, views, deleting the database) are refused with 409
--   fenced  cutover: nothing is served (421), nothing written
CREATE TABLE placements (
    database_id text PRIMARY KEY REFERENCES databases (id) ON DELETE CASCADE,
    epoch       bigint NOT NULL,
    state       text NOT NULL CHECK (state IN ('owned', 'moving', 'fenced')),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO placements (database_id, epoch, state) SELECT id, 1, 'owned' FROM databases;

-- Written by the control plane in the fence's transaction on the source:
-- once the target reads the same marker, it has replayed every change
-- committed before the fence (logical replication applies in commit order).
ALTER TABLE databases ADD COLUMN move_marker text;

-- A publication filters the shard-level catalog tables by `database_id`;
-- PostgreSQL requires a row filter's columns to be in the replica identity
-- when UPDATE and DELETE are published, so each table's identity is a
-- unique index that starts with `database_id` (and replaces the plain
-- `database_id` index it makes redundant). The subscriber finds rows by it.
CREATE UNIQUE INDEX tables_identity ON tables (database_id, id);
ALTER TABLE tables REPLICA IDENTITY USING INDEX tables_identity;

CREATE UNIQUE INDEX fields_identity ON fields (database_id, id);
ALTER TABLE fields REPLICA IDENTITY USING INDEX fields_identity;
DROP INDEX fields_database;

CREATE UNIQUE INDEX views_identity ON views (database_id, id);
ALTER TABLE views REPLICA IDENTITY USING INDEX views_identity;
DROP INDEX views_database;

CREATE UNIQUE INDEX webhooks_identity ON webhooks (database_id, id);
ALTER TABLE webhooks REPLICA IDENTITY USING INDEX webhooks_identity;
DROP INDEX webhooks_database;

CREATE UNIQUE INDEX deliveries_identity ON deliveries (database_id, id);
ALTER TABLE deliveries REPLICA IDENTITY USING INDEX deliveries_identity;
DROP INDEX deliveries_database;

CREATE UNIQUE INDEX webhook_matches_identity ON webhook_matches (database_id, webhook_id, record_id);
ALTER TABLE webhook_matches REPLICA IDENTITY USING INDEX webhook_matches_identity;
DROP INDEX webhook_matches_database;

CREATE UNIQUE INDEX attachments_identity ON attachments (database_id, id);
ALTER TABLE attachments REPLICA IDENTITY USING INDEX attachments_identity;
