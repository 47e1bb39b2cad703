//! The `deliveries` outbox as the deliverer and the delivery routes use it:
//! claiming due rows under a lease, recording attempts (and the webhook's
//! streak, last status and auto-pause), the delivery log, replays and
//! pruning. Rows are written by record writes (`webhooks::outbox`).
//!
//! A row is due while `finished_at` is NULL and `due_at` has passed.
//! Claiming moves `due_at` past the attempt's timeout (the lease) and counts
//! the attempt, in one short statement: no transaction is held while the
//! request is out, and a node that dies mid-attempt leaves the row due
//! again when the lease runs out.

use std::time::Duration;

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;
use tokio_postgres::Row;

use super::webhooks::SigningSecret;

/// Channel a write that enqueues deliveries notifies, so the deliverer
/// wakes at once rather than on its next tick.
pub const CHANNEL: &str = "webhook_deliveries";

/// Part C: 20 consecutive exhausted deliveries pause a webhook.
pub const AUTO_PAUSE_AFTER: i32 = 20;

/// One row of the delivery log, as `GET /api/webhooks/{id}/deliveries`
/// shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Delivery {
    pub id: String,
    /// The same as `id`: the `delivery_id` of the payload and header.
    pub delivery_id: String,
    pub webhook_id: String,
    pub event: String,
    pub record_id: Option<String>,
    /// `pending` (more attempts to come), `succeeded` or `failed` (exhausted).
    pub state: String,
    /// Attempts made so far (counted when one starts).
    pub attempts: i32,
    /// HTTP status of the last attempt; 0 when it got no reply; null before
    /// the first attempt.
    pub status: Option<i32>,
    pub duration_ms: Option<i32>,
    /// First 4000 characters of the last reply body.
    pub response_body: Option<String>,
    /// Why the last attempt failed; null when it succeeded.
    pub error: Option<String>,
    #[serde(serialize_with = "crate::json::ts")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::json::ts_opt")]
    pub last_attempt_at: Option<DateTime<Utc>>,
    /// When the next attempt is due; null once finished.
    #[serde(serialize_with = "crate::json::ts_opt")]
    pub next_attempt_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "crate::json::ts_opt")]
    pub finished_at: Option<DateTime<Utc>>,
    /// The delivery this one replays.
    pub replay_of: Option<String>,
    #[serde(skip)]
    pub body: String,
}

const LOG_COLUMNS: &str = "id, webhook_id, event, record_id, state, attempts, last_status, \
     last_duration_ms, last_response_body, last_error, created_at, last_attempt_at, due_at, \
     finished_at, replay_of";

fn log_row(row: &Row, body: String) -> Result<Delivery, tokio_postgres::Error> {
    let id: String = row.try_get("id")?;
    let finished_at: Option<DateTime<Utc>> = row.try_get("finished_at")?;
    let due_at: DateTime<Utc> = row.try_get("due_at")?;
    Ok(Delivery {
        delivery_id: id.clone(),
        id,
        webhook_id: row.try_get("webhook_id")?,
        event: row.try_get("event")?,
        record_id: row.try_get("record_id")?,
        state: row.try_get("state")?,
        attempts: row.try_get("attempts")?,
        status: row.try_get("last_status")?,
        duration_ms: row.try_get("last_duration_ms")?,
        response_body: row.try_get("last_response_body")?,
        error: row.try_get("last_error")?,
        created_at: row.try_get("created_at")?,
        last_attempt_at: row.try_get("last_attempt_at")?,
        next_attempt_at: finished_at.is_none().then_some(due_at),
        finished_at,
        replay_of: row.try_get("replay_of")?,
        body,
    })
}

/// The webhook's `limit` most recent deliveries, newest first.
pub async fn recent(
    c: &impl GenericClient,
    webhook_id: &str,
    limit: i64,
) -> Result<Vec<Delivery>, tokio_postgres::Error> {
    let sql = format!(
        "SELECT {LOG_COLUMNS} FROM deliveries WHERE webhook_id = $1
         ORDER BY created_at DESC, id DESC LIMIT $2"
    );
    let rows = c.query(&sql, &[&webhook_id, &limit]).await?;
    rows.iter().map(|r| log_row(r, String::new())).collect()
}

