//! The restorer: the task of `control-plane serve` that runs point-in-time
//! restores of one database (docs/restore.md). One driver per unfinished
//! restore, resumed after a restart; a driver holds a session advisory
//! lock on its restore, so two control planes never run the same one.
//!
//! * `driver`: one restore's states, retries and failure cleanup.
//! * `scratch`: the `RESTORE_SCRATCH_COMMAND` program.
//! * `copy`: the copy into the new database, one transaction on its shard.
//! * `rows`: streamed, re-tagged COPY; `schema`: the re-tagged tenant
//!   schema (introspection and DDL are the mover's `schema_copy` and `ddl`).
//! * `retag`: the one function that rewrites the original's ids.

pub mod copy;
pub mod driver;
pub mod retag;
pub mod rows;
pub mod schema;
pub mod scratch;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::task::JoinHandle;

use crate::catalog::restores;
use crate::config::Secret;
use crate::AppState;

/// How often the restorer looks for work when nobody wakes it.
const TICK: Duration = Duration::from_secs(2);

/// Starts the restorer; it runs until the returned task is aborted.
pub fn spawn(state: AppState, catalog_dsn: Secret) -> JoinHandle<()> {
    tokio::spawn(run(state, Arc::new(catalog_dsn)))
}

async fn run(state: AppState, catalog_dsn: Arc<Secret>) {
    let mut driving: HashMap<String, JoinHandle<()>> = HashMap::new();
    loop {
        driving.retain(|_, h| !h.is_finished());
        if let Err(e) = tick(&state, &catalog_dsn, &mut driving).await {
            tracing::warn!(
                error = format!("{e:#}"),
                "restorer: could not read the restores"
            );
        }
        tokio::select! {
            _ = state.restorer_wake.notified() => {}
            _ = tokio::time::sleep(TICK) => {}
        }
    }
}

/// Makes sure every unfinished restore has a driver.
async fn tick(
    state: &AppState,
    catalog_dsn: &Arc<Secret>,
    driving: &mut HashMap<String, JoinHandle<()>>,
) -> anyhow::Result<()> {
    let client = state.session().await.context("catalog connection")?;
    for r in restores::unfinished(&**client).await? {
        if driving.contains_key(&r.api.id) {
            continue;
        }
        let (s, dsn, key) = (state.clone(), catalog_dsn.clone(), r.api.id.clone());
        let handle = tokio::spawn(async move {
            if let Err(e) = driver::drive(s, dsn, key.clone()).await {
                tracing::warn!(
                    restore_id = key,
                    error = format!("{e:#}"),
                    "restorer: driver stopped"
                );
            }
        });
        driving.insert(r.api.id, handle);
    }
    Ok(())
}
