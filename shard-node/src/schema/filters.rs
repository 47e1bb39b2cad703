//! The filter schemas of a [`DatabaseSchema`]: what the filter and sort
//! languages compile against, with every lookup's and rollup's parsed
//! `conditions`. Built on first use and kept with the model (so once per
//! `schema_version`, see [`super::cache`]), shared by every request.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use chrono::Utc;

use super::expansion::{
    admit_nothing, expanded_cost, Overrun, MAX_LOOKUP_CONDITION_COST, MAX_TABLE_CONDITION_COST,
};
use super::{DatabaseSchema, FieldRow, TableSchema, MAX_CONDITIONS_DEPTH};

/// The filter schemas of a [`DatabaseSchema`], built once each on first use
/// and shared (`Arc`) by every request on that schema version: one per
/// (table index, `conditions` depth). A conditioned lookup's schema points
/// at the shared schema of its linked table one level down, so a table with
/// n conditioned lookups costs at most [`MAX_CONDITIONS_DEPTH`] + 1 builds
/// per table, not n^depth. Conditions over an expansion cap are replaced
/// as they are built (see [`super::expansion`]).
#[derive(Default)]
pub(super) struct FilterSchemas {
    built: Mutex<FilterMemo>,
    /// How many schemas were built (tests bound it).
    builds: AtomicUsize,
}

impl Clone for FilterSchemas {
    /// A copy starts empty (it builds its own on use).
    fn clone(&self) -> Self {
        FilterSchemas::default()
    }
}

impl std::fmt::Debug for FilterSchemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilterSchemas")
            .field("builds", &self.builds.load(Ordering::Relaxed))
            .finish()
    }
}

/// The schemas built so far, by (table index, depth), and the conditions
/// found over a cap while building them.
#[derive(Default)]
struct FilterMemo {
    schemas: HashMap<(usize, usize), Arc<filter_lang::Schema>>,
    overruns: Vec<Overrun>,
}

impl DatabaseSchema {
    /// The schema filters and sorts of `table` compile against. Lookups and
    /// rollups carry their `conditions`, so a filter on one sees the linked
    /// records its cell shows. Built once per schema version and shared.
    pub fn filter_schema(&self, table: &TableSchema) -> Arc<filter_lang::Schema> {
        let mut memo = self
            .filter_schemas
            .built
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match self.by_id.get(&table.id) {
            Some(&index) if std::ptr::eq(&self.tables[index], table) => {
                self.filter_schema_at(index, 0, &mut memo)
            }
            // A table that is not this model's own: built on its own.
            _ => Arc::new(self.build_filter_schema(table, 0, &mut FilterMemo::default())),
        }
    }

    /// The conditioned lookups and rollups of the whole database that are
    /// over an expansion cap (their conditions read as admitting nothing),
    /// each once, in table and field order of first finding.
    pub fn condition_overruns(&self) -> Vec<Overrun> {
        for table in &self.tables {
            self.filter_schema(table);
        }
        let memo = self
            .filter_schemas
            .built
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        memo.overruns.clone()
    }

    /// How many filter schemas this model has built so far.
    pub fn filter_schema_builds(&self) -> usize {
        self.filter_schemas.builds.load(Ordering::Relaxed)
    }

    /// A lookup's or rollup's parsed `conditions` (a filter over its linked
    /// table, with that table's schema), as its table's filter schema holds
    /// them: None without conditions or when they no longer parse.
    pub fn conditions_of(&self, f: &FieldRow) -> Option<Box<filter_lang::Conditions>> {
        f.options.get("conditions").filter(|c| !c.is_null())?;
        let table = self.table(&f.table_id)?;
        let fs = self.filter_schema(table);
        let def = fs.fields.iter().find(|d| d.id == f.id)?;
        match &def.storage {
            filter_lang::Storage::Lookup { conditions, .. }
            | filter_lang::Storage::Rollup { conditions, .. } => conditions.clone(),
            _ => None,
        }
    }

