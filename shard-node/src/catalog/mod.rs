//! Plain parameterised SQL over the shard catalog, one file per concern and
//! one small function per query. Functions take any client or transaction,
//! so callers decide the transaction boundaries.

pub mod attachments;
pub mod comments;
pub mod databases;
pub mod deliveries;
pub mod fields;
pub mod match_sweep;
pub mod migrations;
pub mod outbox;
pub mod placements;
pub mod request_counts;
pub mod share_links;
pub mod tables;
pub mod views;
pub mod webhooks;
