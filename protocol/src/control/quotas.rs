//! Account quotas and usage (operator routes of the control plane):
//! per-account overrides of part C's limits, and what an account uses.
//!
//! | method + path | body | reply |
//! |---|---|---|
//! | GET `/internal/users/{user_id}/quotas` | | [`AccountQuotas`] |
//! | PUT `/internal/users/{user_id}/quotas` | [`QuotaChange`] | [`AccountQuotas`] (400 below current use, nothing changed) |
//! | GET `/internal/users/{user_id}/usage` | | [`AccountUsage`] |
//! | GET `/internal/usage?top=N&by=M` | | [`TopUsage`] |

use serde::{Deserialize, Serialize};

/// Part C's figures, used where an account has no override.
pub mod defaults {
    pub const DATABASES: i64 = 100;
    /// What routers publish by default (`ROUTER_KEY_LIMIT_PER_MIN`; a
    /// router started with another setting uses that instead).
    pub const REQUESTS_PER_MINUTE: i64 = 600;
    /// 100 GB of original bytes.
    pub const ATTACHMENT_BYTES: i64 = 100_000_000_000;
    pub const TABLES_PER_DATABASE: i64 = 200;
    pub const FIELDS_PER_TABLE: i64 = 500;
}

/// One figure per quota: an account's overrides (`None`: the default), or
/// with every entry set, the figures in force.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaFigures {
    pub databases: Option<i64>,
    pub requests_per_minute: Option<i64>,
    pub attachment_bytes: Option<i64>,
    pub tables_per_database: Option<i64>,
    pub fields_per_table: Option<i64>,
}

impl QuotaFigures {
    /// The figures in force: each override, else its default.
    pub fn effective(&self) -> QuotaFigures {
        QuotaFigures {
            databases: Some(self.databases.unwrap_or(defaults::DATABASES)),
            requests_per_minute: Some(
                self.requests_per_minute
                    .unwrap_or(defaults::REQUESTS_PER_MINUTE),
            ),
            attachment_bytes: Some(self.attachment_bytes.unwrap_or(defaults::ATTACHMENT_BYTES)),
            tables_per_database: Some(
                self.tables_per_database
                    .unwrap_or(defaults::TABLES_PER_DATABASE),
            ),
            fields_per_table: Some(self.fields_per_table.unwrap_or(defaults::FIELDS_PER_TABLE)),
        }
    }

    /// The shard-side part, as a database carries it.
    pub fn database_limits(&self) -> DatabaseLimits {
        DatabaseLimits {
            tables_per_database: self.tables_per_database,
            fields_per_table: self.fields_per_table,
            attachment_bytes: self.attachment_bytes,
        }
    }
}

/// `quotas show`/`set`: the figures in force and the overrides behind them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountQuotas {
    pub user_id: String,
    /// Every figure in force (an override or the default).
    pub quotas: QuotaFigures,
    /// Only the overrides (`null`: the default applies).
    pub overrides: QuotaFigures,
}

/// A new value of one quota: a number, or `"default"` to drop the override.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum QuotaSetting {
    Value(i64),
    Default(DefaultWord),
}

/// The word `"default"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DefaultWord {
    Default,
}

impl QuotaSetting {
    /// The override it stores (`None`: back to the default).
    pub fn value(self) -> Option<i64> {
        match self {
            QuotaSetting::Value(v) => Some(v),
            QuotaSetting::Default(_) => None,
        }
    }

    /// The CLI form: a positive integer or `default`.
    pub fn parse_cli(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("default") {
            return Ok(QuotaSetting::Default(DefaultWord::Default));
        }
        s.replace('_', "")
            .parse::<i64>()
            .map(QuotaSetting::Value)
            .map_err(|_| format!("expected a whole number or `default`, got {s:?}"))
    }
}

/// `PUT /internal/users/{id}/quotas`: absent keys are left as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaChange {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub databases: Option<QuotaSetting>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_minute: Option<QuotaSetting>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment_bytes: Option<QuotaSetting>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tables_per_database: Option<QuotaSetting>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields_per_table: Option<QuotaSetting>,
}

impl QuotaChange {
    pub fn is_empty(&self) -> bool {
        *self == QuotaChange::default()
    }
}

