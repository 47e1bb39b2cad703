//! Webhooks and events (part B "Webhooks" and "Buttons", part C "Events").
//!
//! * [`api`]: the nine routes of part B's table, one file per verb.
//! * [`validate`]: save-time checks of a webhook body.
//! * [`payload`]: the JSON body of each event kind.
//! * [`matching`]: `record_matches` memory and transitions.
//! * [`clock`]: the time-driven `record_matches` pass.
//! * [`sign`]: the HMAC-SHA256 signature and the four headers.
//! * [`send`]: one attempt over the egress guard, bounded reply read.
//! * [`deliverer`]: claims due outbox rows with a lease and sends them;
//!   retries, auto-pause, pruning.
//! * [`fairness`]: what each database may still claim (in flight, per
//!   minute).
//!
//! * [`outbox`]: the one place where record writes hand their events to
//!   webhooks, inside the write's transaction.

pub mod api;
pub mod clock;
pub mod deliverer;
pub mod fairness;
pub mod matching;
pub mod outbox;
pub mod payload;
pub mod send;
pub mod sign;
pub mod validate;
