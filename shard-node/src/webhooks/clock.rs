//! The time-driven `record_matches` pass (part C, "Time-driven matching"):
//! every `MATCH_CLOCK_INTERVAL`, each switched-on, unpaused
//! `record_matches` webhook whose conditions name a relative date (its
//! match set moves with the clock, `today` in the database's timezone)
//! has the live records matching now compared with its memory: records
//! that entered fire a clock-driven `record.matches` (name-keyed with
//! `field_ids` whatever `payload_key` says, empty `changed_field_ids`,
//! null `before`); records that left are forgotten.
//!
//! A webhook whose memory is not recorded yet (`matches_recorded` false:
//! just created, changed, switched on or resumed) gets a sweep whatever
//! its conditions: it records what matches without delivering, then marks
//! the webhook recorded (bumping the schema version, so writes see it).
//!
//! Bounded work: a webhook's records are swept in keyset batches by record
//! id (`catalog::match_sweep`), at most `MATCH_CLOCK_BATCH` ids (records
//! and memory rows) per batch, so a batch holds at most that many ids and
//! payloads whatever the table's size. One pass looks at most at
//! `MATCH_CLOCK_ROWS_PER_PASS` ids per database (shared equally by its
//! webhooks); the next pass carries on from the webhook's cursor, and the
//! sweep ends (and the next one starts from the first record) when a batch
//! finds fewer ids than it asked for.
//!
//! Each batch is its own transaction on a maintenance session, with the
//! webhook row locked `FOR UPDATE SKIP LOCKED`: the cursor is read under
//! the lock and written with the batch's memory changes and deliveries, so
//! a crash redoes at most one batch and a transition never fires twice;
//! two nodes sharing one PostgreSQL never run the same webhook's batches
//! at once, and a webhook being saved is skipped until the next tick.

use std::collections::HashSet;
use std::time::Duration;

use chrono::Utc;
use cluster_protocol::ids::{self, Kind};
use filter_lang::Params;

use super::matching::{self, Cause, Scope};
use super::payload::{self, Event, Source};
use crate::catalog::databases;
use crate::catalog::match_sweep::{self, START};
use crate::catalog::outbox::{self, ClockWebhook, Enqueue, Match, NewDelivery};
use crate::catalog::placements::{self, Need};
use crate::db::{transaction_on, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::json::format_ts;
use crate::records::cells::read;
use crate::records::store;
use crate::records::table::RecordTable;
use crate::schema::rules::{PayloadKey, Rule, Trigger};
use crate::schema::DatabaseSchema;
use crate::state::AppState;
use crate::webhooks::outbox::guarded;

/// What one pass (or one webhook's part of it) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassOutcome {
    /// Webhooks that had at least one batch.
    pub webhooks: usize,
    /// Clock-driven `record.matches` deliveries enqueued.
    pub deliveries: usize,
    /// Ids looked at (records of the webhooks' tables and memory rows).
    pub rows: usize,
    /// Sweeps that reached the last record.
    pub sweeps: usize,
}

impl PassOutcome {
    fn add(&mut self, other: PassOutcome) {
        self.webhooks += other.webhooks;
        self.deliveries += other.deliveries;
        self.rows += other.rows;
        self.sweeps += other.sweeps;
    }
}

/// Ids one webhook may look at in a pass: the database's `budget` shared
/// equally by its `webhooks` (at least one each).
pub fn allowance(budget: usize, webhooks: usize) -> usize {
    (budget / webhooks.max(1)).max(1)
}

/// One pass over every webhook held here that needs one.
pub async fn pass(state: &AppState) -> ApiResult<PassOutcome> {
    state
        .db
        .measured(DbOp::MatchClock, async {
            let mut client = state.db.maintenance_client().await?;
            let webhooks = outbox::clock_webhooks(&client).await?;
            let mut outcome = PassOutcome::default();
            // Listed by database: each database's webhooks share its budget.
            for group in webhooks.chunk_by(|a, b| a.database_id == b.database_id) {
                let each = allowance(state.webhooks.match_clock_rows_per_pass, group.len());
                for w in group {
                    match sweep(state, &mut client, w, each).await {
                        Ok(done) => outcome.add(done),
                        Err(e) => {
                            tracing::warn!(webhook = %w.id, error = %e, "match clock pass of a webhook failed")
                        }
                    }
                }
            }
            Ok(outcome)
        })
        .await
}

