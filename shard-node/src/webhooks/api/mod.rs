//! The webhook routes of part B, one module per verb.
//!
//! Configuration: [`create`], [`list`], [`get`], [`update`], [`delete`],
//! [`secret`]. Deliveries: [`send_test`] (`POST ./test`), [`deliveries`]
//! (the log), [`replay`].

pub mod create;
pub mod delete;
pub mod deliveries;
pub mod get;
pub mod list;
pub mod replay;
pub mod secret;
pub mod send_test;
pub mod update;
