//! The outbox side of webhooks: the rules the schema model carries, the
//! `deliveries` rows a record write enqueues in its own transaction, the
//! `record_matches` memory (`webhook_matches`) and what the match clock
//! reads and marks. (Webhook configuration itself: `catalog::webhooks`.)

use deadpool_postgres::GenericClient;

use crate::schema::rules::{PayloadKey, Rule, Trigger};

/// The channel the deliverer listens on (`catalog::deliveries::CHANNEL`);
/// a NOTIFY in the enqueuing transaction wakes it when that transaction
/// commits.
use super::deliveries::CHANNEL as DELIVERIES_CHANNEL;

/// Every webhook of the database, as the schema model carries it.
pub async fn rules(
    c: &impl GenericClient,
    database_id: &str,
) -> Result<Vec<Rule>, tokio_postgres::Error> {
    let statement = c
        .prepare_cached(
            "SELECT id, name, table_id, trigger_type, payload_key, is_active,
                    paused_at IS NOT NULL, conditions, watched_field_ids, matches_recorded
             FROM webhooks WHERE database_id = $1 ORDER BY created_at, id",
        )
        .await?;
    let rows = c.query(&statement, &[&database_id]).await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        let trigger: String = r.try_get(3)?;
        // The column's CHECK admits only the four triggers.
        let Some(trigger) = Trigger::parse(&trigger) else {
            continue;
        };
        out.push(Rule {
            id: r.try_get(0)?,
            name: r.try_get(1)?,
            table_id: r.try_get(2)?,
            trigger,
            payload_key: PayloadKey::parse(r.try_get(4)?),
            is_active: r.try_get(5)?,
            paused: r.try_get(6)?,
            conditions: r.try_get(7)?,
            watched_field_ids: r.try_get(8)?,
            matches_recorded: r.try_get(9)?,
        });
    }
    Ok(out)
}

/// One outbox row to write.
#[derive(Debug, Clone)]
pub struct NewDelivery {
    pub id: String,
    pub webhook_id: String,
    pub event: &'static str,
    pub record_id: Option<String>,
    /// The JSON text sent on every attempt.
    pub body: String,
}

/// Which webhooks may still take a delivery when the row is written (the
/// model a write read may be a moment old).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueue {
    /// Record events: only webhooks still switched on and not paused.
    Delivering,
    /// A button press: the button's webhook, whatever its state.
    Existing,
}

/// Writes the rows (skipping any whose webhook is gone from the database,
/// or by `which` no longer takes deliveries) and wakes the deliverer on
/// commit; returns how many were written.
pub async fn enqueue(
    c: &impl GenericClient,
    database_id: &str,
    rows: &[NewDelivery],
    which: Enqueue,
) -> Result<u64, tokio_postgres::Error> {
    if rows.is_empty() {
        return Ok(0);
    }
    let mut ids = Vec::with_capacity(rows.len());
    let mut webhooks = Vec::with_capacity(rows.len());
    let mut events = Vec::with_capacity(rows.len());
    let mut records = Vec::with_capacity(rows.len());
    let mut bodies = Vec::with_capacity(rows.len());
    for r in rows {
        ids.push(r.id.as_str());
        webhooks.push(r.webhook_id.as_str());
        events.push(r.event);
        records.push(r.record_id.as_deref());
        bodies.push(r.body.as_str());
    }
    let delivering = which == Enqueue::Delivering;
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 7] = [
        &database_id,
        &ids,
        &webhooks,
        &events,
        &records,
        &bodies,
        &delivering,
    ];
    // Prepared once per session; the NOTIFY goes with the insert (one
    // round trip). It is delivered only when the transaction commits, and
    // repeats within one transaction are folded.
    let insert = async {
        let statement = c
            .prepare_cached(
                "INSERT INTO deliveries (id, database_id, webhook_id, event, record_id, body)
                 SELECT d.id, $1, d.webhook_id, d.event, d.record_id, d.body
                 FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
                          AS d (id, webhook_id, event, record_id, body)
                 JOIN webhooks w ON w.id = d.webhook_id AND w.database_id = $1
                 WHERE NOT $7 OR (w.is_active AND w.paused_at IS NULL)",
            )
            .await?;
        c.execute(&statement, &params).await
    };
    let notify = async {
        let statement = c.prepare_cached("SELECT pg_notify($1, '')").await?;
        c.execute(&statement, &[&DELIVERIES_CHANNEL]).await
    };
    let (written, notified) = tokio::join!(biased; insert, notify);
    notified?;
    written
}

/// A (webhook id, record id) pair of the match memory.
pub type Match = (String, String);

/// The pairs among `webhook_ids` x `record_ids` that the memory holds.
pub async fn remembered(
    c: &impl GenericClient,
    webhook_ids: &[&str],
    record_ids: &[String],
) -> Result<Vec<Match>, tokio_postgres::Error> {
    let statement = c
        .prepare_cached(
            "SELECT webhook_id, record_id FROM webhook_matches
             WHERE webhook_id = ANY($1::text[]) AND record_id = ANY($2::text[])",
        )
        .await?;
    let rows = c.query(&statement, &[&webhook_ids, &record_ids]).await?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect()
}

