//! Forwarding to the shard that holds a request's database: `proxy` for a
//! tagged route (`streamed` and `stream_body` for uploads and imports),
//! where a database is (`placement`, a move's `hold`, the `misplaced`
//! retries), the signed principal (`principal_sign`), the shard
//! connections (`client`, `shard_conn`), the buffered-body budget
//! (`body_budget`) and the link-target check (`link_target`).

pub mod body_budget;
pub mod client;
pub mod hold;
pub mod link_target;
pub mod misplaced;
pub mod placement;
pub mod principal_sign;
pub mod proxy;
pub mod shard_conn;
pub mod stream_body;
pub mod streamed;