/// The limits a shard enforces for one database, from its owner's
/// overrides (`None`: the shard's default). Carried by an [`Allocation`]
/// and pushed to the shards when the owner's quotas change.
///
/// [`Allocation`]: super::Allocation
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatabaseLimits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tables_per_database: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields_per_table: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment_bytes: Option<i64>,
}

/// What one database uses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatabaseUsage {
    pub database_id: String,
    pub shard: String,
    /// Live rows of its tables from PostgreSQL's statistics (an estimate
    /// that trails writes by a moment; no table is scanned).
    pub records: i64,
    /// Original bytes of its attachments (the shard's running total).
    pub attachment_bytes: i64,
    /// Requests the shard served for it in the last 60 minutes / 24 hours
    /// (5-minute buckets: each window is exact to within one bucket).
    pub requests_last_hour: i64,
    pub requests_last_day: i64,
    /// Its tables.
    pub tables: i64,
}

/// `usage --user`: the account's totals and each database it owns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountUsage {
    pub user_id: String,
    pub database_count: i64,
    pub records: i64,
    pub attachment_bytes: i64,
    pub requests_last_hour: i64,
    pub requests_last_day: i64,
    pub databases: Vec<DatabaseUsage>,
}

/// The measure `usage --top` ranks accounts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum UsageMeasure {
    #[default]
    RequestsLastDay,
    RequestsLastHour,
    Records,
    AttachmentBytes,
    Databases,
}

impl UsageMeasure {
    pub const ALL: [UsageMeasure; 5] = [
        UsageMeasure::RequestsLastDay,
        UsageMeasure::RequestsLastHour,
        UsageMeasure::Records,
        UsageMeasure::AttachmentBytes,
        UsageMeasure::Databases,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            UsageMeasure::RequestsLastDay => "requests_last_day",
            UsageMeasure::RequestsLastHour => "requests_last_hour",
            UsageMeasure::Records => "records",
            UsageMeasure::AttachmentBytes => "attachment_bytes",
            UsageMeasure::Databases => "databases",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// The figure of `a` this measure ranks by.
    pub fn of(self, a: &AccountTotals) -> i64 {
        match self {
            UsageMeasure::RequestsLastDay => a.requests_last_day,
            UsageMeasure::RequestsLastHour => a.requests_last_hour,
            UsageMeasure::Records => a.records,
            UsageMeasure::AttachmentBytes => a.attachment_bytes,
            UsageMeasure::Databases => a.database_count,
        }
    }
}

/// One account's totals in the fleet view.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountTotals {
    pub user_id: String,
    pub database_count: i64,
    pub records: i64,
    pub attachment_bytes: i64,
    pub requests_last_hour: i64,
    pub requests_last_day: i64,
}

/// `usage --top N [--by M]`: the N accounts highest by `by`, highest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopUsage {
    pub by: UsageMeasure,
    pub accounts: Vec<AccountTotals>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setting_is_a_number_or_default() {
        let c: QuotaChange = serde_json::from_value(
            serde_json::json!({"databases": 3, "fields_per_table": "default"}),
        )
        .unwrap();
        assert_eq!(c.databases, Some(QuotaSetting::Value(3)));
        assert_eq!(c.fields_per_table.and_then(QuotaSetting::value), None);
        assert!(c.fields_per_table.is_some());
        assert!(serde_json::from_value::<QuotaChange>(serde_json::json!({"tables": 3})).is_err());
        assert!(
            serde_json::from_value::<QuotaChange>(serde_json::json!({"databases": "lots"}))
                .is_err()
        );
        assert_eq!(
            QuotaSetting::parse_cli("1_000"),
            Ok(QuotaSetting::Value(1000))
        );
        assert!(QuotaSetting::parse_cli("many").is_err());
    }

    #[test]
    fn effective_figures_fill_in_defaults() {
        let o = QuotaFigures {
            tables_per_database: Some(3),
            ..Default::default()
        };
        let e = o.effective();
        assert_eq!(e.tables_per_database, Some(3));
        assert_eq!(e.databases, Some(defaults::DATABASES));
        assert_eq!(o.database_limits().tables_per_database, Some(3));
        assert_eq!(o.database_limits().attachment_bytes, None);
    }
}
