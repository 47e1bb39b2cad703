//! Attachment cells of a record write, inside its transaction (part B
//! "Attachments" and "Attachment URLs in cells"): each cell's items become
//! the `att_` ids its column stores.
//!
//! * An id is accepted only for the exact table, field and record it was
//!   uploaded to (registry binding), never on create; it is marked placed.
//! * A fetched URL is registered here (placed, bound to the record) and
//!   its bytes charged against the database's ceiling.
//! * PATCH replaces the list: ids dropped from the cell lose their registry
//!   row (the garbage trigger queues their bytes for the sweeper). PUT on a
//!   matched record appends to the stored list.

use std::collections::{HashMap, HashSet};

use deadpool_postgres::GenericClient;
use serde_json::Value;

use super::fetch::Fetched;
use super::items::Item;
use super::settings::quota_text;
use crate::catalog::attachments::{self, NewAttachment};
use crate::error::{ApiError, ApiResult};
use crate::records::cells::write::Prepared;
use crate::records::store;
use crate::records::write::Ctx;
use crate::tenant_schema;

/// How a write treats the attachment cells it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A new record: ids refused (the record must exist before upload).
    Create,
    /// PATCH: the cell becomes the list written.
    Replace,
    /// PUT on a matched record: the list written is appended.
    Append,
}

fn at(index: usize, message: String) -> ApiError {
    ApiError::bad_request(format!("records[{index}]: {message}"))
}

/// The final ids of one cell: `stored` (when appending) then `written`,
/// each id once, in order.
pub fn merged(stored: &[String], written: &[String]) -> Vec<String> {
    let mut seen: HashSet<&str> = HashSet::new();
    stored
        .iter()
        .chain(written)
        .filter(|id| seen.insert(id.as_str()))
        .cloned()
        .collect()
}

/// Ids of `stored` not in `kept` (dropped by a replacing write).
pub fn dropped<'a>(stored: &'a [String], kept: &[String]) -> Vec<&'a str> {
    stored
        .iter()
        .filter(|id| !kept.contains(id))
        .map(String::as_str)
        .collect()
}

/// The stored attachment cells of `ids` for `field_ids`:
/// record -> field -> ids.
async fn stored_cells(
    c: &impl GenericClient,
    ctx: &Ctx,
    field_ids: &[&str],
    ids: &[String],
) -> ApiResult<HashMap<String, HashMap<String, Vec<String>>>> {
    let exprs: Vec<String> = field_ids
        .iter()
        .map(|f| tenant_schema::column(f).map(|col| format!("to_jsonb(\"r\".{col})")))
        .collect::<Result<_, _>>()?;
    let rows = store::by_ids(c, &ctx.record_table, &exprs, &[], ids).await?;
    let mut out: HashMap<String, HashMap<String, Vec<String>>> = HashMap::new();
    for r in rows {
        let cells = out.entry(r.id.clone()).or_default();
        for (f, cell) in field_ids.iter().zip(r.cells) {
            let ids: Vec<String> = match cell {
                Some(Value::Array(items)) => items
                    .into_iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect(),
                _ => Vec::new(),
            };
            cells.insert((*f).to_owned(), ids);
        }
    }
    Ok(out)
}

