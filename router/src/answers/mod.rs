//! The routes the router answers itself (the route table's `Tier::Router`
//! entries, and the public links it forwards without an API key): `health`,
//! `openapi`, `whoami`, `databases` (list, create), `members`, `files`,
//! `share`.

pub mod databases;
pub mod files;
pub mod health;
pub mod members;
pub mod openapi;
pub mod share;
pub mod whoami;
