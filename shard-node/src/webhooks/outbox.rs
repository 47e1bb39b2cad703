//! The one place record writes hand their events to webhooks: the outbox.
//! Every write path (create, update, upsert, trash, restore, button press)
//! calls in here inside its transaction, after the rows are written and
//! before commit, so the delivery rows commit or roll back with the change.
//!
//! A write consults only the rules of its table ([`Outbox::open`], from the
//! cached schema model): with none, nothing here runs a statement. With
//! some, one statement reads the written records as the payload shows them
//! together with every rule's conditions (inside a savepoint, so conditions
//! that fail at run time count as not matching and never fail the write),
//! `record_matches` rules move their memory ([`crate::webhooks::matching`]), and one
//! statement writes the deliveries and NOTIFYs the deliverer.
//!
//! A write of [`NO_DELIVERIES_FROM`] records or more enqueues nothing (the
//! match memory still follows it). Purging fires nothing.

use std::collections::{HashMap, HashSet};

use chrono::Utc;
use cluster_protocol::ids::{self, Kind};
use deadpool_postgres::Transaction;
use filter_lang::Params;

use crate::attachments::shown;
use crate::catalog::outbox::{self, Enqueue, Match, NewDelivery};
use crate::error::{ApiError, ApiResult};
use crate::json::format_ts;
use crate::records::cells::ReadSet;
use crate::records::store::{self, StoredRecord};
use crate::records::write::Ctx;
use crate::schema::rules::{Rule, Trigger};
use crate::schema::FieldRow;
use crate::webhooks::matching::{self, Cause, Scope};
use crate::webhooks::payload::{self, ButtonPress, ButtonRef, Event, Source};

/// Part C: a write of this many records or more enqueues no deliveries.
pub const NO_DELIVERIES_FROM: usize = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordEvent {
    /// Created, upserted as new, or restored from the trash.
    Created,
    Updated,
    /// Moved to the trash.
    Deleted,
}

impl RecordEvent {
    pub const fn name(self) -> &'static str {
        match self {
            RecordEvent::Created => "record.created",
            RecordEvent::Updated => "record.updated",
            RecordEvent::Deleted => "record.deleted",
        }
    }

    /// The trigger whose webhooks this event fires.
    const fn trigger(self) -> Trigger {
        match self {
            RecordEvent::Created => Trigger::RecordCreated,
            RecordEvent::Updated => Trigger::RecordUpdated,
            RecordEvent::Deleted => Trigger::RecordDeleted,
        }
    }
}

const MATCHES: &str = "record.matches";

/// Records one write changed the same way.
#[derive(Debug, Clone, Copy)]
pub struct Written<'a> {
    pub event: RecordEvent,
    pub ids: &'a [String],
    /// Per record of `ids` (same order), the fields the write supplied;
    /// empty for a create, a trash or a restore.
    pub supplied: &'a [Vec<String>],
}

impl<'a> Written<'a> {
    pub fn new(event: RecordEvent, ids: &'a [String]) -> Self {
        Written {
            event,
            ids,
            supplied: &[],
        }
    }

    fn supplied(&self, i: usize) -> &'a [String] {
        self.supplied.get(i).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// The fields a record's write supplied, in the table's field order.
pub fn supplied_fields(
    ctx: &Ctx,
    prepared: &crate::records::cells::write::Prepared,
) -> Vec<String> {
    let Ok(table) = ctx.table() else {
        return Vec::new();
    };
    table
        .fields
        .iter()
        .filter(|f| {
            prepared.columns.contains_key(&f.id)
                || prepared.links.iter().any(|(id, _)| *id == f.id)
                || prepared.attachments.iter().any(|(id, _)| *id == f.id)
        })
        .map(|f| f.id.clone())
        .collect()
}

/// What one write hands to webhooks: opened before the write (the rules
/// of its table and, for updates, the records as they stood), finished
/// after it ([`Outbox::written`]).
pub struct Outbox<'c> {
    ctx: &'c Ctx,
    rules: Vec<&'c crate::schema::rules::Rule>,
    /// 50 records or more: the memory moves, nothing is enqueued.
    quiet: bool,
    /// The records' cells as the payload shows them (every field).
    read: ReadSet,
    before: HashMap<String, StoredRecord>,
    /// Per `record_matches` rule whose memory has not had its first clock
    /// pass, the updated records its conditions matched before the write:
    /// the write itself then tells a transition from continuing to match.
    matched_before: HashMap<String, HashSet<String>>,
    /// The records as read after the write with every field (when a rule
    /// made the outbox read them), for the write's reply.
    after: HashMap<String, StoredRecord>,
}

