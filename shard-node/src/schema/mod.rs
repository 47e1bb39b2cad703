//! The schema model of a tenant database: its tables and their fields, as
//! the catalog holds them, with everything derived from a field in ONE
//! place: its costume ([`Costume`]), storage kind, real column and column
//! type, connector table, filter operators, and the schemas the two small
//! languages compile against ([`DatabaseSchema::filter_schema`],
//! [`DatabaseSchema::formula_schema`]).
//!
//! [`cache::SchemaCache`] keeps one loaded model per database and reloads it
//! when `databases.schema_version` moved (every structural change bumps it in
//! its own transaction, see [`structural`]). [`rules`]: the webhooks a
//! record write consults, carried by the model (a rule change bumps
//! `schema_version`).

pub mod cache;
pub mod costume;
pub mod expansion;
mod filters;
pub mod rules;
pub mod structural;

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{json, Map, Value};

pub use costume::{Costume, Family, StorageKind};

use filters::FilterSchemas;
use rules::Rule;

/// How many levels of lookup `conditions` naming lookups with conditions
/// a filter schema follows.
pub const MAX_CONDITIONS_DEPTH: usize = 4;

/// Connector columns: `from_id` holds records of the forward field's table,
/// `to_id` records of its target table.
pub const CONNECTOR_FROM: &str = "from_id";
pub const CONNECTOR_TO: &str = "to_id";

