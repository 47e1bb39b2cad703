//! The node's database access: the pool and its sessions ([`Db`]), the
//! names every operation is timed by ([`DbOp`]), and the transaction
//! runners ([`Db::in_transaction`] and its kin, [`transaction_on`] for a
//! session the caller holds).

mod op;
mod pool;
mod touched;
mod transaction;

pub use op::DbOp;
pub use pool::{Db, DELIVERER_SESSIONS, MAINTENANCE_SESSIONS, SCHEMA_LIMITS_SQL};
pub use transaction::{fenced_transaction_on, transaction_on};