/// Turns the attachment items of `rows` (record id, prepared cells) into
/// the column values they write, registering fetched files and checking,
/// placing and dropping ids as `mode` says. Run inside the write's
/// transaction, before the rows are written.
pub async fn settle(
    c: &impl GenericClient,
    ctx: &Ctx,
    user_id: &str,
    rows: &mut [(String, Prepared)],
    mode: Mode,
    fetched: &Fetched,
) -> ApiResult<()> {
    if rows.iter().all(|(_, p)| p.attachments.is_empty()) {
        return Ok(());
    }
    let table = ctx.table()?;
    let database_id = ctx.record_table.database_id.as_str();
    let name = |fid: &str| {
        table
            .field(fid)
            .map(|f| f.name.clone())
            .unwrap_or_else(|| fid.to_owned())
    };

    // Ids written: refused on create; else bound to this very cell.
    let mut written: Vec<String> = Vec::new();
    for (_, p) in rows.iter() {
        for (fid, items) in &p.attachments {
            for item in items {
                if let Item::Id(id) = item {
                    if mode == Mode::Create {
                        return Err(at(
                            p.index,
                            format!(
                                "Field '{}' cannot take {id} on a new record: upload files to a record that exists (then write their ids), or give URLs.",
                                name(fid)
                            ),
                        ));
                    }
                    written.push(id.clone());
                }
            }
        }
    }
    let written_refs: Vec<&str> = written.iter().map(String::as_str).collect();
    let registry: HashMap<String, attachments::Attachment> =
        attachments::by_ids(c, database_id, &written_refs)
            .await?
            .into_iter()
            .map(|a| (a.id.clone(), a))
            .collect();
    for (rid, p) in rows.iter() {
        for (fid, items) in &p.attachments {
            for item in items {
                let Item::Id(id) = item else { continue };
                let bound = registry.get(id).is_some_and(|a| {
                    a.table_id == table.id && a.field_id == *fid && a.record_id == *rid
                });
                if !bound {
                    return Err(at(
                        p.index,
                        format!(
                            "Field '{}' cannot hold {id}: an attachment id may be written only into the table, field and record it was uploaded to.",
                            name(fid)
                        ),
                    ));
                }
            }
        }
    }

    // What the cells hold now (replacing drops, appending keeps).
    let stored = if mode == Mode::Create {
        HashMap::new()
    } else {
        let mut fields: Vec<&str> = rows
            .iter()
            .flat_map(|(_, p)| p.attachments.iter().map(|(f, _)| f.as_str()))
            .collect();
        fields.sort_unstable();
        fields.dedup();
        let ids: Vec<String> = rows
            .iter()
            .filter(|(_, p)| !p.attachments.is_empty())
            .map(|(id, _)| id.clone())
            .collect();
        stored_cells(c, ctx, &fields, &ids).await?
    };

    let mut charged: i64 = 0;
    let mut to_drop: Vec<String> = Vec::new();
    for (rid, p) in rows.iter_mut() {
        let index = p.index;
        for (fid, items) in std::mem::take(&mut p.attachments) {
            let mut ids: Vec<String> = Vec::with_capacity(items.len());
            for item in &items {
                match item {
                    Item::Id(id) => ids.push(id.clone()),
                    Item::Url { pos, url, .. } => {
                        let file = fetched.get(index, &fid, *pos).ok_or_else(|| {
                            at(
                                index,
                                format!(
                                    "Field '{}' changed while {url} was fetched; nothing was written. Retry the write.",
                                    name(&fid)
                                ),
                            )
                        })?;
                        attachments::insert(
                            c,
                            &NewAttachment {
                                id: &file.id,
                                database_id,
                                table_id: &table.id,
                                field_id: &fid,
                                record_id: rid,
                                filename: &file.filename,
                                size_bytes: file.size_bytes,
                                content_type: &file.content_type,
                                thumbnails: file.thumbnails,
                                placed: true,
                                created_by: user_id,
                            },
                        )
                        .await?;
                        charged += file.size_bytes;
                        ids.push(file.id.clone());
                    }
                }
            }
            let before: &[String] = stored
                .get(rid.as_str())
                .and_then(|cells| cells.get(&fid))
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            let ids = match mode {
                Mode::Append => merged(before, &ids),
                Mode::Create | Mode::Replace => {
                    to_drop.extend(dropped(before, &ids).into_iter().map(str::to_owned));
                    merged(&[], &ids)
                }
            };
            let column = if ids.is_empty() {
                Value::Null
            } else {
                Value::Array(ids.into_iter().map(Value::String).collect())
            };
            p.columns.insert(fid, column);
        }
    }

    attachments::place(c, &written_refs).await?;
    let drop: Vec<&str> = to_drop.iter().map(String::as_str).collect();
    attachments::delete(c, database_id, &drop).await?;
    let quota = fetched.quota();
    if charged > 0 && !attachments::charge(c, database_id, charged, quota).await? {
        return Err(ApiError::bad_request(format!(
            "The fetched files would take this database past its {} of attachments; nothing was written.",
            quota_text(quota)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn appending_keeps_the_stored_ids_first_and_each_id_once() {
        assert_eq!(
            merged(&v(&["a", "b"]), &v(&["c", "a"])),
            v(&["a", "b", "c"])
        );
        assert_eq!(merged(&[], &v(&["b", "a", "b"])), v(&["b", "a"]));
    }

    #[test]
    fn replacing_drops_what_is_not_written_again() {
        assert_eq!(dropped(&v(&["a", "b", "c"]), &v(&["c", "a"])), vec!["b"]);
        assert!(dropped(&v(&["a"]), &v(&["a"])).is_empty());
    }
}
