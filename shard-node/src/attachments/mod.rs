//! Attachments (part B "Attachments", part A's attachment cells): the
//! registry lives in the shard catalog (`catalog::attachments`), the bytes
//! in the cluster-wide blob store, and every link handed to a client is
//! signed here ([`links`]).

pub mod ingest;
pub mod links;
pub mod limits;
