//! `PATCH /api/fields/{id}`: rename, type change (real casts), settings.
//! One structural transaction; the reply is the stored row WITHOUT
//! `operators`.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{Map, Value};

use crate::auth::Editor;
use crate::catalog;
use crate::catalog::placements::Need;
use crate::db::{fenced_transaction_on, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::fields::options::{self, formula, link, lookup_rollup, scalar, select};
use crate::fields::{field_reply, filter_env, formulas, name_taken, settle_button, string_member};
use crate::http::body::JsonObject;
use crate::schema::costume::{unknown_type_message, Requested};
use crate::schema::{formula_schema_of, structural, Costume, Family, FieldRow, StorageKind};
use crate::state::AppState;
use crate::tenant_schema::{self, Cast};

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let patch = parse(&body)?;
    let write = update(&state, &access.database_id, access.user_id(), &id, patch);
    field_reply(&state, DbOp::UpdateField, write).await
}

pub struct Patch {
    pub name: Option<String>,
    pub costume: Option<Costume>,
    pub options: Option<Map<String, Value>>,
}

pub fn parse(body: &Map<String, Value>) -> ApiResult<Patch> {
    let name = string_member(body, "name")?.map(str::to_owned);
    let costume = match string_member(body, "type")? {
        None => None,
        // The doors (formula, lookup, rollup) are not valid here.
        Some(t) => match Requested::parse(t) {
            Some(Requested::Stored(c)) => Some(c),
            _ => return Err(ApiError::bad_request(unknown_type_message(t))),
        },
    };
    let options = options::options_of(body)?;
    if name.is_none() && costume.is_none() && options.is_none() {
        return Err(ApiError::bad_request(
            "Send at least one of name, type, options.",
        ));
    }
    Ok(Patch {
        name,
        costume,
        options,
    })
}

/// How a type change converts the column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conversion {
    /// Same column type: only the costume changes.
    Free,
    Cast(Cast),
}

/// Part A's type-change rules.
pub fn conversion(from: Costume, to: Costume) -> ApiResult<Conversion> {
    use StorageKind as S;
    let refuse = || {
        ApiError::bad_request(format!(
            "A {} field cannot be changed to {}.",
            from.as_str(),
            to.as_str()
        ))
    };
    let plain = |c: Costume| matches!(c.family(), Family::Scalar | Family::Select);
    if !plain(from) || !plain(to) {
        return Err(refuse());
    }
    let text = |k: S| matches!(k, S::Text | S::LongText);
    Ok(match (from.storage(), to.storage()) {
        (a, b) if a == b => Conversion::Free,
        (a, b) if text(a) && text(b) => Conversion::Free,
        (a, S::Number) if text(a) => Conversion::Cast(Cast::TextToNumber),
        (S::Number | S::Checkbox, b) if text(b) => Conversion::Cast(Cast::ToText),
        (S::SingleSelect, S::MultiSelect) if to == Costume::MultiSelect => {
            Conversion::Cast(Cast::SingleToMulti)
        }
        _ => return Err(refuse()),
    })
}