/// One delivery of the webhook, with the body it sends.
pub async fn get(
    c: &impl GenericClient,
    webhook_id: &str,
    id: &str,
) -> Result<Option<Delivery>, tokio_postgres::Error> {
    let sql =
        format!("SELECT {LOG_COLUMNS}, body FROM deliveries WHERE id = $1 AND webhook_id = $2");
    let row = c.query_opt(&sql, &[&id, &webhook_id]).await?;
    row.map(|r| {
        let body = r.try_get("body")?;
        log_row(&r, body)
    })
    .transpose()
}

/// A delivery to enqueue, due now.
pub struct NewDelivery<'a> {
    pub id: &'a str,
    pub database_id: &'a str,
    pub webhook_id: &'a str,
    pub event: &'a str,
    pub record_id: Option<&'a str>,
    pub body: &'a str,
    pub replay_of: Option<&'a str>,
}

pub async fn insert(
    c: &impl GenericClient,
    new: &NewDelivery<'_>,
) -> Result<Delivery, tokio_postgres::Error> {
    let sql = format!(
        "INSERT INTO deliveries (id, database_id, webhook_id, event, record_id, body, replay_of)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         RETURNING {LOG_COLUMNS}"
    );
    let row = c
        .query_one(
            &sql,
            &[
                &new.id,
                &new.database_id,
                &new.webhook_id,
                &new.event,
                &new.record_id,
                &new.body,
                &new.replay_of,
            ],
        )
        .await?;
    log_row(&row, new.body.to_owned())
}

/// Wakes the deliverer when the transaction commits.
pub async fn notify(c: &impl GenericClient) -> Result<(), tokio_postgres::Error> {
    c.execute("SELECT pg_notify($1, '')", &[&CHANNEL]).await?;
    Ok(())
}

/// A row the deliverer claimed: what its attempt sends.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub id: String,
    pub webhook_id: String,
    pub database_id: String,
    /// This attempt's number, from 1.
    pub attempt: i32,
    pub body: String,
    pub url: String,
    /// The webhook's secret now (a regenerated secret signs at once).
    pub secret: SigningSecret,
}

/// How many rows a claim may take, and for whom.
#[derive(Debug, Clone, Default)]
pub struct ClaimLimits {
    /// Rows to claim at most (free attempt slots of the node).
    pub rows: i64,
    /// Attempts each webhook may have in flight at once.
    pub per_webhook: i32,
    /// Webhooks with attempts in flight on this node, and how many.
    pub busy_webhooks: Vec<String>,
    pub busy_counts: Vec<i32>,
    /// Attempts a database not listed in `databases` may start now.
    pub per_database: i32,
    /// Databases with attempts counted on this node, and how many each may
    /// still start now (in flight and per minute: `webhooks::fairness`).
    pub databases: Vec<String>,
    pub database_rooms: Vec<i32>,
    /// How long the claim holds a row: the attempt's timeout and a margin.
    pub lease: Duration,
}

/// The webhooks with unfinished deliveries, each with its database and
/// earliest `due_at` (`ready.first_due`), as long as it is active and
/// unpaused and its database is served here (placement `owned` or
/// `moving`): a skip scan over `deliveries_webhook_due`, a few index
/// probes per webhook whatever its backlog.
const READY_WEBHOOKS: &str = "
    pending(webhook_id) AS (
        (SELECT webhook_id FROM deliveries WHERE finished_at IS NULL
         ORDER BY webhook_id LIMIT 1)
        UNION ALL
        SELECT (SELECT d.webhook_id FROM deliveries d
                WHERE d.finished_at IS NULL AND d.webhook_id > p.webhook_id
                ORDER BY d.webhook_id LIMIT 1)
        FROM pending p WHERE p.webhook_id IS NOT NULL
    ), ready AS (
        SELECT w.id, w.database_id, first.due_at AS first_due
        FROM pending p
        JOIN webhooks w ON w.id = p.webhook_id
        JOIN placements pl ON pl.database_id = w.database_id AND pl.state IN ('owned', 'moving')
        CROSS JOIN LATERAL (
            SELECT d.due_at FROM deliveries d
            WHERE d.webhook_id = w.id AND d.finished_at IS NULL
            ORDER BY d.due_at LIMIT 1
        ) AS first
        WHERE w.is_active AND w.paused_at IS NULL
    )";

