//! One test binary for the whole end-to-end suite (links once).

mod auth;
mod client_errors;
mod cross_tenant;
mod databases;
mod fields;
mod fixtures;
mod keys;
mod rate_limits;
mod records;
mod records_checkbox;
mod records_links;
mod records_upsert_race;
mod roles;
mod routing;
mod security_injection;
mod security_keys;
mod security_limits;
mod security_lookup_cap;
mod security_privilege;
mod shard_direct;
mod tables;
mod trash;
mod views;
mod webhooks_config;
mod webhooks_deliveries;