pub async fn update(
    state: &AppState,
    database_id: &str,
    user_id: &str,
    field_id: &str,
    patch: Patch,
) -> ApiResult<Value> {
    let mut client = state.db.client_for(database_id).await?;
    fenced_transaction_on(&mut client, database_id, Need::Structure, async |tx| {
        structural::begin(tx, database_id).await?;
        let schema = state.schemas.get_locked(tx, database_id).await?;
        let field = schema.field(field_id).ok_or(ApiError::NotFound)?.clone();
        let table = schema
            .table(&field.table_id)
            .ok_or_else(|| anyhow::anyhow!("field without table"))?;
        let mut work = table.clone();
        let env = filter_env(&schema)?;
        let (db, tid) = (database_id, table.id.as_str());
        let mut new = field.clone();
        // Formulas reading this field whose columns must be rebuilt.
        let mut rebuild_dependents = false;

        let target = patch.costume.unwrap_or(field.costume);
        if target != field.costume {
            let conv = conversion(field.costume, target)?;
            if let Conversion::Cast(_) = conv {
                if let Some(dep) = formulas::dependents(table, &[&field.id]).first() {
                    let dep = table.field(dep).map(|f| f.name.as_str()).unwrap_or("");
                    return Err(ApiError::bad_request(format!(
                        "The formula field '{dep}' relies on the type of '{}'; change or delete it first.",
                        field.name
                    )));
                }
            }
            // A free change (same column, text <-> long text) keeps what a
            // lookup/rollup infers; a cast changes it.
            if conv != Conversion::Free {
                formulas::refuse_if_surfaced(&schema, &field)?;
            }
            let base = match patch.options.clone() {
                Some(sent) => {
                    options::check_known_keys(&sent, Some(&field.options))?;
                    sent
                }
                None => field.options.clone(),
            };
            let mut opts = scalar::normalize(base, Some(&field))?;
            if target.family() == Family::Select {
                opts = select::normalize(opts, Some(&field.options))?;
            }
            let had_index = field.costume.supports_unique() && scalar::wants_unique(&field.options);
            let want_index = target.supports_unique() && scalar::wants_unique(&opts);
            let cast = matches!(conv, Conversion::Cast(_));
            // Indexes on expressions of the column (md5, left) cannot follow it
            // to another type: drop them before the cast, rebuild after.
            if had_index && (!want_index || cast) {
                tenant_schema::drop_unique_index(tx, db, &field.id).await?;
            }
            if let Conversion::Cast(cast) = conv {
                tenant_schema::drop_sort_indexes(tx, db, &field.id).await?;
                if let Err(e) = tenant_schema::alter_column_type(tx, db, tid, &field.id, cast).await? {
                    tracing::info!(error = %e, field = field_id, "type change cast refused");
                    return Err(ApiError::bad_request(format!(
                        "Some values of '{}' cannot be converted to {}; nothing was changed.",
                        field.name,
                        target.as_str()
                    )));
                }
            }
            if want_index && (!had_index || cast) {
                let sql_type = target
                    .column_type(scalar::include_time(&opts))
                    .ok_or_else(|| anyhow::anyhow!("{target:?} has no column type"))?;
                if let Err(e) =
                    tenant_schema::create_unique_index(tx, db, tid, &field.id, sql_type).await?
                {
                    if e.code() != Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) {
                        return Err(e.into());
                    }
                    tracing::info!(error = %e, field = field_id, "unique index refused");
                    return Err(ApiError::bad_request(format!(
                        "'{}' holds duplicate values, so it cannot be a unique {}.",
                        field.name,
                        target.as_str()
                    )));
                }
            }
            new.costume = target;
            new.sql_type = target
                .column_type(scalar::include_time(&opts))
                .map(str::to_owned);
            new.options = opts;
        } else if let Some(sent) = patch.options.clone() {
            match field.costume.family() {
                Family::Scalar | Family::Attachment => {
                    options::check_known_keys(&sent, Some(&field.options))?;
                    new.options = scalar::normalize(sent, Some(&field))?;
                }
                Family::Select => {
                    options::check_known_keys(&sent, Some(&field.options))?;
                    let opts = scalar::normalize(sent, Some(&field))?;
                    new.options = select::normalize(opts, Some(&field.options))?;
                    if new.choices() != field.choices() {
                        let kept = select::choice_ids(&new.options);
                        let multi = field.costume == Costume::MultiSelect;
                        tenant_schema::clear_removed_choices(tx, db, tid, &field.id, multi, &kept)
                            .await?;
                        rebuild_dependents = field.costume == Costume::SingleSelect;
                    }
                }
                Family::Formula => {
                    let expression = formula::expression(&sent)?.to_owned();
                    let compiled = formula::compile(&expression, &work, Some(&field.id))?;
                    let costume = formula::costume_of(compiled.result);
                    let sql_type = compiled.result.sql_type();
                    let changed =
                        costume != field.costume || field.sql_type.as_deref() != Some(sql_type);
                    if changed {
                        formulas::refuse_if_surfaced(&schema, &field)?;
                    }
                    new.options = formula::settle(field.options.clone(), sent, &compiled, changed)?;
                    new.costume = costume;
                    new.sql_type = Some(sql_type.to_owned());
                    tenant_schema::drop_column(tx, db, tid, &field.id).await?;
                    formulas::store_generated(
                        tx,
                        db,
                        tid,
                        &field.id,
                        sql_type,
                        &compiled.sql,
                        &field.name,
                    )
                    .await?;
                    rebuild_dependents = true;
                }
                family @ (Family::Lookup | Family::Rollup) => {
                    let settled = lookup_rollup::settle(family, &sent, &schema, table, &env)?;
                    new.costume = settled.costume;
                    new.options = settled.options;
                }
                Family::Button => {
                    new.options = settle_button(tx, db, &sent).await?;
                }
                Family::Link => {
                    new.options = link::patch(sent, &field, &schema, &env)?;
                }
            }
        }

        // Rename: uniqueness only; dependent formulas' text follows the name
        // unless the new name has a brace or outer spaces, or the call also
        // edits a formula, lookup/rollup or link field's settings.
        let mut rewritten = Vec::new();
        if let Some(name) = patch.name.as_deref().filter(|n| *n != field.name) {
            if work
                .fields
                .iter()
                .any(|f| f.id != field.id && f.name == name)
            {
                return Err(name_taken(name));
            }
            let plain_name = !name.contains(['{', '}']) && name.trim() == name;
            let settings_edit = patch.options.is_some()
                && matches!(
                    field.costume.family(),
                    Family::Formula | Family::Lookup | Family::Rollup | Family::Link
                );
            if plain_name && !settings_edit {
                let before = formula_schema_of(&work);
                for f in &work.fields {
                    if f.id == field.id || f.costume.family() != Family::Formula {
                        continue;
                    }
                    let reads = f
                        .options
                        .get("referenced_field_ids")
                        .and_then(Value::as_array)
                        .is_some_and(|l| l.iter().any(|v| v.as_str() == Some(&field.id)));
                    let Some(Ok(parsed)) = f.option_str("expression").map(formula_lang::parse) else {
                        continue;
                    };
                    if reads {
                        let text = formula_lang::rename_references(&parsed, &before, &field.id, name);
                        let mut g = f.clone();
                        g.options.insert("expression".into(), Value::String(text));
                        rewritten.push(g);
                    }
                }
            }
            new.name = name.to_owned();
        }

        for f in rewritten.iter().chain(std::iter::once(&new)) {
            if let Some(slot) = work.fields.iter_mut().find(|s| s.id == f.id) {
                *slot = f.clone();
            }
            catalog::fields::update(tx, f).await?;
        }
        lookup_rollup::check_expansion(&schema, std::slice::from_ref(&new))?;
        if rebuild_dependents {
            let ids = formulas::dependents(&work, &[&field.id]);
            formulas::rebuild(tx, &schema, &mut work, &ids).await?;
        }
        structural::finish(tx, database_id, user_id).await?;
        Ok(stored_json(&new))
    })
    .await
}