/// A condition on a `deliveries` row `d` that takes the write fence
/// ([`super::placements::fence`]) for it inside the statement: its
/// database is served here, and its placement stays `FOR KEY SHARE` locked
/// until the statement's transaction ends, so the control plane's fence
/// waits for the write and a write after the fence skips the row.
const SERVED_FOR_KEY_SHARE: &str = "EXISTS (
        SELECT 1 FROM placements pl
        WHERE pl.database_id = d.database_id AND pl.state IN ('owned', 'moving')
        FOR KEY SHARE)";

/// Claims due rows of active, unpaused webhooks of the databases served
/// here, at most `limits.rows`, fairly between databases: each database
/// takes at most what it may still start (`limits.per_database` or its
/// entry in `limits.databases`; a database with no room is left out and
/// its rows stay due, their attempts uncounted), and the rows go round
/// robin over the databases (every database's most overdue row, then
/// every database's second...), so one database's backlog or its many
/// webhooks never hold up another's. Within a database, the webhooks whose
/// earliest row is the most overdue go first, each kept within
/// `limits.per_webhook` attempts in flight (webhooks already at it are
/// skipped). Rows another claim holds are skipped.
pub async fn claim(
    c: &impl GenericClient,
    limits: &ClaimLimits,
) -> Result<Vec<Claimed>, tokio_postgres::Error> {
    let lease_ms = i64::try_from(limits.lease.as_millis()).unwrap_or(i64::MAX);
    let statement = c
        .prepare_cached(&format!(
            "WITH RECURSIVE {READY_WEBHOOKS}, open AS (
                 SELECT r.id, r.database_id, r.first_due,
                        $3 - coalesce(b.held, 0) AS room,
                        coalesce(s.room, $6) AS database_room,
                        row_number() OVER (PARTITION BY r.database_id
                                           ORDER BY r.first_due, r.id) AS turn
                 FROM ready r
                 LEFT JOIN unnest($1::text[], $2::int4[]) AS b(webhook_id, held)
                        ON b.webhook_id = r.id
                 LEFT JOIN unnest($7::text[], $8::int4[]) AS s(database_id, room)
                        ON s.database_id = r.database_id
                 WHERE r.first_due <= now() AND coalesce(b.held, 0) < $3
                   AND coalesce(s.room, $6) > 0
             ), picked AS (
                 SELECT * FROM open WHERE turn <= database_room
                 ORDER BY turn, first_due
                 LIMIT $4
             ), locked AS (
                 SELECT c.id, c.due_at, o.database_room,
                        row_number() OVER (PARTITION BY o.database_id
                                           ORDER BY c.due_at, c.id) AS turn
                 FROM picked o
                 CROSS JOIN LATERAL (
                     SELECT d.id, d.due_at FROM deliveries d
                     WHERE d.webhook_id = o.id AND d.finished_at IS NULL AND d.due_at <= now()
                     ORDER BY d.due_at
                     LIMIT least(o.room, o.database_room)
                     FOR UPDATE SKIP LOCKED
                 ) AS c
             ), chosen AS (
                 SELECT id FROM locked WHERE turn <= database_room
                 ORDER BY turn, due_at
                 LIMIT $4
             )
             UPDATE deliveries d
             SET due_at = now() + $5::int8 * interval '1 millisecond', attempts = d.attempts + 1
             FROM chosen, webhooks w
             WHERE d.id = chosen.id AND w.id = d.webhook_id AND {SERVED_FOR_KEY_SHARE}
             RETURNING d.id, d.webhook_id, d.database_id, d.attempts, d.body, w.url, w.secret"
        ))
        .await?;
    let rows = c
        .query(
            &statement,
            &[
                &limits.busy_webhooks,
                &limits.busy_counts,
                &limits.per_webhook,
                &limits.rows,
                &lease_ms,
                &limits.per_database,
                &limits.databases,
                &limits.database_rooms,
            ],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(Claimed {
                id: r.try_get(0)?,
                webhook_id: r.try_get(1)?,
                database_id: r.try_get(2)?,
                attempt: r.try_get(3)?,
                body: r.try_get(4)?,
                url: r.try_get(5)?,
                secret: SigningSecret(r.try_get(6)?),
            })
        })
        .collect()
}