/// Batches of one webhook's sweep until it has looked at `allowance` ids
/// or its sweep ends.
async fn sweep(
    state: &AppState,
    client: &mut deadpool_postgres::Object,
    w: &ClockWebhook,
    allowance: usize,
) -> ApiResult<PassOutcome> {
    let batch = state.webhooks.match_clock_batch.max(1);
    let mut done = PassOutcome::default();
    while done.rows < allowance {
        let limit = batch.min(allowance - done.rows);
        let Some(b) = batch_one(state, client, w, limit).await? else {
            break;
        };
        done.webhooks = 1;
        done.rows += b.rows;
        done.deliveries += b.deliveries;
        if b.swept {
            done.sweeps += 1;
            break;
        }
    }
    Ok(done)
}

/// What one batch did.
struct Batch {
    rows: usize,
    deliveries: usize,
    /// It reached the last record: the sweep ended.
    swept: bool,
}

/// One batch of at most `limit` ids after the webhook's cursor, in its own
/// transaction behind the write fence; `None` when it was skipped (its
/// database no longer served here, locked elsewhere, gone, or nothing on
/// it moves with the clock).
async fn batch_one(
    state: &AppState,
    client: &mut deadpool_postgres::Object,
    w: &ClockWebhook,
    limit: usize,
) -> ApiResult<Option<Batch>> {
    // A skipped batch has written nothing: its transaction commits empty.
    transaction_on(client, async |tx| batch_in(state, tx, w, limit).await).await
}

/// [`batch_one`]'s work, in its transaction.
async fn batch_in(
    state: &AppState,
    tx: &deadpool_postgres::Transaction<'_>,
    w: &ClockWebhook,
    limit: usize,
) -> ApiResult<Option<Batch>> {
    // The database moved (or is at its cutover) since the listing.
    match placements::fence(tx, &w.database_id, Need::Write).await {
        Err(ApiError::Misplaced) => return Ok(None),
        fenced => fenced?,
    }
    let Some(cursor) = outbox::lock_for_pass(tx, &w.id).await? else {
        return Ok(None);
    };
    let after = cursor.unwrap_or_else(|| START.to_owned());
    let (schema, database_name) = state.schemas.get_for_write(tx, &w.database_id).await?;
    let Some(rule) = schema.webhook(&w.id) else {
        return Ok(None);
    };
    if rule.trigger != Trigger::RecordMatches
        || !rule.delivers()
        || (rule.matches_recorded && !rule.names_relative_date())
    {
        return Ok(None);
    }
    let env = filter_lang::Env::new(&schema.timezone, Utc::now())
        .or_else(|_| filter_lang::Env::new("UTC", Utc::now()))
        .map_err(|e| anyhow::anyhow!("{e}"))?;

    let tables: Vec<_> = schema
        .tables
        .iter()
        .filter(|t| rule.covers(&t.id))
        .collect();
    let qualified = tables
        .iter()
        .map(|t| t.qualified())
        .collect::<Result<Vec<_>, _>>()?;
    let wanted = i64::try_from(limit).unwrap_or(i64::MAX);
    let window = match_sweep::window(tx, &qualified, &rule.id, &after, wanted).await?;
    let swept = window.len() < limit;
    let Some(upto) = window.last() else {
        end_sweep(tx, rule, &w.database_id).await?;
        return Ok(Some(Batch {
            rows: 0,
            deliveries: 0,
            swept: true,
        }));
    };

    // What matches now inside the window, by table (a whole-database
    // webhook spans them all).
    let mut now: Vec<(String, Vec<String>)> = Vec::with_capacity(tables.len());
    for (table, q) in tables.iter().zip(&qualified) {
        let mut params = Params::new(1);
        let condition = match rule.compile_conditions(&schema, table, &env, &mut params) {
            _ if rule.conditions().is_none() => "TRUE".to_owned(),
            None => continue,
            Some(sql) => sql,
        };
        let found = guarded(
            tx,
            match_sweep::matching_between(tx, q, &condition, params.values(), &after, upto),
        )
        .await?
        .unwrap_or_default();
        now.push((table.id.clone(), found));
    }
    let matching: HashSet<String> = now.iter().flat_map(|(_, ids)| ids).cloned().collect();
    let remembered: HashSet<String> = match_sweep::memory_between(tx, &rule.id, &after, upto)
        .await?
        .into_iter()
        .collect();
    let t = matching::transitions(Scope::All, &matching, &remembered);
    let pair = |r: String| -> Match { (rule.id.clone(), r) };
    let forget: Vec<Match> = t.left.into_iter().map(pair).collect();
    let remember: Vec<Match> = t.entered.into_iter().map(pair).collect();
    let entered: HashSet<String> = outbox::update_memory(tx, &w.database_id, &forget, &remember)
        .await?
        .into_iter()
        .map(|(_, r)| r)
        .collect();

    let mut sent = 0;
    if matching::announces(Cause::Clock, rule.matches_recorded, None) && !entered.is_empty() {
        let source = Announce {
            schema: &schema,
            database_name: &database_name,
            rule,
        };
        let mut rows = Vec::new();
        for (table_id, ids) in &now {
            let ids: Vec<String> = ids
                .iter()
                .filter(|i| entered.contains(*i))
                .cloned()
                .collect();
            if !ids.is_empty() {
                rows.extend(source.deliveries(tx, table_id, &ids).await?);
            }
        }
        sent = outbox::enqueue(tx, &w.database_id, &rows, Enqueue::Delivering).await? as usize;
    }
    if swept {
        end_sweep(tx, rule, &w.database_id).await?;
    } else {
        match_sweep::set_cursor(tx, &rule.id, Some(upto)).await?;
    }
    Ok(Some(Batch {
        rows: window.len(),
        deliveries: sent,
        swept,
    }))
}