/// One row of the `fields` catalog.
#[derive(Debug, Clone)]
pub struct FieldRow {
    pub id: String,
    pub table_id: String,
    pub name: String,
    pub costume: Costume,
    pub options: Map<String, Value>,
    pub position: i64,
    /// SQL type of the real column; `None` when the field has no column.
    pub sql_type: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl FieldRow {
    /// The real column's name (unquoted): the field id. `None` for fields
    /// without a column (link, button, lookup, rollup).
    pub fn column(&self) -> Option<&str> {
        self.sql_type.as_ref().map(|_| self.id.as_str())
    }

    pub fn option_str(&self, key: &str) -> Option<&str> {
        self.options.get(key).and_then(Value::as_str)
    }

    pub fn option_bool(&self, key: &str) -> bool {
        self.options.get(key).and_then(Value::as_bool) == Some(true)
    }

    /// A date column with time (date costume with `include_time`, or a
    /// formula whose result is a date with time).
    pub fn has_time(&self) -> bool {
        self.sql_type.as_deref() == Some("timestamptz")
    }

    /// Choices of a select (or of a text formula shown as a select).
    pub fn choices(&self) -> Vec<(String, String)> {
        self.options
            .get("choices")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(|c| {
                        Some((
                            c.get("id")?.as_str()?.to_owned(),
                            c.get("name")?.as_str()?.to_owned(),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// For a link: whether this is the forward side (the one that owns the
    /// connector name).
    pub fn is_forward_link(&self) -> bool {
        self.option_str("direction") != Some("reverse")
    }

    /// For a link: the id of the forward field of the pair, which names
    /// the connector table.
    pub fn connector_owner(&self) -> Option<&str> {
        if self.is_forward_link() {
            Some(&self.id)
        } else {
            self.option_str("pair_field_id")
        }
    }

    /// For a link: (own column, other column) in the connector.
    pub fn connector_columns(&self) -> (&'static str, &'static str) {
        if self.is_forward_link() {
            (CONNECTOR_FROM, CONNECTOR_TO)
        } else {
            (CONNECTOR_TO, CONNECTOR_FROM)
        }
    }

    /// The field as the API returns it; `operators` when `with_operators`.
    pub fn to_json(&self, operators: Option<Vec<&'static str>>) -> Value {
        let mut v = json!({
            "id": self.id,
            "name": self.name,
            "type": self.costume.as_str(),
            "options": Value::Object(self.options.clone()),
            "position": self.position,
        });
        if let Some(ops) = operators {
            v["operators"] = json!(ops);
        }
        v
    }
}

/// One table and its fields in `position`, `created_at` order.
#[derive(Debug, Clone)]
pub struct TableSchema {
    pub id: String,
    pub database_id: String,
    pub name: String,
    pub position: i64,
    pub display_field_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub fields: Vec<FieldRow>,
}

impl TableSchema {
    pub fn field(&self, id: &str) -> Option<&FieldRow> {
        self.fields.iter().find(|f| f.id == id)
    }

    pub fn field_named(&self, name: &str) -> Option<&FieldRow> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// `"db_..."."tbl_..."`
    pub fn qualified(&self) -> anyhow::Result<String> {
        crate::tenant_schema::table(&self.database_id, &self.id)
    }
}

/// A table as the API returns it (list, get, create: with fields).
#[derive(Debug, Clone, Serialize)]
pub struct TableJson {
    pub id: String,
    pub database_id: String,
    pub name: String,
    pub position: i64,
    pub display_field_id: Option<String>,
    #[serde(serialize_with = "crate::json::ts")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::json::ts")]
    pub updated_at: DateTime<Utc>,
    pub fields: Vec<Value>,
}

/// Every table of one database, at one `schema_version`. Not changed
/// after [`DatabaseSchema::new`]: what is derived from it is kept with it
/// (the filter schemas, built on first use).
#[derive(Debug, Clone)]
pub struct DatabaseSchema {
    pub database_id: String,
    pub version: i64,
    pub timezone: String,
    /// In `position`, `created_at` order.
    pub tables: Vec<TableSchema>,
    /// The database's webhooks, as record writes consult them
    /// (`schema::rules`); a change of one bumps the version.
    pub webhooks: Vec<Rule>,
    by_id: HashMap<String, usize>,
    filter_schemas: FilterSchemas,
}

impl DatabaseSchema {
    pub fn new(
        database_id: String,
        version: i64,
        timezone: String,
        tables: Vec<TableSchema>,
    ) -> Self {
        let by_id = tables
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id.clone(), i))
            .collect();
        DatabaseSchema {
            database_id,
            version,
            timezone,
            tables,
            webhooks: Vec::new(),
            by_id,
            filter_schemas: FilterSchemas::default(),
        }
    }

    /// The model with the database's webhooks.
    pub fn with_webhooks(mut self, webhooks: Vec<Rule>) -> Self {
        self.webhooks = webhooks;
        self
    }

    /// The webhooks about records of `table_id` (its own and the whole
    /// database's), whatever their state.
    pub fn rules_for<'a>(&'a self, table_id: &'a str) -> impl Iterator<Item = &'a Rule> + 'a {
        self.webhooks.iter().filter(move |r| r.covers(table_id))
    }

    /// A webhook of the database by id.
    pub fn webhook(&self, id: &str) -> Option<&Rule> {
        self.webhooks.iter().find(|r| r.id == id)
    }

    pub fn table(&self, id: &str) -> Option<&TableSchema> {
        self.by_id.get(id).map(|&i| &self.tables[i])
    }

    /// A field anywhere in the database.
    pub fn field(&self, id: &str) -> Option<&FieldRow> {
        self.tables.iter().find_map(|t| t.field(id))
    }

    /// Every field of every table.
    pub fn all_fields(&self) -> impl Iterator<Item = &FieldRow> {
        self.tables.iter().flat_map(|t| t.fields.iter())
    }

    /// For a link field: the table its records link to.
    pub fn link_target<'a>(&'a self, link: &FieldRow) -> Option<&'a TableSchema> {
        self.table(link.option_str("target_table_id")?)
    }

    /// The filter language's description of a link.
    pub fn link_spec(&self, link: &FieldRow) -> Option<filter_lang::LinkSpec> {
        let target = link.option_str("target_table_id")?;
        let (own, other) = link.connector_columns();
        Some(filter_lang::LinkSpec {
            schema: self.database_id.clone(),
            connector: crate::tenant_schema::connector_name(link.connector_owner()?),
            own_column: own.to_owned(),
            other_column: other.to_owned(),
            target_table: target.to_owned(),
        })
    }

    /// For a lookup or rollup: its link field and the target field (None
    /// for a count rollup).
    pub fn rides<'a>(&'a self, f: &FieldRow) -> Option<(&'a FieldRow, Option<&'a FieldRow>)> {
        let table = self.table(&f.table_id)?;
        let link = table.field(f.option_str("link_field_id")?)?;
        let target_table = self.link_target(link)?;
        let target = f
            .option_str("target_field_id")
            .and_then(|id| target_table.field(id));
        Some((link, target))
    }

