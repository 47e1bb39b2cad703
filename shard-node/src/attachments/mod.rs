//! Attachments (part B "Attachments", part A's attachment cells): the
//! registry lives in the shard catalog (`catalog::attachments`), the bytes
//! in the cluster-wide blob store, and every link handed to a client is
//! signed here ([`links`]).
//!
//! Cells: [`items`] parses what a write says, [`fetch`] fetches its URLs
//! before the write's transaction, [`place`] settles the cells inside it,
//! [`shown`] turns stored ids into the objects replies and payloads carry.

pub mod fetch;
pub mod fetch_charge;
pub mod files;
pub mod ingest;
pub mod items;
pub mod limits;
pub mod links;
pub mod place;
pub mod settings;
pub mod shown;
pub mod sweeper;
pub mod thumbnails;
pub mod upload;
