-- Webhooks and events (part B "Webhooks", part C "Events").
--
-- Every row of these tables carries `database_id`, so a database move can
-- replicate exactly one database's rows (publication row filters).
--
-- A change to what decides which writes enqueue deliveries (table,
-- trigger, conditions, watches, payload key, on/off, pause) bumps
-- `databases.schema_version` in the same transaction, so the write path
-- reads the rules from the cached schema model with no query of its own.

ALTER TABLE webhooks
    ADD COLUMN trigger_type text NOT NULL DEFAULT 'record_created'
        CHECK (trigger_type IN ('record_created', 'record_updated',
                                'record_matches', 'record_deleted')),
    ADD COLUMN payload_key text NOT NULL DEFAULT 'name'
        CHECK (payload_key IN ('name', 'id')),
    -- 48 lowercase hex characters; HMAC key as text (ARCHITECTURE.md).
    ADD COLUMN secret text NOT NULL DEFAULT '',
    ADD COLUMN is_active boolean NOT NULL DEFAULT true,
    ADD COLUMN conditions jsonb,
    ADD COLUMN consecutive_failures integer NOT NULL DEFAULT 0,
    -- HTTP status of the last attempt; 0 when it got no response (refused
    -- address, connection failure, timeout); NULL until an attempt.
    ADD COLUMN last_status integer,
    ADD COLUMN last_attempt_at timestamptz,
    ADD COLUMN paused_at timestamptz,
    ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now(),
    -- Whether the match memory holds what matches now. Cleared (with the
    -- memory) by a change of table, trigger or conditions, by switching
    -- off or on and by resume; the next time-driven pass then records what
    -- matches without delivering.
    ADD COLUMN matches_recorded boolean NOT NULL DEFAULT false;

-- The outbox: one row per (event, record, webhook), written in the record
-- write's transaction. `body` is the JSON sent, byte for byte on every
-- attempt (the signature covers it). A row is due while `finished_at` is
-- NULL and `due_at` has passed; the deliverer claims it by moving `due_at`
-- past the attempt's timeout (the lease), so a node that dies mid-attempt
-- leaves it due again when the lease runs out.
CREATE TABLE deliveries (
    id                 text PRIMARY KEY,
    database_id        text NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    webhook_id         text NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event              text NOT NULL,
    record_id          text,
    body               text NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    due_at             timestamptz NOT NULL DEFAULT now(),
    attempts           integer NOT NULL DEFAULT 0,
    -- 'pending' until finished, then 'succeeded' or 'failed' (exhausted).
    state              text NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'succeeded', 'failed')),
    finished_at        timestamptz,
    last_attempt_at    timestamptz,
    last_status        integer,
    last_duration_ms   integer,
    last_response_body text,
    last_error         text,
    -- The delivery this one replays, if any.
    replay_of          text
);
CREATE INDEX deliveries_due ON deliveries (due_at) WHERE finished_at IS NULL;
CREATE INDEX deliveries_webhook_recent ON deliveries (webhook_id, created_at DESC, id DESC);
CREATE INDEX deliveries_database ON deliveries (database_id);

-- `record_matches` memory: the records that matched a webhook's conditions
-- when last evaluated (by a write or by the clock). A record entering the
-- set fires `record.matches`; one leaving it is removed.
CREATE TABLE webhook_matches (
    webhook_id  text NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    record_id   text NOT NULL,
    database_id text NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    PRIMARY KEY (webhook_id, record_id)
);
CREATE INDEX webhook_matches_database ON webhook_matches (database_id);
