-- Database moves (ARCHITECTURE.md "Database moves"): a persisted,
-- resumable state machine per move, driven by the control plane's mover.

-- During a cutover routers hold the database's requests until the
-- placement changes or this instant passes (cleared on flip and on abort).
ALTER TABLE databases ADD COLUMN hold_until timestamptz;

CREATE TABLE moves (
    id              text PRIMARY KEY,
    database_id     text NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    from_shard      text NOT NULL REFERENCES shards (name),
    to_shard        text NOT NULL REFERENCES shards (name),
    state           text NOT NULL CHECK (state IN ('pending', 'copying', 'catching_up',
                                                   'cutover', 'cleanup', 'done', 'aborted')),
    -- Set by `moves abort` (or a failure that cannot be retried); the
    -- mover rolls the move back at its next step and ends it `aborted`.
    abort_requested boolean NOT NULL DEFAULT false,
    -- Why (kept apart from `error`, which a retried step overwrites).
    abort_reason    text,
    pause_budget_ms integer NOT NULL CHECK (pause_budget_ms > 0),
    -- Test hook (CreateMove.step_delay_ms): wait after each state change.
    step_delay_ms   integer NOT NULL DEFAULT 0 CHECK (step_delay_ms >= 0),
    -- Cutover attempts so far (each rolled back when over the budget).
    attempts        integer NOT NULL DEFAULT 0,
    pause_ms        integer,
    convergence_ms  integer,
    -- The epoch the flip gave the database (set with the flip).
    new_epoch       bigint,
    -- The source's WAL position read after the fence (pg_lsn as text).
    fence_lsn       text,
    -- When the flip committed (convergence is measured from it).
    flipped_at      timestamptz,
    error           text,
    -- Progress for `--wait` (see cluster_protocol::control::MoveProgress).
    tables_total    integer NOT NULL DEFAULT 0,
    tables_copied   integer NOT NULL DEFAULT 0,
    lag_bytes       bigint,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    CHECK (from_shard <> to_shard)
);
-- One unfinished move per database.
CREATE UNIQUE INDEX moves_one_per_database ON moves (database_id)
    WHERE state NOT IN ('done', 'aborted');
CREATE INDEX moves_unfinished ON moves (created_at) WHERE state NOT IN ('done', 'aborted');
CREATE INDEX moves_newest ON moves (created_at DESC, id DESC);
-- Deleting a database cascades to its moves: without this index every
-- delete scans the whole table (64 ms at 100,000 moves, 1.35 ms with it;
-- docs/capacity.md).
CREATE INDEX moves_database ON moves (database_id);