fn split(pairs: &[Match]) -> (Vec<&str>, Vec<&str>) {
    pairs.iter().map(|(w, r)| (w.as_str(), r.as_str())).unzip()
}

/// Removes `forget` from the memory and adds `remember`; returns the pairs
/// of `remember` that were not there yet (a concurrent pass may have added
/// one first: that one does not fire twice).
pub async fn update_memory(
    c: &impl GenericClient,
    database_id: &str,
    forget: &[Match],
    remember: &[Match],
) -> Result<Vec<Match>, tokio_postgres::Error> {
    if !forget.is_empty() {
        let (w, r) = split(forget);
        let statement = c
            .prepare_cached(
                "DELETE FROM webhook_matches m
                 USING unnest($1::text[], $2::text[]) AS g (webhook_id, record_id)
                 WHERE m.webhook_id = g.webhook_id AND m.record_id = g.record_id",
            )
            .await?;
        c.execute(&statement, &[&w, &r]).await?;
    }
    if remember.is_empty() {
        return Ok(Vec::new());
    }
    let (w, r) = split(remember);
    let statement = c
        .prepare_cached(
            "INSERT INTO webhook_matches (webhook_id, record_id, database_id)
             SELECT n.webhook_id, n.record_id, $3
             FROM unnest($1::text[], $2::text[]) AS n (webhook_id, record_id)
             WHERE EXISTS (SELECT 1 FROM webhooks w WHERE w.id = n.webhook_id)
             ON CONFLICT DO NOTHING
             RETURNING webhook_id, record_id",
        )
        .await?;
    let rows = c.query(&statement, &[&w, &r, &database_id]).await?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect()
}

/// Removes `record_ids` from the memory of `webhook_ids` (records trashed
/// or purged).
pub async fn forget_records(
    c: &impl GenericClient,
    webhook_ids: &[&str],
    record_ids: &[String],
) -> Result<u64, tokio_postgres::Error> {
    let statement = c
        .prepare_cached(
            "DELETE FROM webhook_matches
             WHERE webhook_id = ANY($1::text[]) AND record_id = ANY($2::text[])",
        )
        .await?;
    c.execute(&statement, &[&webhook_ids, &record_ids]).await
}

/// Removes from the memory of `webhook_ids` every record that is no
/// longer a live record of the real table `qualified` (after a purge of
/// the whole trash).
pub async fn forget_missing(
    c: &impl GenericClient,
    webhook_ids: &[&str],
    qualified: &str,
) -> Result<u64, tokio_postgres::Error> {
    let sql = format!(
        "DELETE FROM webhook_matches m
         WHERE m.webhook_id = ANY($1::text[])
           AND NOT EXISTS (SELECT 1 FROM {qualified} r
                           WHERE r.id = m.record_id AND r.deleted_at IS NULL)"
    );
    c.execute(&sql, &[&webhook_ids]).await
}

/// A `record_matches` webhook the match clock looks at.
#[derive(Debug, Clone)]
pub struct ClockWebhook {
    pub id: String,
    pub database_id: String,
}

/// The switched-on, unpaused `record_matches` webhooks of every database
/// served here (placement `owned` or `moving`) whose match set may move with the clock (conditions naming a
/// relative date) or that have not recorded their first pass yet. The
/// relative-date test is a coarse text match here; the pass decides with
/// the parsed conditions ([`Rule::names_relative_date`]).
pub async fn clock_webhooks(
    c: &impl GenericClient,
) -> Result<Vec<ClockWebhook>, tokio_postgres::Error> {
    let rows = c
        .query(
            "SELECT w.id, w.database_id FROM webhooks w
             JOIN placements pl ON pl.database_id = w.database_id
             WHERE w.trigger_type = 'record_matches' AND w.is_active AND w.paused_at IS NULL
               AND (NOT w.matches_recorded OR strpos(w.conditions::text, '\"relative\"') > 0)
               AND pl.state IN ('owned', 'moving')
             ORDER BY w.database_id, w.id",
            &[],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(ClockWebhook {
                id: r.try_get(0)?,
                database_id: r.try_get(1)?,
            })
        })
        .collect()
}

/// Locks one webhook for a batch of a clock pass (`FOR UPDATE SKIP
/// LOCKED`: another node's pass, or a change being saved, holds it: skip
/// it this time) and reads where the batch starts (`match_cursor`, see
/// `catalog::match_sweep`). `None` when it is locked, gone, switched off
/// or paused.
pub async fn lock_for_pass(
    c: &impl GenericClient,
    webhook_id: &str,
) -> Result<Option<Option<String>>, tokio_postgres::Error> {
    let row = c
        .query_opt(
            "SELECT match_cursor FROM webhooks
             WHERE id = $1 AND trigger_type = 'record_matches' AND is_active
               AND paused_at IS NULL
             FOR UPDATE SKIP LOCKED",
            &[&webhook_id],
        )
        .await?;
    row.map(|r| r.try_get(0)).transpose()
}

/// Marks the first pass done (the memory now holds what matches).
pub async fn set_matches_recorded(
    c: &impl GenericClient,
    webhook_id: &str,
) -> Result<(), tokio_postgres::Error> {
    c.execute(
        "UPDATE webhooks SET matches_recorded = true WHERE id = $1",
        &[&webhook_id],
    )
    .await?;
    Ok(())
}