    /// The filter language's storage of a field.
    pub fn storage(&self, f: &FieldRow) -> filter_lang::Storage {
        use filter_lang::{Choice, Storage};
        let choices = || {
            f.choices()
                .into_iter()
                .map(|(id, name)| Choice { id, name })
                .collect::<Vec<_>>()
        };
        match f.costume {
            Costume::SingleSelect => Storage::SingleSelect { choices: choices() },
            Costume::MultiSelect => Storage::MultiSelect { choices: choices() },
            Costume::MultiMember => Storage::MultiSelect { choices: vec![] },
            Costume::Attachment => Storage::Attachment,
            Costume::Button => Storage::Button,
            Costume::Link => match self.link_spec(f) {
                Some(spec) => Storage::Link(spec),
                None => Storage::Button,
            },
            c if c.family() == Family::Lookup => match self.rides(f) {
                Some((link, Some(target))) => match self.link_spec(link) {
                    Some(spec) => Storage::Lookup {
                        link: spec,
                        target: Box::new(self.storage(target)),
                        target_column: target.id.clone(),
                        conditions: None,
                    },
                    None => Storage::Button,
                },
                _ => Storage::Button,
            },
            c if c.family() == Family::Rollup => {
                let Some((link, target)) = self.rides(f) else {
                    return Storage::Button;
                };
                let Some(spec) = self.link_spec(link) else {
                    return Storage::Button;
                };
                let aggregation = match f.option_str("aggregation") {
                    Some("sum") => filter_lang::Aggregation::Sum,
                    Some("min") => filter_lang::Aggregation::Min,
                    Some("max") => filter_lang::Aggregation::Max,
                    Some("avg") => filter_lang::Aggregation::Avg,
                    _ => filter_lang::Aggregation::Count,
                };
                let result = match (f.costume, target) {
                    (Costume::RollupDate, Some(t)) => Storage::Date {
                        include_time: t.has_time(),
                    },
                    _ => Storage::Number,
                };
                Storage::Rollup {
                    link: spec,
                    aggregation,
                    target_column: target.map(|t| t.id.clone()),
                    result: Box::new(result),
                    conditions: None,
                }
            }
            c => match c.storage() {
                StorageKind::Text => Storage::Text,
                StorageKind::LongText => Storage::LongText,
                StorageKind::Number => Storage::Number,
                StorageKind::Date => Storage::Date {
                    include_time: f.has_time(),
                },
                StorageKind::Checkbox => Storage::Checkbox,
                _ => Storage::Button,
            },
        }
    }

    /// The filter language's definition of a field.
    pub fn field_def(&self, f: &FieldRow) -> filter_lang::FieldDef {
        let mut def =
            filter_lang::FieldDef::new(&f.id, &f.name, f.costume.as_str(), self.storage(f));
        if f.costume == Costume::FormulaText && f.option_str("display_as") == Some("single_select")
        {
            def.value_order = Some(f.choices().into_iter().map(|(_, name)| name).collect());
        }
        def
    }

    /// The `operators` attribute of a field.
    pub fn operators(&self, f: &FieldRow) -> Vec<&'static str> {
        self.field_def(f)
            .operators()
            .iter()
            .map(|op| op.name())
            .collect()
    }

    /// The schema formulas of `table` compile against.
    pub fn formula_schema(&self, table: &TableSchema) -> formula_lang::Schema {
        formula_lang::Schema::new(table.fields.iter().map(formula_field).collect())
    }

    /// A table with every field (and its operators), as list/get/create
    /// responses carry it.
    pub fn table_json(&self, table: &TableSchema) -> TableJson {
        TableJson {
            id: table.id.clone(),
            database_id: table.database_id.clone(),
            name: table.name.clone(),
            position: table.position,
            display_field_id: table.display_field_id.clone(),
            created_at: table.created_at,
            updated_at: table.updated_at,
            fields: table
                .fields
                .iter()
                .map(|f| f.to_json(Some(self.operators(f))))
                .collect(),
        }
    }
}

/// How a formula sees a field.
pub fn formula_field(f: &FieldRow) -> formula_lang::SchemaField {
    use formula_lang::FieldKind;
    let kind = match f.costume {
        Costume::SingleSelect => FieldKind::SingleSelect {
            choices: f
                .choices()
                .into_iter()
                .map(|(id, name)| formula_lang::Choice { id, name })
                .collect(),
        },
        Costume::FormulaNumber | Costume::FormulaText | Costume::FormulaDate => {
            FieldKind::Formula {
                expression: f.option_str("expression").unwrap_or("").to_owned(),
            }
        }
        c if c.is_computed() => FieldKind::NotReferencable {
            costume: c.as_str().to_owned(),
        },
        c => match c.storage() {
            StorageKind::Text | StorageKind::LongText => FieldKind::Text,
            StorageKind::Number => FieldKind::Number,
            StorageKind::Date => FieldKind::Date {
                with_time: f.has_time(),
            },
            StorageKind::Checkbox => FieldKind::Checkbox,
            _ => FieldKind::NotReferencable {
                costume: c.as_str().to_owned(),
            },
        },
    };
    formula_lang::SchemaField {
        id: f.id.clone(),
        name: f.name.clone(),
        column: f.id.clone(),
        kind,
    }
}

/// The schema formulas of `table` compile against.
pub fn formula_schema_of(table: &TableSchema) -> formula_lang::Schema {
    formula_lang::Schema::new(table.fields.iter().map(formula_field).collect())
}
