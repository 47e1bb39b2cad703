//! Who is calling and what they may do.
//!
//! [`principal`] verifies the router's signed principal (401 otherwise);
//! [`roles`] holds the extractors that carry a permission: a handler taking
//! [`Editor`] can only run for a caller allowed to write in the database.

pub mod principal;
pub mod roles;

pub use principal::Caller;
pub use roles::{
    Access, AnyCaller, Checked, Creator, DeleteDatabase, DeleteTable, Editor, Held, HeldRead,
    HeldWrite, Owner, OwnerAct, Reader, ShareReader,
};