    /// `depth`: how many `conditions` deep this table is; conditions may
    /// name lookups of the linked table, whose own conditions are attached
    /// down to [`MAX_CONDITIONS_DEPTH`] (only a cycle of lookups goes that
    /// far; past it they are left off).
    fn filter_schema_at(
        &self,
        index: usize,
        depth: usize,
        memo: &mut FilterMemo,
    ) -> Arc<filter_lang::Schema> {
        if let Some(s) = memo.schemas.get(&(index, depth)) {
            return s.clone();
        }
        let schema = Arc::new(self.build_filter_schema(&self.tables[index], depth, memo));
        memo.schemas.insert((index, depth), schema.clone());
        schema
    }

    fn build_filter_schema(
        &self,
        table: &TableSchema,
        depth: usize,
        memo: &mut FilterMemo,
    ) -> filter_lang::Schema {
        self.filter_schemas.builds.fetch_add(1, Ordering::Relaxed);
        // Cost of this table's conditions so far (at depth 0,
        // where a read of the table reads them all).
        let mut total = 0;
        filter_lang::Schema::new(
            table
                .fields
                .iter()
                .map(|f| {
                    let mut def = self.field_def(f);
                    if depth < MAX_CONDITIONS_DEPTH {
                        if let filter_lang::Storage::Lookup { conditions, .. }
                        | filter_lang::Storage::Rollup { conditions, .. } = &mut def.storage
                        {
                            *conditions = self.conditions(f, depth, memo);
                            if let Some(c) = conditions.as_deref() {
                                let cost =
                                    expanded_cost(&c.filter, &c.schema, MAX_LOOKUP_CONDITION_COST);
                                let limit = if cost > MAX_LOOKUP_CONDITION_COST {
                                    Some(MAX_LOOKUP_CONDITION_COST)
                                } else if depth == 0 && total + cost > MAX_TABLE_CONDITION_COST {
                                    Some(MAX_TABLE_CONDITION_COST)
                                } else {
                                    total += cost;
                                    None
                                };
                                if let Some(limit) = limit {
                                    over_budget(table, f, depth, limit, memo);
                                    *conditions = Some(admit_nothing());
                                }
                            }
                        }
                    }
                    def
                })
                .collect(),
        )
    }

    /// A lookup's or rollup's `conditions` parsed against its linked table.
    /// Conditions that no longer parse (a field deleted since) are ignored,
    /// with a warning, as the cell's read does.
    fn conditions(
        &self,
        f: &FieldRow,
        depth: usize,
        memo: &mut FilterMemo,
    ) -> Option<Box<filter_lang::Conditions>> {
        let value = f.options.get("conditions").filter(|c| !c.is_null())?;
        let (link, _) = self.rides(f)?;
        let target = self.link_target(link)?;
        let index = *self.by_id.get(&target.id)?;
        let schema = self.filter_schema_at(index, depth + 1, memo);
        // The clock only reads offset-less timestamps on the database's
        // wall clock; relative dates are resolved when compiled.
        let env = filter_lang::Env::new(&self.timezone, Utc::now())
            .or_else(|_| filter_lang::Env::new("UTC", Utc::now()))
            .ok()?;
        match filter_lang::filter::parse_value(value, &schema, &env) {
            Ok(filter) => Some(Box::new(filter_lang::Conditions { schema, filter })),
            Err(e) => {
                tracing::warn!(field = %f.id, error = %e.message, "lookup/rollup conditions ignored");
                None
            }
        }
    }
}

/// Notes conditions over a cap (once per field and cap) and warns: they
/// are read as admitting no linked record.
fn over_budget(
    table: &TableSchema,
    f: &FieldRow,
    depth: usize,
    limit: usize,
    memo: &mut FilterMemo,
) {
    let overrun = Overrun {
        table_id: table.id.clone(),
        field_id: f.id.clone(),
        limit,
    };
    if memo.overruns.contains(&overrun) {
        return;
    }
    tracing::warn!(
        field = %f.id,
        table = %table.id,
        depth,
        limit,
        "lookup/rollup conditions expand past the cap; read as admitting no linked record"
    );
    memo.overruns.push(overrun);
}
