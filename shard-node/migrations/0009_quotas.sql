-- Account quotas (docs/operations.md, "Quotas and usage"). The limits this
-- shard enforces for a database, from its owner's overrides (NULL: the
-- shard's default). The control plane sets them (allocation, `quotas set`);
-- a move copies them with the row.
ALTER TABLE databases
    ADD COLUMN max_tables bigint,
    ADD COLUMN max_fields_per_table bigint,
    ADD COLUMN max_attachment_bytes bigint;

-- Requests served per database in 5-minute buckets (start of the bucket),
-- flushed from memory every few seconds; buckets older than a day are
-- deleted. Read by the control plane's `usage`. Not moved with a database.
CREATE TABLE request_counts (
    database_id text NOT NULL,
    bucket      timestamptz NOT NULL,
    requests    bigint NOT NULL,
    PRIMARY KEY (database_id, bucket)
);
CREATE INDEX request_counts_bucket ON request_counts (bucket);
