-- Comments on records and share links of views (issue 17).
--
-- Both are shard-level catalog tables keyed by id and carrying
-- `database_id`, so a database move replicates them with the rest of its
-- catalog rows (control-plane `mover::shard_catalog::CATALOG_TABLES`); as
-- in 0006 each has a replica identity that starts with `database_id`.

-- A comment belongs to one record of one table. No foreign key to the
-- record (records live in the tenant schema): purging a record deletes its
-- comments explicitly, in the purge's transaction (`catalog::comments`).
CREATE TABLE comments (
    id          text PRIMARY KEY,
    database_id text NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    table_id    text NOT NULL REFERENCES tables (id) ON DELETE CASCADE,
    record_id   text NOT NULL,
    -- The user id of the principal that wrote it. The principal carries no
    -- name or e-mail, so none is stored (README "Comments").
    author_id   text NOT NULL,
    body        text NOT NULL,
    edited      boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
-- A record's comments oldest first (the list's keyset order).
CREATE INDEX comments_record_order ON comments (table_id, record_id, created_at, id);
-- The export's order.
CREATE INDEX comments_database_order ON comments (database_id, created_at, id);
CREATE UNIQUE INDEX comments_identity ON comments (database_id, id);
ALTER TABLE comments REPLICA IDENTITY USING INDEX comments_identity;

-- A read-only link to one view. Only the SHA-256 of the token is kept
-- (hex); the token itself is shown once, in the create reply. Revoking
-- deletes the row, so a revoked token matches nothing at once.
CREATE TABLE share_links (
    id          text PRIMARY KEY,
    database_id text NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    table_id    text NOT NULL REFERENCES tables (id) ON DELETE CASCADE,
    view_id     text NOT NULL REFERENCES views (id) ON DELETE CASCADE,
    token_sha256 text NOT NULL UNIQUE,
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX share_links_view_order ON share_links (view_id, created_at, id);
CREATE UNIQUE INDEX share_links_identity ON share_links (database_id, id);
ALTER TABLE share_links REPLICA IDENTITY USING INDEX share_links_identity;
