//! The gate a request passes before anything is answered or forwarded:
//! `auth` (address shield, bearer, key, budget, liveness) over `bearer`,
//! `keys` and `attempts` (verification), `access` (memberships), the rate
//! limiter (`limiter`, `limiter_lua` over `redis_conn` and `resp`) and the
//! account's upload limit (`upload_limit`).

pub mod access;
pub mod attempts;
pub mod auth;
pub mod bearer;
pub mod keys;
pub mod limiter;
pub mod limiter_lua;
pub mod redis_conn;
pub mod resp;
pub mod upload_limit;
