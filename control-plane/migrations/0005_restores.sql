-- Point-in-time restores of one database (docs/restore.md): a persisted,
-- resumable job per restore, driven by the control plane's restorer. The
-- new database is allocated (state `creating`, invisible to its owner)
-- with the job in one transaction, and becomes active only at the end.
-- No foreign keys: the history outlives both databases, and a failed
-- restore releases its allocation.

CREATE TABLE restores (
    id              text PRIMARY KEY,
    database_id     text NOT NULL,
    new_database_id text NOT NULL UNIQUE,
    -- The shard the original was on when the restore was asked for: its
    -- backups are the ones restored (the new database is placed there too).
    shard           text NOT NULL,
    as_of           timestamptz NOT NULL,
    -- `--into`: the new database's name (NULL: "<name> (restored <as_of>)").
    into_name       text,
    state           text NOT NULL CHECK (state IN ('pending', 'restoring_scratch', 'copying',
                                                   'done', 'failed')),
    -- The scratch instance's DSN once restored (its password, if any, is
    -- the restore command's business; dev and test scratches use trust).
    scratch_dsn     text,
    rows_total      bigint NOT NULL DEFAULT 0,
    rows_copied     bigint NOT NULL DEFAULT 0,
    error           text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz
);
CREATE INDEX restores_unfinished ON restores (created_at) WHERE state NOT IN ('done', 'failed');
CREATE INDEX restores_newest ON restores (created_at DESC, id DESC);
CREATE INDEX restores_database ON restores (database_id);
