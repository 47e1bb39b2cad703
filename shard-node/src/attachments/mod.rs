//! Attachments (part B "Attachments", part A's attachment cells): the
//! registry lives in the shard catalog (`catalog::attachments`), the bytes
//! in the cluster-wide blob store, and every link handed to a client is
//! signed here ([`links`]).

pub mod files;
pub mod ingest;
pub mod limits;
pub mod links;
pub mod sweeper;
pub mod thumbnails;
pub mod upload;