/// The sweep reached the last record: the next one starts from the first;
/// a first sweep has recorded what matches (writes see it at once).
async fn end_sweep(
    tx: &deadpool_postgres::Transaction<'_>,
    rule: &Rule,
    database_id: &str,
) -> ApiResult<()> {
    match_sweep::set_cursor(tx, &rule.id, None).await?;
    if !matching::announces(Cause::Clock, rule.matches_recorded, None) {
        outbox::set_matches_recorded(tx, &rule.id).await?;
        databases::bump_schema_version(tx, database_id).await?;
    }
    Ok(())
}

/// What a clock-driven delivery is built from.
struct Announce<'a> {
    schema: &'a DatabaseSchema,
    database_name: &'a str,
    rule: &'a Rule,
}

impl Announce<'_> {
    /// The clock-driven `record.matches` deliveries of `ids` (records of
    /// `table_id` that entered the set): always keyed by name.
    async fn deliveries(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        table_id: &str,
        ids: &[String],
    ) -> ApiResult<Vec<NewDelivery>> {
        let Some(table) = self.schema.table(table_id) else {
            return Ok(Vec::new());
        };
        let rt = RecordTable::from_schema(self.schema, table_id)?;
        let read = read::read_set(self.schema, table, None);
        let rows =
            store::by_ids_checked(tx, &rt, &read.exprs(), &read.values, ids, &[], &[]).await?;
        let source = Source {
            database_id: &self.schema.database_id,
            database_name: self.database_name,
            table_id,
            table_name: &table.name,
            fields: &read.fields,
        };
        let occurred_at = format_ts(&Utc::now());
        let mut out = Vec::with_capacity(rows.len());
        for (rec, _) in rows.iter().filter(|(r, _)| r.deleted_at.is_none()) {
            let delivery_id = ids::new_tagged(Kind::Delivery, &rt.tag);
            let event = Event {
                kind: "record.matches",
                record_id: Some(&rec.id),
                changed_field_ids: &[],
                before: None,
                after: Some(rec),
                button: None,
                test: false,
            };
            out.push(NewDelivery {
                body: payload::body(
                    &source,
                    &event,
                    PayloadKey::Name,
                    &delivery_id,
                    &occurred_at,
                ),
                id: delivery_id,
                webhook_id: self.rule.id.clone(),
                event: "record.matches",
                record_id: Some(rec.id.clone()),
            });
        }
        Ok(out)
    }
}

/// Runs [`pass`] every `interval`, the first one interval after start,
/// until the task is dropped.
pub fn spawn(state: AppState, interval: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let first = tokio::time::Instant::now() + interval;
        let mut tick = tokio::time::interval_at(first, interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match pass(&state).await {
                Ok(o) if o.deliveries > 0 => tracing::info!(
                    webhooks = o.webhooks,
                    deliveries = o.deliveries,
                    rows = o.rows,
                    "match clock enqueued record.matches deliveries"
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "match clock pass failed"),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::allowance;

    #[test]
    fn a_database_budget_is_shared_by_its_webhooks() {
        assert_eq!(allowance(50_000, 1), 50_000);
        assert_eq!(allowance(50_000, 100), 500);
        assert_eq!(allowance(10, 3), 3);
        // Every webhook gets something, a budget smaller than the count too.
        assert_eq!(allowance(2, 5), 1);
        assert_eq!(allowance(7, 0), 7);
    }
}