/// One delivery to build.
struct Pending<'r> {
    rule: &'r Rule,
    kind: &'static str,
    batch: usize,
    index: usize,
}

/// The written records as read after the write, and which of them each
/// rule's conditions match.
struct Checked {
    rows: HashMap<String, StoredRecord>,
    matching: HashMap<String, HashSet<String>>,
}

impl Checked {
    fn matches(&self, rule: &Rule, record_id: &str) -> bool {
        self.matching
            .get(&rule.id)
            .is_some_and(|m| m.contains(record_id))
    }
}

/// What a rule's conditions come to for this write.
enum Outcome {
    /// No conditions (or ones that constrain nothing).
    Every,
    /// Conditions that cannot be evaluated: not matching.
    Nothing,
    /// Condition column `k` of the checked read.
    Column(usize),
}

impl<'c> Outbox<'c> {
    /// The rules a write of `batch_len` records on the context's table
    /// consults. No statement.
    pub fn open(ctx: &'c Ctx, batch_len: usize) -> Outbox<'c> {
        let table_id = ctx.record_table.table_id.as_str();
        let rules: Vec<&Rule> = ctx.schema.rules_for(table_id).collect();
        let read = match (rules.is_empty(), ctx.read_fields()) {
            (false, Ok(read)) => read,
            _ => ReadSet::default(),
        };
        Outbox {
            ctx,
            rules,
            quiet: batch_len >= NO_DELIVERIES_FROM,
            read,
            before: HashMap::new(),
            matched_before: HashMap::new(),
            after: HashMap::new(),
        }
    }

    /// `ids` as read after the write, with every field, in that order:
    /// `Some` only when the outbox read every one of them (the reply then
    /// needs no read of its own).
    pub fn records_read(&mut self, ids: &[String]) -> Option<Vec<StoredRecord>> {
        if ids.is_empty() || !ids.iter().all(|id| self.after.contains_key(id)) {
            return None;
        }
        Some(ids.iter().filter_map(|id| self.after.remove(id)).collect())
    }

    fn delivering(&self, trigger: Trigger) -> bool {
        self.rules
            .iter()
            .any(|r| r.trigger == trigger && r.delivers())
    }

    /// Before an update writes: keeps `ids` as they stand for the payload's
    /// `before`, when a rule will carry it.
    pub async fn read_before(&mut self, tx: &Transaction<'_>, ids: &[String]) -> ApiResult<()> {
        if self.quiet
            || ids.is_empty()
            || !(self.delivering(Trigger::RecordUpdated) || self.delivering(Trigger::RecordMatches))
        {
            return Ok(());
        }
        let rows = store::by_ids_checked(
            tx,
            &self.ctx.record_table,
            &self.read.exprs(),
            &self.read.values,
            ids,
            &[],
            &[],
        )
        .await?;
        // Shown now: a write may drop attachments from the registry.
        let mut rows: Vec<StoredRecord> = rows.into_iter().map(|(rec, _)| rec).collect();
        self.show_in_payload(tx, &mut rows).await?;
        for rec in rows {
            self.before.insert(rec.id.clone(), rec);
        }
        let unseeded: Vec<&Rule> = self
            .rules
            .iter()
            .copied()
            .filter(|r| r.trigger == Trigger::RecordMatches && r.delivers() && !r.matches_recorded)
            .collect();
        for rule in unseeded {
            let m = self.check_one(tx, ids, rule).await?;
            self.matched_before.insert(rule.id.clone(), m);
        }
        Ok(())
    }

    /// Replaces the attachment cells of `rows` by the objects a payload
    /// carries.
    async fn show_in_payload(
        &self,
        tx: &Transaction<'_>,
        rows: &mut [StoredRecord],
    ) -> ApiResult<()> {
        shown::expand(
            tx,
            &self.ctx.links,
            &self.ctx.record_table.database_id,
            &self.read.fields,
            rows,
            shown::Style::Payload,
        )
        .await
    }

    /// After the write: enqueues what `batches` fire and moves the match
    /// memory.
    pub async fn written(
        &mut self,
        tx: &Transaction<'_>,
        batches: &[Written<'_>],
    ) -> ApiResult<()> {
        if self.rules.is_empty() {
            return Ok(());
        }
        self.forget_trashed(tx, batches).await?;

        // (rule, batch) pairs that may fire or move memory.
        let mut plans: Vec<(&Rule, usize)> = Vec::new();
        for (b, batch) in batches.iter().enumerate() {
            if batch.ids.is_empty() {
                continue;
            }
            for &rule in self.rules.iter().filter(|r| r.delivers()) {
                let direct = rule.trigger == batch.event.trigger() && !self.quiet;
                let matches =
                    rule.trigger == Trigger::RecordMatches && batch.event != RecordEvent::Deleted;
                if direct || matches {
                    plans.push((rule, b));
                }
            }
        }
        if plans.is_empty() {
            return Ok(());
        }
        let mut ids: Vec<String> = Vec::new();
        let mut seen = HashSet::new();
        for (_, b) in &plans {
            for id in batches[*b].ids {
                if seen.insert(id.as_str()) {
                    ids.push(id.clone());
                }
            }
        }
        let mut rules: Vec<&Rule> = Vec::new();
        for (r, _) in &plans {
            if !rules.iter().any(|x| x.id == r.id) {
                rules.push(r);
            }
        }
        let checked = self.check(tx, &ids, &rules).await?;

        let mut pending: Vec<Pending> = Vec::new();
        for &(rule, b) in plans
            .iter()
            .filter(|(r, _)| r.trigger != Trigger::RecordMatches)
        {
            let batch = &batches[b];
            for (i, id) in batch.ids.iter().enumerate() {
                if !checked.matches(rule, id) {
                    continue;
                }
                if rule.trigger == Trigger::RecordUpdated && !rule.watches_any(batch.supplied(i)) {
                    continue;
                }
                pending.push(Pending {
                    rule,
                    kind: batch.event.name(),
                    batch: b,
                    index: i,
                });
            }
        }
        let matching: Vec<(&Rule, usize)> = plans
            .iter()
            .copied()
            .filter(|(r, _)| r.trigger == Trigger::RecordMatches)
            .collect();
        pending.extend(
            self.move_memory(tx, &matching, batches, &ids, &checked)
                .await?,
        );
        if !(self.quiet || pending.is_empty()) {
            self.enqueue(tx, batches, &checked, &pending).await?;
        }
        if !self.quiet {
            self.after = checked.rows;
        }
        Ok(())
    }

    /// Trashed records leave every `record_matches` memory of the table.
    async fn forget_trashed(&self, tx: &Transaction<'_>, batches: &[Written<'_>]) -> ApiResult<()> {
        let webhooks: Vec<&str> = self
            .rules
            .iter()
            .filter(|r| r.trigger == Trigger::RecordMatches)
            .map(|r| r.id.as_str())
            .collect();
        if webhooks.is_empty() {
            return Ok(());
        }
        for batch in batches.iter().filter(|b| b.event == RecordEvent::Deleted) {
            outbox::forget_records(tx, &webhooks, batch.ids).await?;
        }
        Ok(())
    }

    /// Reads `ids` (with their cells unless nothing will be enqueued) and
    /// evaluates every rule's conditions on them, in one statement inside a
    /// savepoint; if that fails, each rule's conditions alone, each in its
    /// own, and a failing one matches nothing.
    async fn check(
        &self,
        tx: &Transaction<'_>,
        ids: &[String],
        rules: &[&Rule],
    ) -> ApiResult<Checked> {
        let ctx = self.ctx;
        let table = ctx.table()?;
        let empty = ReadSet::default();
        let read = if self.quiet { &empty } else { &self.read };
        let exprs = read.exprs();
        let mut params = Params::new(read.values.len() + 2);
        let mut conditions: Vec<String> = Vec::new();
        let mut outcomes: Vec<Outcome> = Vec::with_capacity(rules.len());
        for rule in rules {
            outcomes.push(
                match rule.compile_conditions(&ctx.schema, table, &ctx.env, &mut params) {
                    _ if rule.conditions().is_none() => Outcome::Every,
                    None => Outcome::Nothing,
                    Some(sql) if sql == "TRUE" => Outcome::Every,
                    Some(sql) => {
                        conditions.push(sql);
                        Outcome::Column(conditions.len() - 1)
                    }
                },
            );
        }
        let rt = &ctx.record_table;
        let all = if conditions.is_empty() {
            store::by_ids_checked(tx, rt, &exprs, &read.values, ids, &[], &[])
                .await
                .map(Some)?
        } else {
            guarded(
                tx,
                store::by_ids_checked(
                    tx,
                    rt,
                    &exprs,
                    &read.values,
                    ids,
                    &conditions,
                    params.values(),
                ),
            )
            .await?
        };
        let mut matching: HashMap<String, HashSet<String>> = HashMap::new();
        let rows = match all {
            Some(rows) => {
                for (rule, outcome) in rules.iter().zip(&outcomes) {
                    let m: HashSet<String> = rows
                        .iter()
                        .filter(|(_, c)| match outcome {
                            Outcome::Every => true,
                            Outcome::Nothing => false,
                            Outcome::Column(k) => c.get(*k).copied().unwrap_or(false),
                        })
                        .map(|(r, _)| r.id.clone())
                        .collect();
                    matching.insert(rule.id.clone(), m);
                }
                rows
            }
            None => {
                let rows =
                    store::by_ids_checked(tx, rt, &exprs, &read.values, ids, &[], &[]).await?;
                for (rule, outcome) in rules.iter().zip(&outcomes) {
                    let m: HashSet<String> = match outcome {
                        Outcome::Every => rows.iter().map(|(r, _)| r.id.clone()).collect(),
                        Outcome::Nothing => HashSet::new(),
                        Outcome::Column(_) => self.check_one(tx, ids, rule).await?,
                    };
                    matching.insert(rule.id.clone(), m);
                }
                rows
            }
        };
        Ok(Checked {
            rows: rows.into_iter().map(|(r, _)| (r.id.clone(), r)).collect(),
            matching,
        })
    }

    /// One rule's conditions on `ids`, in a savepoint of their own.
    async fn check_one(
        &self,
        tx: &Transaction<'_>,
        ids: &[String],
        rule: &Rule,
    ) -> ApiResult<HashSet<String>> {
        let ctx = self.ctx;
        let mut params = Params::new(2);
        let Some(sql) = rule.compile_conditions(&ctx.schema, ctx.table()?, &ctx.env, &mut params)
        else {
            return Ok(HashSet::new());
        };
        let conditions = [sql];
        let rows = guarded(
            tx,
            store::by_ids_checked(
                tx,
                &ctx.record_table,
                &[],
                &[],
                ids,
                &conditions,
                params.values(),
            ),
        )
        .await?
        .unwrap_or_default();
        Ok(rows
            .into_iter()
            .filter(|(_, c)| c.first().copied().unwrap_or(false))
            .map(|(r, _)| r.id)
            .collect())
    }

    /// `record_matches`: compares what matches now with the memory,
    /// remembers records that entered and forgets those that left; returns
    /// the deliveries the entries announce.
    async fn move_memory<'r>(
        &self,
        tx: &Transaction<'_>,
        plans: &[(&'r Rule, usize)],
        batches: &[Written<'_>],
        ids: &[String],
        checked: &Checked,
    ) -> ApiResult<Vec<Pending<'r>>> {
        if plans.is_empty() {
            return Ok(Vec::new());
        }
        let mut webhooks: Vec<&str> = plans.iter().map(|(r, _)| r.id.as_str()).collect();
        webhooks.sort_unstable();
        webhooks.dedup();
        let mut remembered: HashMap<String, HashSet<String>> = HashMap::new();
        for (w, r) in outbox::remembered(tx, &webhooks, ids).await? {
            remembered.entry(w).or_default().insert(r);
        }
        let none = HashSet::new();
        let (mut forget, mut remember): (Vec<Match>, Vec<Match>) = (Vec::new(), Vec::new());
        let mut pending = Vec::new();
        for &(rule, b) in plans {
            let batch = &batches[b];
            let now = checked.matching.get(&rule.id).unwrap_or(&none);
            let t = matching::transitions(
                Scope::Records(batch.ids),
                now,
                remembered.get(&rule.id).unwrap_or(&none),
            );
            forget.extend(t.left.into_iter().map(|r| (rule.id.clone(), r)));
            let cause = match batch.event {
                RecordEvent::Updated => Cause::Update,
                _ => Cause::Creation,
            };
            let before = self.matched_before.get(&rule.id);
            for r in t.entered {
                let matched_before = before.map(|m| m.contains(&r));
                let announce = !self.quiet
                    && matching::announces(cause, rule.matches_recorded, matched_before);
                if announce {
                    if let Some(index) = batch.ids.iter().position(|i| *i == r) {
                        pending.push(Pending {
                            rule,
                            kind: MATCHES,
                            batch: b,
                            index,
                        });
                    }
                }
                remember.push((rule.id.clone(), r));
            }
        }
        let entered: HashSet<Match> =
            outbox::update_memory(tx, &self.ctx.record_table.database_id, &forget, &remember)
                .await?
                .into_iter()
                .collect();
        pending.retain(|p| {
            let id = &batches[p.batch].ids[p.index];
            entered.contains(&(p.rule.id.clone(), id.clone()))
        });
        Ok(pending)
    }

    /// Builds the payloads of `pending` and writes them to the outbox.
    async fn enqueue(
        &self,
        tx: &Transaction<'_>,
        batches: &[Written<'_>],
        checked: &Checked,
        pending: &[Pending<'_>],
    ) -> ApiResult<()> {
        let ctx = self.ctx;
        let table = ctx.table()?;
        let source = Source {
            database_id: &ctx.record_table.database_id,
            database_name: &ctx.database_name,
            table_id: &table.id,
            table_name: &table.name,
            fields: &self.read.fields,
        };
        let occurred_at = format_ts(&Utc::now());
        // The records as payloads show them (attachment objects signed now;
        // the reply keeps its own shape of `checked.rows`).
        let mut shown: Vec<StoredRecord> = Vec::new();
        for p in pending {
            let id = &batches[p.batch].ids[p.index];
            if !shown.iter().any(|r| r.id == *id) {
                if let Some(row) = checked.rows.get(id) {
                    shown.push(row.clone());
                }
            }
        }
        self.show_in_payload(tx, &mut shown).await?;
        let mut rows = Vec::with_capacity(pending.len());
        for p in pending {
            let batch = &batches[p.batch];
            let id = &batch.ids[p.index];
            let Some(row) = shown.iter().find(|r| r.id == *id) else {
                continue;
            };
            let (before, after) = match batch.event {
                RecordEvent::Deleted => (Some(row), None),
                RecordEvent::Created => (None, Some(row)),
                RecordEvent::Updated => (self.before.get(id), Some(row)),
            };
            let delivery_id = ids::new_tagged(Kind::Delivery, &ctx.record_table.tag);
            let event = Event {
                kind: p.kind,
                record_id: Some(id),
                changed_field_ids: match batch.event {
                    RecordEvent::Updated => batch.supplied(p.index),
                    _ => &[],
                },
                before,
                after,
                button: None,
                test: false,
            };
            rows.push(NewDelivery {
                body: payload::body(
                    &source,
                    &event,
                    p.rule.payload_key,
                    &delivery_id,
                    &occurred_at,
                ),
                id: delivery_id,
                webhook_id: p.rule.id.clone(),
                event: p.kind,
                record_id: Some(id.clone()),
            });
        }
        outbox::enqueue(
            tx,
            &ctx.record_table.database_id,
            &rows,
            Enqueue::Delivering,
        )
        .await?;
        Ok(())
    }
}

/// Runs `work` (one statement, sent on its first poll) inside a savepoint,
/// all in one round trip: `None` (the transaction as it was before) when it
/// fails. Condition evaluation never fails a write (part C).
pub async fn guarded<T>(
    tx: &tokio_postgres::Transaction<'_>,
    work: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>,
) -> ApiResult<Option<T>> {
    const BEGIN: &str = "SAVEPOINT webhook_conditions";
    const RELEASE: &str = "RELEASE SAVEPOINT webhook_conditions";
    // In order: each sends its request on its first poll.
    let (began, out, released) =
        tokio::join!(biased; tx.batch_execute(BEGIN), work, tx.batch_execute(RELEASE));
    began?;
    match (out, released) {
        (Ok(v), Ok(())) => Ok(Some(v)),
        (out, _) => {
            tx.batch_execute(
                "ROLLBACK TO SAVEPOINT webhook_conditions; RELEASE SAVEPOINT webhook_conditions",
            )
            .await?;
            if let Err(e) = out {
                tracing::warn!(error = %e, "webhook conditions could not be evaluated; counted as not matching");
            }
            Ok(None)
        }
    }
}

/// After records are purged (`ids`, or the whole trash when None): they
/// leave every `record_matches` memory of the table. Fires nothing.
pub async fn purged(tx: &Transaction<'_>, ctx: &Ctx, ids: Option<&[String]>) -> ApiResult<()> {
    let table_id = ctx.record_table.table_id.as_str();
    let webhooks: Vec<&str> = ctx
        .schema
        .rules_for(table_id)
        .filter(|r| r.trigger == Trigger::RecordMatches)
        .map(|r| r.id.as_str())
        .collect();
    if webhooks.is_empty() {
        return Ok(());
    }
    match ids {
        Some(ids) => outbox::forget_records(tx, &webhooks, ids).await?,
        None => outbox::forget_missing(tx, &webhooks, &ctx.record_table.qualified).await?,
    };
    Ok(())
}

/// Enqueues the one `button.pressed` delivery of a webhook button for
/// `webhook_id` (whatever the webhook's trigger and table): the full record
/// in `after`, part C's extra keys, keyed as the webhook's `payload_key`
/// says. 404 when the record is not live or the webhook is gone.
pub async fn button_pressed(
    tx: &Transaction<'_>,
    ctx: &Ctx,
    button: &FieldRow,
    record_id: &str,
    webhook_id: &str,
    pressed_by: &str,
) -> ApiResult<()> {
    let rule = ctx.schema.webhook(webhook_id).ok_or(ApiError::NotFound)?;
    let table = ctx.table()?;
    let read = ctx.read_fields()?;
    let ids = [record_id.to_owned()];
    let rows = store::by_ids_checked(
        tx,
        &ctx.record_table,
        &read.exprs(),
        &read.values,
        &ids,
        &[],
        &[],
    )
    .await?;
    let mut live: Vec<StoredRecord> = rows
        .into_iter()
        .map(|(r, _)| r)
        .filter(|r| r.deleted_at.is_none())
        .collect();
    shown::expand(
        tx,
        &ctx.links,
        &ctx.record_table.database_id,
        &read.fields,
        &mut live,
        shown::Style::Payload,
    )
    .await?;
    let rec = live.first().ok_or(ApiError::NotFound)?;
    let pressed_at = format_ts(&Utc::now());
    let source = Source {
        database_id: &ctx.record_table.database_id,
        database_name: &ctx.database_name,
        table_id: &table.id,
        table_name: &table.name,
        fields: &read.fields,
    };
    let event = Event {
        kind: "button.pressed",
        record_id: Some(record_id),
        changed_field_ids: &[],
        before: None,
        after: Some(rec),
        button: Some(ButtonPress {
            trigger: "button",
            button: ButtonRef {
                field_id: &button.id,
                label: button.option_str("label").unwrap_or("Button"),
            },
            pressed_by,
            pressed_at: &pressed_at,
        }),
        test: false,
    };
    let delivery_id = ids::new_tagged(Kind::Delivery, &ctx.record_table.tag);
    let row = NewDelivery {
        body: payload::body(&source, &event, rule.payload_key, &delivery_id, &pressed_at),
        id: delivery_id,
        webhook_id: rule.id.clone(),
        event: "button.pressed",
        record_id: Some(record_id.to_owned()),
    };
    let written = outbox::enqueue(
        tx,
        &ctx.record_table.database_id,
        std::slice::from_ref(&row),
        Enqueue::Existing,
    )
    .await?;
    if written == 0 {
        return Err(ApiError::NotFound);
    }
    Ok(())
}
