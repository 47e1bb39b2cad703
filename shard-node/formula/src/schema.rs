//! What the compiler needs to know about the table: its fields, by name.

use std::collections::HashMap;

/// One field of the table, as the caller (the server) describes it.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SchemaField {
    /// `fld_...` id; reported in `referenced_field_ids`.
    pub id: String,
    /// Exact name, matched case-sensitively by `{Name}` references.
    pub name: String,
    /// Column that holds the value (always double-quoted in the SQL).
    /// Unused for formula fields, whose expression is inlined.
    pub column: String,
    pub kind: FieldKind,
}

/// How a formula sees a field's value. Column types assumed: number
/// `numeric`, text `text`, date `date` (or `timestamptz` with time),
/// checkbox `boolean`, single select `text` holding the choice id.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum FieldKind {
    /// number, currency, percent, rating, duration (seconds).
    Number,
    /// single_line_text, long_text, email, phone, url, member.
    Text,
    /// date; `with_time` means a `timestamptz` column.
    Date { with_time: bool },
    /// checkbox.
    Checkbox,
    /// single_select: read as the choice NAME (text) through a CASE over
    /// the choices. Renaming a choice therefore requires rebuilding the
    /// formula columns that read this field.
    SingleSelect { choices: Vec<Choice> },
    /// Another formula field: its stored canonical expression is compiled
    /// and inlined (PostgreSQL cannot chain generated columns).
    Formula { expression: String },
    /// Anything a formula cannot read (link, attachment, multi_select,
    /// multi_member, lookup, rollup, button). `costume` names it in errors.
    NotReferencable { costume: String },
}

/// A single-select choice: the id stored in the cell, the name shown.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Choice {
    pub id: String,
    pub name: String,
}

/// The fields of one table, indexed by name.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    fields: Vec<SchemaField>,
    row_column: Option<String>,
    by_name: HashMap<String, usize>,
    by_id: HashMap<String, usize>,
}

impl Schema {
    pub fn new(fields: Vec<SchemaField>) -> Schema {
        let mut by_name = HashMap::new();
        let mut by_id = HashMap::new();
        for (i, f) in fields.iter().enumerate() {
            by_name.entry(f.name.clone()).or_insert(i);
            by_id.entry(f.id.clone()).or_insert(i);
        }
        Schema {
            fields,
            row_column: Some("id".to_string()),
            by_name,
            by_id,
        }
    }

    /// A NOT NULL column of the table (default `id`) that the SQL reads to
    /// keep collation-sensitive operations on constant text (`LOWER("A")`,
    /// `"a" = "b"`) from being folded when the column is created, which
    /// PostgreSQL 15 cannot do for generated columns ("could not determine
    /// which collation to use"). `None` turns this off.
    pub fn with_row_column(mut self, column: Option<&str>) -> Schema {
        self.row_column = column.map(str::to_string);
        self
    }

    pub fn row_column(&self) -> Option<&str> {
        self.row_column.as_deref()
    }

    pub fn fields(&self) -> &[SchemaField] {
        &self.fields
    }

    pub fn by_id(&self, id: &str) -> Option<&SchemaField> {
        self.by_id.get(id).map(|&i| &self.fields[i])
    }

    /// Exact name first; otherwise the one field whose trimmed name equals
    /// the trimmed reference (so `{ Price }` finds `Price`); otherwise the
    /// one field whose name equals it ignoring case. Ambiguity finds none.
    pub fn resolve(&self, name: &str) -> Option<&SchemaField> {
        if let Some(&i) = self.by_name.get(name) {
            return Some(&self.fields[i]);
        }
        let want = name.trim();
        unique(self.fields.iter().filter(|f| f.name.trim() == want)).or_else(|| {
            let lower = want.to_lowercase();
            unique(
                self.fields
                    .iter()
                    .filter(|f| f.name.trim().to_lowercase() == lower),
            )
        })
    }
}

fn unique<'a>(mut it: impl Iterator<Item = &'a SchemaField>) -> Option<&'a SchemaField> {
    match (it.next(), it.next()) {
        (Some(f), None) => Some(f),
        _ => None,
    }
}