/// When the next row of an active, unpaused webhook falls due (in-flight
/// rows count at their lease's end; a webhook whose earliest row is due
/// already waits for its attempts in flight, not for a time); `None` when
/// nothing is waiting.
pub async fn next_due(
    c: &impl GenericClient,
) -> Result<Option<DateTime<Utc>>, tokio_postgres::Error> {
    let statement = c
        .prepare_cached(&format!(
            "WITH RECURSIVE {READY_WEBHOOKS}
             SELECT min(first_due) FROM ready WHERE first_due > now()"
        ))
        .await?;
    let row = c.query_one(&statement, &[]).await?;
    row.try_get(0)
}

/// Where an attempt leaves its delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    Succeeded,
    /// Failed with retries left: due again after this long.
    RetryIn(Duration),
    /// Failed and out of retries: counts toward the webhook's streak.
    Exhausted,
}

/// One finished attempt, to record.
#[derive(Debug, Clone)]
pub struct Attempted {
    pub id: String,
    pub webhook_id: String,
    pub attempt: i32,
    pub after: After,
    pub started_at: DateTime<Utc>,
    /// 0 for no reply.
    pub status: i32,
    pub duration_ms: i32,
    pub response_body: String,
    pub error: Option<String>,
}

/// Records finished attempts on their deliveries (an attempt whose row was
/// claimed again meanwhile, after its lease ran out, is ignored, and so is
/// one whose database is no longer served here: fenced for a move's
/// cutover, or moved away), then on their webhooks: last status and
/// attempt time, the streak of exhausted deliveries (a success resets it),
/// and the auto-pause at [`AUTO_PAUSE_AFTER`]. Returns the databases of
/// webhooks paused now: the caller bumps their `schema_version` in the
/// same transaction, so writes stop enqueueing for them.
pub async fn record_attempts(
    c: &impl GenericClient,
    done: &[Attempted],
) -> Result<Vec<String>, tokio_postgres::Error> {
    let mut ids = Vec::with_capacity(done.len());
    let mut attempts = Vec::with_capacity(done.len());
    let mut states = Vec::with_capacity(done.len());
    let mut retry_ms = Vec::with_capacity(done.len());
    let mut started = Vec::with_capacity(done.len());
    let mut statuses = Vec::with_capacity(done.len());
    let mut durations = Vec::with_capacity(done.len());
    let mut bodies = Vec::with_capacity(done.len());
    let mut errors = Vec::with_capacity(done.len());
    for a in done {
        ids.push(a.id.as_str());
        attempts.push(a.attempt);
        let (state, wait) = match a.after {
            After::Succeeded => ("succeeded", 0),
            After::RetryIn(d) => ("pending", i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
            After::Exhausted => ("failed", 0),
        };
        states.push(state);
        retry_ms.push(wait);
        started.push(a.started_at);
        statuses.push(a.status);
        durations.push(a.duration_ms);
        bodies.push(a.response_body.as_str());
        errors.push(a.error.as_deref());
    }
    // Attempts claimed before a move still record their results while the
    // database is `moving` (the move replicates them). Once it is fenced
    // they are dropped: the row stays leased as the target received it and
    // is claimed and sent again there when the lease ends, so delivery is
    // at least once, never lost.
    let statement = c
        .prepare_cached(&format!(
            "UPDATE deliveries d SET
                 state = r.state,
                 finished_at = CASE WHEN r.state = 'pending' THEN NULL ELSE now() END,
                 due_at = CASE WHEN r.state = 'pending'
                               THEN now() + r.retry_ms * interval '1 millisecond'
                               ELSE d.due_at END,
                 last_attempt_at = r.started_at,
                 last_status = r.status,
                 last_duration_ms = r.duration_ms,
                 last_response_body = r.body,
                 last_error = r.error
             FROM unnest($1::text[], $2::int4[], $3::text[], $4::int8[], $5::timestamptz[],
                         $6::int4[], $7::int4[], $8::text[], $9::text[])
                  AS r(id, attempt, state, retry_ms, started_at, status, duration_ms, body, error)
             WHERE d.id = r.id AND d.attempts = r.attempt AND d.finished_at IS NULL
               AND {SERVED_FOR_KEY_SHARE}
             RETURNING d.id"
        ))
        .await?;
    let recorded: std::collections::HashSet<String> = c
        .query(
            &statement,
            &[
                &ids, &attempts, &states, &retry_ms, &started, &statuses, &durations, &bodies,
                &errors,
            ],
        )
        .await?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()?;
    let streaks = streaks(done.iter().filter(|a| recorded.contains(&a.id)));
    if streaks.is_empty() {
        return Ok(Vec::new());
    }
    let webhook_ids: Vec<&str> = streaks.iter().map(|s| s.webhook_id.as_str()).collect();
    let resets: Vec<bool> = streaks.iter().map(|s| s.reset).collect();
    let adds: Vec<i32> = streaks.iter().map(|s| s.add).collect();
    let last_status: Vec<i32> = streaks.iter().map(|s| s.last_status).collect();
    let last_at: Vec<DateTime<Utc>> = streaks.iter().map(|s| s.last_attempt_at).collect();
    let statement = c
        .prepare_cached(
            "UPDATE webhooks w SET
                 consecutive_failures = CASE WHEN r.reset THEN r.add
                                             ELSE w.consecutive_failures + r.add END,
                 last_status = r.last_status,
                 last_attempt_at = r.last_attempt_at,
                 paused_at = CASE
                     WHEN w.paused_at IS NULL
                      AND (CASE WHEN r.reset THEN r.add
                                ELSE w.consecutive_failures + r.add END) >= $6
                     THEN now() ELSE w.paused_at END
             FROM unnest($1::text[], $2::bool[], $3::int4[], $4::int4[], $5::timestamptz[])
                  AS r(id, reset, add, last_status, last_attempt_at),
                  (SELECT id, paused_at IS NULL AS running FROM webhooks
                   WHERE id = ANY($1::text[]) ORDER BY id FOR NO KEY UPDATE) AS before
             WHERE w.id = r.id AND before.id = r.id
             RETURNING w.database_id, before.running AND w.paused_at IS NOT NULL",
        )
        .await?;
    let paused = c
        .query(
            &statement,
            &[
                &webhook_ids,
                &resets,
                &adds,
                &last_status,
                &last_at,
                &AUTO_PAUSE_AFTER,
            ],
        )
        .await?;
    let mut databases = Vec::new();
    for row in &paused {
        if row.try_get::<_, bool>(1)? {
            databases.push(row.try_get(0)?);
        }
    }
    Ok(databases)
}

/// What a batch of attempts does to one webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Streak {
    webhook_id: String,
    /// A delivery succeeded: the streak restarts from `add`.
    reset: bool,
    /// Exhausted deliveries to add (after the last success, when `reset`).
    add: i32,
    last_status: i32,
    last_attempt_at: DateTime<Utc>,
}

