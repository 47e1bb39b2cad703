//! The freeze that both the frozen-point verification and the cutover
//! begin with: the hold the routers keep (the budget and a grace) and the
//! fence transaction on the source.

use anyhow::Context;
use tokio::time::Instant;
use tokio_postgres::error::SqlState;

use super::admin::Admin;
use super::context::{fatal, Ctx};
use super::shard_catalog;

/// Extra time the hold lasts beyond the budget, so the flip itself is held.
const HOLD_GRACE_MS: i64 = 500;

/// `d` in whole milliseconds.
pub fn ms(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// How long a hold lasts: the budget and a grace, so the flip itself is held.
pub fn hold_ms(ctx: &Ctx) -> i64 {
    ms(ctx.budget) + HOLD_GRACE_MS
}

/// The fence transaction on the source: the placement `FOR UPDATE` (writers
/// in flight drain), `fenced`, the marker. `Some(reason)` when the budget ran out.
pub async fn fence(
    ctx: &Ctx,
    source: &mut Admin,
    marker: &str,
    deadline: Instant,
) -> anyhow::Result<Option<String>> {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .as_millis()
        .max(1);
    let tx = source
        .client
        .transaction()
        .await
        .context("begin the fence")?;
    tx.batch_execute(&format!(
        "SET LOCAL lock_timeout = '{left}ms'; SET LOCAL synchronous_commit = on"
    ))
    .await
    .context("prepare the fence")?;
    let placement = match shard_catalog::lock_placement(&tx, &ctx.database_id).await {
        Ok(p) => p,
        Err(e) if is_lock_timeout(&e) => {
            return Ok(Some(format!(
                "writers on the source held the database longer than {left} ms"
            )))
        }
        Err(e) => return Err(e),
    };
    match placement.map(|p| p.state) {
        Some(s) if s == "moving" || s == "fenced" => {}
        other => {
            return Err(fatal(format!(
                "the source's placement is {other:?}, not moving: something else changed it"
            )))
        }
    }
    shard_catalog::set_placement_state(&tx, &ctx.database_id, "fenced").await?;
    shard_catalog::set_marker(&tx, &ctx.database_id, marker).await?;
    tx.commit().await.context("commit the fence")?;
    Ok(None)
}

fn is_lock_timeout(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<tokio_postgres::Error>()
            .and_then(|p| p.code())
            == Some(&SqlState::LOCK_NOT_AVAILABLE)
    })
}
