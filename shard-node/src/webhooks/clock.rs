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
//! just created, changed, switched on or resumed) gets a pass whatever its
//! conditions: it records what matches without delivering, then marks the
//! webhook recorded (bumping the schema version, so writes see it).
//!
//! Each webhook is its own transaction on a maintenance session, with the
//! webhook row locked `FOR UPDATE SKIP LOCKED`: two nodes sharing one
//! PostgreSQL never pass the same webhook at once, and a webhook being
//! saved is skipped until the next tick.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::Utc;
use cluster_protocol::ids::{self, Kind};
use filter_lang::Params;

use super::matching::{self, Cause, Scope};
use super::payload::{self, Event, Source};
use super::rules::{PayloadKey, Rule, Trigger};
use crate::catalog::databases;
use crate::catalog::outbox::{self, ClockWebhook, Enqueue, Match, NewDelivery};
use crate::catalog::placements::{self, Need};
use crate::error::{ApiError, ApiResult};
use crate::json::format_ts;
use crate::records::cells::read;
use crate::records::events::guarded;
use crate::records::store;
use crate::records::table::RecordTable;
use crate::schema::DatabaseSchema;
use crate::state::{AppState, DbOp};

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassOutcome {
    /// Webhooks whose memory was compared with what matches now.
    pub webhooks: usize,
    /// Clock-driven `record.matches` deliveries enqueued.
    pub deliveries: usize,
}

/// One pass over every webhook held here that needs one.
pub async fn pass(state: &AppState) -> ApiResult<PassOutcome> {
    state
        .db
        .measured(DbOp::MatchClock, async {
            let mut client = state.db.maintenance_client().await?;
            let webhooks = outbox::clock_webhooks(&client).await?;
            let mut outcome = PassOutcome::default();
            for w in &webhooks {
                match pass_one(state, &mut client, w).await {
                    Ok(Some(n)) => {
                        outcome.webhooks += 1;
                        outcome.deliveries += n;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(webhook = %w.id, error = %e, "match clock pass of a webhook failed")
                    }
                }
            }
            Ok(outcome)
        })
        .await
}

/// One webhook's pass in its own transaction behind the write fence;
/// `None` when it was skipped (its database no longer served here, locked
/// elsewhere, gone, or nothing on it moves with the clock).
async fn pass_one(
    state: &AppState,
    client: &mut deadpool_postgres::Object,
    w: &ClockWebhook,
) -> ApiResult<Option<usize>> {
    let tx = client.transaction().await?;
    // The database moved (or is at its cutover) since the listing.
    match placements::fence(&tx, &w.database_id, Need::Write).await {
        Err(ApiError::Misplaced) => return Ok(None),
        fenced => fenced?,
    }
    if !outbox::lock_for_pass(&tx, &w.id).await? {
        return Ok(None);
    }
    let (schema, database_name) = state.schemas.get_for_write(&tx, &w.database_id).await?;
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

    // What matches now, by table (a whole-database webhook spans them all).
    let mut now: HashMap<String, Vec<String>> = HashMap::new();
    for table in schema.tables.iter().filter(|t| rule.covers(&t.id)) {
        let mut params = Params::new(1);
        let condition = match rule.compile_conditions(&schema, table, &env, &mut params) {
            _ if rule.conditions().is_none() => "TRUE".to_owned(),
            None => continue,
            Some(sql) => sql,
        };
        let qualified = table.qualified()?;
        let found = guarded(
            &tx,
            store::live_matching(&tx, &qualified, &condition, params.values()),
        )
        .await?
        .unwrap_or_default();
        now.insert(table.id.clone(), found);
    }
    let matching: HashSet<String> = now.values().flatten().cloned().collect();
    let remembered: HashSet<String> = outbox::memory_of(&tx, &rule.id)
        .await?
        .into_iter()
        .collect();
    let t = matching::transitions(Scope::All, &matching, &remembered);
    let pair = |r: String| -> Match { (rule.id.clone(), r) };
    let forget: Vec<Match> = t.left.into_iter().map(pair).collect();
    let remember: Vec<Match> = t.entered.into_iter().map(pair).collect();
    let entered: HashSet<String> = outbox::update_memory(&tx, &w.database_id, &forget, &remember)
        .await?
        .into_iter()
        .map(|(_, r)| r)
        .collect();

    let mut sent = 0;
    if !matching::announces(Cause::Clock, rule.matches_recorded) {
        outbox::set_matches_recorded(&tx, &rule.id).await?;
        databases::bump_schema_version(&tx, &w.database_id).await?;
    } else if !entered.is_empty() {
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
                rows.extend(source.deliveries(&tx, table_id, &ids).await?);
            }
        }
        sent = outbox::enqueue(&tx, &w.database_id, &rows, Enqueue::Delivering).await? as usize;
    }
    tx.commit().await?;
    Ok(Some(sent))
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
                    "match clock enqueued record.matches deliveries"
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "match clock pass failed"),
            }
        }
    })
}
