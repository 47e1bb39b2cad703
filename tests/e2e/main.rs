//! One test binary for the whole end-to-end suite (links once).

// Test code: an unwrap that fails is a failed test with its location.
#![allow(clippy::unwrap_used)]

mod accounts;
mod attachments_cells;
mod attachments_limits;
mod attachments_upload;
mod auth;
mod cli_operator;
mod client_errors;
mod cross_tenant;
mod databases;
mod export;
mod export_headers;
mod fields;
mod fixtures;
mod import;
mod import_memory;
mod import_run;
mod keys;
mod members;
mod moves_abort;
mod moves_basic;
mod moves_keep;
mod moves_load;
mod moves_roundtrip;
mod quotas;
mod rate_limits;
mod records;
mod records_checkbox;
mod records_links;
mod records_statistics;
mod records_upsert_race;
mod restores;
mod roles;
mod routing;
mod security_injection;
mod security_keys;
mod security_limits;
mod security_lookup_cap;
mod security_privilege;
mod security_tokens;
mod shard_direct;
mod social;
mod streamed_bodies;
mod tables;
mod trash;
mod views;
mod webhooks_config;
mod webhooks_deliveries;
mod webhooks_events;
