//! The one place record writes hand their events to webhooks. Every write
//! path (create, update, upsert, trash, restore) calls [`record_events`]
//! inside its transaction, after the rows are written and before commit, so
//! deliveries (the outbox) commit or roll back with the change.

use deadpool_postgres::GenericClient;

use super::table::RecordTable;
use crate::error::ApiResult;

/// Part C: a write of this many records or more enqueues no deliveries.
pub const NO_DELIVERIES_FROM: usize = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordEvent {
    Created,
    Updated,
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
}

/// Enqueues the deliveries for `record_ids` (the webhooks issue fills this
/// in: match the table's webhooks, evaluate conditions and watched fields
/// against the records as read in `tx`, insert delivery rows). `batch_len`
/// is the number of records the request wrote.
pub async fn record_events(
    _tx: &impl GenericClient,
    _table: &RecordTable,
    event: RecordEvent,
    record_ids: &[String],
    batch_len: usize,
) -> ApiResult<()> {
    if batch_len >= NO_DELIVERIES_FROM || record_ids.is_empty() {
        return Ok(());
    }
    tracing::trace!(
        event = event.name(),
        count = record_ids.len(),
        "record events"
    );
    Ok(())
}

/// Enqueues the one `button.pressed` delivery of a webhook button (the
/// webhooks issue fills this in like [`record_events`]: the full record in
/// `after`, `trigger: 'button'`, `button: {field_id, label}`, `pressed_by`,
/// `pressed_at`; written in `tx`).
pub async fn button_pressed(
    _tx: &impl GenericClient,
    _table: &RecordTable,
    field_id: &str,
    record_id: &str,
    webhook_id: &str,
    pressed_by: &str,
) -> ApiResult<()> {
    tracing::trace!(
        event = "button.pressed",
        field_id,
        record_id,
        webhook_id,
        pressed_by,
        "button event"
    );
    Ok(())
}