/// Folds attempts, in the order they finished, into one [`Streak`] per
/// webhook.
fn streaks<'a>(done: impl Iterator<Item = &'a Attempted>) -> Vec<Streak> {
    let mut out: Vec<Streak> = Vec::new();
    for a in done {
        let i = match out.iter().position(|s| s.webhook_id == a.webhook_id) {
            Some(i) => i,
            None => {
                out.push(Streak {
                    webhook_id: a.webhook_id.clone(),
                    reset: false,
                    add: 0,
                    last_status: a.status,
                    last_attempt_at: a.started_at,
                });
                out.len() - 1
            }
        };
        let s = &mut out[i];
        match a.after {
            After::Succeeded => {
                s.reset = true;
                s.add = 0;
            }
            After::Exhausted => s.add += 1,
            After::RetryIn(_) => {}
        }
        if a.started_at >= s.last_attempt_at {
            s.last_status = a.status;
            s.last_attempt_at = a.started_at;
        }
    }
    out
}

/// Deletes finished deliveries created before `cutoff`, keeping each
/// webhook's `keep` most recent whatever their age, in the databases
/// served here. One statement per webhook with something to prune.
/// Returns how many rows went.
pub async fn prune(
    c: &impl GenericClient,
    cutoff: DateTime<Utc>,
    keep: i64,
) -> Result<u64, tokio_postgres::Error> {
    let webhooks = c
        .query(
            "SELECT DISTINCT d.webhook_id FROM deliveries d
             JOIN placements pl ON pl.database_id = d.database_id
             WHERE d.finished_at IS NOT NULL AND d.created_at < $1
               AND pl.state IN ('owned', 'moving')",
            &[&cutoff],
        )
        .await?;
    let mut removed = 0;
    for row in &webhooks {
        let webhook_id: String = row.try_get(0)?;
        removed += c
            .execute(
                &format!(
                    "DELETE FROM deliveries d
                     WHERE d.webhook_id = $1 AND d.finished_at IS NOT NULL
                       AND d.created_at < $2
                       AND d.id NOT IN (SELECT id FROM deliveries WHERE webhook_id = $1
                                        ORDER BY created_at DESC, id DESC LIMIT $3)
                       AND {SERVED_FOR_KEY_SHARE}"
                ),
                &[&webhook_id, &cutoff, &keep],
            )
            .await?;
    }
    Ok(removed)
}

