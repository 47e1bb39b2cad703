//! Attachment cells as a reply shows them (part A): the stored `att_` ids
//! become `{id, filename, size_bytes, content_type, url, thumb_url,
//! card_url}` in the stored order, from one registry query per reply
//! (every id of every record on it) with links signed by `Links::sign`;
//! a webhook payload carries `{id, url, filename, size_bytes,
//! content_type}` (part C). An id whose registry row is gone is left out;
//! a cell left with nothing reads null ("unset cells read null").

use std::collections::HashMap;
use std::time::SystemTime;

use deadpool_postgres::GenericClient;
use serde_json::{json, Value};

use super::links::Links;
use crate::catalog::attachments::{self, Attachment};
use crate::error::ApiResult;
use crate::records::reply::{Post, ReadField};
use crate::records::store::StoredRecord;

/// Which object an id becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A record read or write reply: every key with the three links.
    Reply,
    /// A webhook payload: `id, url, filename, size_bytes, content_type`.
    Payload,
}

/// The registry rows and signed links of the ids a reply shows.
#[derive(Debug, Default)]
pub struct Shown {
    by_id: HashMap<String, (Attachment, super::links::Signed)>,
}

impl Shown {
    /// Looks `ids` up (one query) and signs their links as of now.
    pub async fn lookup(
        c: &impl GenericClient,
        links: &Links,
        database_id: &str,
        ids: &[&str],
    ) -> ApiResult<Shown> {
        let mut wanted: Vec<&str> = ids.to_vec();
        wanted.sort_unstable();
        wanted.dedup();
        let rows = attachments::by_ids(c, database_id, &wanted).await?;
        let now = SystemTime::now();
        let mut by_id = HashMap::with_capacity(rows.len());
        for a in rows {
            let signed = links.sign(&a, now).await?;
            by_id.insert(a.id.clone(), (a, signed));
        }
        Ok(Shown { by_id })
    }

    /// One attachment's object, if its row is there.
    pub fn object(&self, id: &str, style: Style) -> Option<Value> {
        let (a, s) = self.by_id.get(id)?;
        Some(match style {
            Style::Reply => json!({
                "id": a.id,
                "filename": a.filename,
                "size_bytes": a.size_bytes,
                "content_type": a.content_type,
                "url": s.url,
                "thumb_url": s.thumb_url,
                "card_url": s.card_url,
            }),
            Style::Payload => json!({
                "id": a.id,
                "url": s.url,
                "filename": a.filename,
                "size_bytes": a.size_bytes,
                "content_type": a.content_type,
            }),
        })
    }

    /// The cell of stored `ids`: their objects in order, null when none is
    /// left.
    pub fn cell<'a>(&self, ids: impl IntoIterator<Item = &'a str>, style: Style) -> Value {
        let list: Vec<Value> = ids
            .into_iter()
            .filter_map(|id| self.object(id, style))
            .collect();
        if list.is_empty() {
            Value::Null
        } else {
            Value::Array(list)
        }
    }

    /// A read cell (`[ids]`, null, or already shown objects, which are kept
    /// as they are) as shown.
    pub fn value(&self, cell: &Value, style: Style) -> Value {
        match cell {
            Value::Array(items) if items.iter().all(Value::is_string) => {
                self.cell(items.iter().filter_map(Value::as_str), style)
            }
            Value::Array(items) if items.is_empty() => Value::Null,
            Value::Array(_) => cell.clone(),
            _ => Value::Null,
        }
    }
}

/// Indexes of the attachment fields among `fields`.
pub fn attachment_fields(fields: &[ReadField]) -> Vec<usize> {
    fields
        .iter()
        .enumerate()
        .filter(|(_, f)| matches!(f.post, Post::Attachments))
        .map(|(i, _)| i)
        .collect()
}

/// Every stored id in the attachment cells of `records`.
fn ids_in<'a>(records: &'a [StoredRecord], at: &[usize]) -> Vec<&'a str> {
    let mut out = Vec::new();
    for r in records {
        for &i in at {
            if let Some(Some(Value::Array(items))) = r.cells.get(i) {
                out.extend(items.iter().filter_map(Value::as_str));
            }
        }
    }
    out
}

/// Replaces the attachment cells of `records` (read with `fields`) by
/// their shown form: one registry query for all of them.
pub async fn expand(
    c: &impl GenericClient,
    links: &Links,
    database_id: &str,
    fields: &[ReadField],
    records: &mut [StoredRecord],
    style: Style,
) -> ApiResult<()> {
    let at = attachment_fields(fields);
    if at.is_empty() || records.is_empty() {
        return Ok(());
    }
    let shown = {
        let ids = ids_in(records, &at);
        Shown::lookup(c, links, database_id, &ids).await?
    };
    for r in records.iter_mut() {
        for &i in &at {
            if let Some(cell) = r.cells.get_mut(i) {
                let v = shown.value(cell.as_ref().unwrap_or(&Value::Null), style);
                *cell = Some(v);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_unknown_cells_read_null_and_objects_are_kept() {
        let shown = Shown::default();
        assert_eq!(
            shown.value(&json!(["att_AAAAAbcdefgh"]), Style::Reply),
            Value::Null
        );
        assert_eq!(shown.value(&json!([]), Style::Reply), Value::Null);
        assert_eq!(shown.value(&Value::Null, Style::Payload), Value::Null);
        let done = json!([{"id": "att_AAAAAbcdefgh"}]);
        assert_eq!(shown.value(&done, Style::Payload), done);
    }
}