fn stored_json(f: &FieldRow) -> Value {
    f.to_json(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_change_rules() {
        use Costume::*;
        assert_eq!(conversion(SingleLineText, Email).unwrap(), Conversion::Free);
        assert_eq!(conversion(LongText, Url).unwrap(), Conversion::Free);
        assert_eq!(conversion(Number, Rating).unwrap(), Conversion::Free);
        assert_eq!(
            conversion(LongText, Number).unwrap(),
            Conversion::Cast(Cast::TextToNumber)
        );
        assert_eq!(
            conversion(Currency, LongText).unwrap(),
            Conversion::Cast(Cast::ToText)
        );
        assert_eq!(
            conversion(Checkbox, SingleLineText).unwrap(),
            Conversion::Cast(Cast::ToText)
        );
        assert_eq!(
            conversion(SingleSelect, MultiSelect).unwrap(),
            Conversion::Cast(Cast::SingleToMulti)
        );
        assert!(conversion(MultiSelect, SingleSelect).is_err());
        assert!(conversion(SingleLineText, Link).is_err());
        assert!(conversion(Attachment, SingleLineText).is_err());
        assert!(conversion(FormulaNumber, Number).is_err());
        assert!(conversion(Number, Date).is_err());
        assert!(conversion(SingleLineText, Checkbox).is_err());
        assert!(conversion(Button, SingleLineText).is_err());
    }
}