/// Deliveries not finished yet (over the `deliveries_due` partial index).
pub async fn pending_count(client: &impl GenericClient) -> Result<i64, tokio_postgres::Error> {
    let row = client
        .query_one(
            "SELECT count(*) FROM deliveries WHERE finished_at IS NULL",
            &[],
        )
        .await?;
    row.try_get(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn attempted(webhook: &str, after: After, status: i32, second: u32) -> Attempted {
        Attempted {
            id: format!("dlv_{second}"),
            webhook_id: webhook.into(),
            attempt: 1,
            after,
            started_at: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, second).unwrap(),
            status,
            duration_ms: 1,
            response_body: String::new(),
            error: None,
        }
    }

    #[test]
    fn a_success_resets_the_streak_and_later_exhaustions_count() {
        let retry = After::RetryIn(Duration::from_secs(1));
        let done = [
            attempted("whk_a", After::Exhausted, 500, 1),
            attempted("whk_b", After::Exhausted, 0, 2),
            attempted("whk_a", After::Succeeded, 200, 3),
            attempted("whk_a", After::Exhausted, 503, 4),
            attempted("whk_a", retry, 500, 5),
            attempted("whk_b", After::Exhausted, 404, 6),
        ];
        let s = streaks(done.iter());
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].webhook_id, "whk_a");
        assert!(s[0].reset);
        assert_eq!(s[0].add, 1);
        assert_eq!(s[0].last_status, 500);
        assert_eq!(s[1].webhook_id, "whk_b");
        assert!(!s[1].reset);
        assert_eq!(s[1].add, 2);
        assert_eq!(s[1].last_status, 404);
    }

    #[test]
    fn retries_leave_the_streak_alone() {
        let retry = After::RetryIn(Duration::from_secs(1));
        let s = streaks([attempted("whk_a", retry, 500, 1)].iter());
        assert!(!s[0].reset);
        assert_eq!(s[0].add, 0);
    }
}
