//! A lost replication slot: PostgreSQL 15 does not carry logical
//! replication slots to a standby, so when a move's source shard fails
//! over, the new primary has the publication (it is in the catalog, which
//! is replicated) but not the move's slot. The subscription on the target
//! then fails ("replication slot ... does not exist") and retries forever,
//! and the rows written on the source since the failover can never reach
//! the target through it. No retry can fix that: the move is aborted
//! (placement unchanged, the target's copy dropped), and a new move
//! starts from a fresh copy once the shard is healthy (docs/moves.md,
//! "Failover during a move").
//!
//! Checked while the move copies, catches up and cuts over: whenever the
//! target's subscription names the move's slot, the source must have it.

use anyhow::Context;
use tokio_postgres::GenericClient;

use super::admin::Admin;
use super::context::{fatal, Ctx};

/// Where the move's slot stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    /// No subscription names the slot (none yet, or it is being dropped):
    /// nothing to check.
    NotInUse,
    /// The subscription uses the slot and the source has it.
    Present,
    /// The subscription uses the slot and the source does not have it.
    Lost,
}

/// Classifies from what the target and the source say:
/// `subscription_slot` is the slot the move's subscription on the target
/// names (`None`: no subscription; `Some(None)`: one detached from its
/// slot, as a teardown leaves it), `source_has_slot` whether the source's
/// `pg_replication_slots` has the move's slot `name`.
pub fn classify(
    subscription_slot: Option<Option<&str>>,
    name: &str,
    source_has_slot: bool,
) -> SlotState {
    match subscription_slot {
        Some(Some(slot)) if slot == name => {
            if source_has_slot {
                SlotState::Present
            } else {
                SlotState::Lost
            }
        }
        _ => SlotState::NotInUse,
    }
}

/// What `moves show` says for a lost slot.
pub fn lost_message(source_shard: &str, slot: &str) -> String {
    format!(
        "the source shard {source_shard} failed over and its replication slot {slot} was lost \
         (PostgreSQL 15 does not carry logical replication slots to a standby); \
         start a new move once the shard is healthy"
    )
}

/// The slot named by subscription `name` on the target (see [`classify`]).
pub async fn subscription_slot(
    target: &impl GenericClient,
    name: &str,
) -> anyhow::Result<Option<Option<String>>> {
    let row = target
        .query_opt(
            "SELECT subslotname::text FROM pg_subscription WHERE subname = $1",
            &[&name],
        )
        .await
        .context("read the subscription's slot")?;
    row.map(|r| r.try_get(0)).transpose().map_err(Into::into)
}

/// Whether the source has replication slot `name`.
pub async fn source_has_slot(source: &impl GenericClient, name: &str) -> anyhow::Result<bool> {
    let row = source
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)",
            &[&name],
        )
        .await
        .context("look up the move's slot on the source")?;
    Ok(row.try_get(0)?)
}

/// A [`super::context::Fatal`] error (the driver aborts the move) when the
/// move's slot is lost; the target is read first, so a subscription made
/// after the source was read cannot look like a lost slot.
pub async fn ensure(ctx: &Ctx, source: &Admin, target: &Admin) -> anyhow::Result<()> {
    let sub = subscription_slot(&**target, &ctx.name).await?;
    if sub.is_none() {
        return Ok(());
    }
    let on_source = source_has_slot(&**source, &ctx.name).await?;
    match classify(sub.as_ref().map(|s| s.as_deref()), &ctx.name, on_source) {
        SlotState::Lost => {
            tracing::warn!(
                move_id = ctx.id,
                shard = ctx.from.name,
                slot = ctx.name,
                "mover: the move's replication slot is gone from the source"
            );
            Err(fatal(lost_message(&ctx.from.name, &ctx.name)))
        }
        SlotState::Present | SlotState::NotInUse => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscription_without_its_slot_on_the_source_is_a_lost_slot() {
        assert_eq!(
            classify(Some(Some("tmv_a")), "tmv_a", false),
            SlotState::Lost
        );
        assert_eq!(
            classify(Some(Some("tmv_a")), "tmv_a", true),
            SlotState::Present
        );
    }

    #[test]
    fn no_subscription_or_a_detached_one_needs_no_slot() {
        // Before the subscription is made, and halfway through a teardown
        // (`SET (slot_name = NONE)` done, `DROP SUBSCRIPTION` not yet).
        assert_eq!(classify(None, "tmv_a", false), SlotState::NotInUse);
        assert_eq!(classify(Some(None), "tmv_a", false), SlotState::NotInUse);
        assert_eq!(classify(None, "tmv_a", true), SlotState::NotInUse);
        // A subscription on another slot is not this move's.
        assert_eq!(
            classify(Some(Some("tmv_b")), "tmv_a", false),
            SlotState::NotInUse
        );
    }

    #[test]
    fn the_message_says_why_and_what_to_do() {
        let m = lost_message("shard-1", "tmv_abc");
        assert!(m.contains("shard-1 failed over"), "{m}");
        assert!(m.contains("replication slot tmv_abc was lost"), "{m}");
        assert!(
            m.contains("start a new move once the shard is healthy"),
            "{m}"
        );
    }
}
