-- Shard catalog: databases held here, their tables, fields and views.
-- Tenant data lives in one schema per database (see src/tenant_schema.rs).

CREATE TABLE databases (
    id          text PRIMARY KEY,
    tag         text NOT NULL UNIQUE,
    name        text NOT NULL,
    color       text,
    icon        text,
    timezone    text NOT NULL DEFAULT 'UTC',
    week_start  integer NOT NULL DEFAULT 1,
    weekend     jsonb NOT NULL DEFAULT '[6, 7]'::jsonb,
    archived_at timestamptz,
    position    bigint NOT NULL,
    owner_id    text NOT NULL,
    created_by  text NOT NULL,
    updated_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE tables (
    id               text PRIMARY KEY,
    database_id      text NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    name             text NOT NULL,
    position         bigint NOT NULL,
    display_field_id text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tables_database_order ON tables (database_id, position, created_at);

CREATE TABLE fields (
    id          text PRIMARY KEY,
    table_id    text NOT NULL REFERENCES tables (id) ON DELETE CASCADE,
    database_id text NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    name        text NOT NULL,
    type        text NOT NULL,
    options     jsonb NOT NULL DEFAULT '{}'::jsonb,
    position    bigint NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX fields_table_order ON fields (table_id, position, created_at);
CREATE INDEX fields_database ON fields (database_id);

CREATE TABLE views (
    id          text PRIMARY KEY,
    table_id    text NOT NULL REFERENCES tables (id) ON DELETE CASCADE,
    database_id text NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    name        text NOT NULL,
    config      jsonb NOT NULL DEFAULT '{}'::jsonb,
    position    bigint NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX views_table_order ON views (table_id, position, created_at);
CREATE INDEX views_database ON views (database_id);
