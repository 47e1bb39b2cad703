-- Account quotas (docs/operations.md, "Quotas and usage"): per-account
-- overrides of part C's limits. NULL (or no row): the default.
CREATE TABLE account_quotas (
    user_id             text PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    databases           bigint CHECK (databases > 0),
    requests_per_minute bigint CHECK (requests_per_minute > 0),
    attachment_bytes    bigint CHECK (attachment_bytes > 0),
    tables_per_database bigint CHECK (tables_per_database > 0),
    fields_per_table    bigint CHECK (fields_per_table > 0),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
