-- Fields as real schema.
--
-- `databases.schema_version` is bumped in the same transaction as every
-- structural change (tables, fields) so each shard node can cache the
-- schema of a database and know when its copy is stale.
ALTER TABLE databases ADD COLUMN schema_version bigint NOT NULL DEFAULT 0;

-- The SQL type of the field's real column (`text`, `numeric`, `date`,
-- `timestamptz`, `boolean`, `text[]`), NULL for fields without a column
-- (link, button, lookup, rollup). Written with the DDL, read by the schema
-- model so nothing has to re-derive it (formula results, include_time).
ALTER TABLE fields ADD COLUMN sql_type text;

-- Webhooks: only what fields need so far (a button's webhook must exist; a
-- deleted field leaves every watch list). The webhooks issue extends it.
CREATE TABLE webhooks (
    id                text PRIMARY KEY,
    database_id       text NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    table_id          text REFERENCES tables (id) ON DELETE CASCADE,
    name              text NOT NULL DEFAULT '',
    url               text NOT NULL DEFAULT '',
    watched_field_ids text[],
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_database ON webhooks (database_id);
