//! Table routes: list and create under a database, get/rename/delete by id.
//! Each table is a real PostgreSQL table in its database's tenant schema.

pub mod create;
pub mod delete;
pub mod get;
pub mod list;
pub mod update;
