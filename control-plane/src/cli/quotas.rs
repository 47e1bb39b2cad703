//! `quotas show|set --user usr_...` (docs/operations.md, "Quotas and usage").

use clap::Subcommand;
use cluster_protocol::control::client::ControlPlaneClient;
use cluster_protocol::control::quotas::{AccountQuotas, QuotaChange, QuotaSetting};

use super::exec::{to_json, Output};
use super::table;

#[derive(Debug, Subcommand)]
pub enum QuotasCmd {
    /// Show an account's quotas in force and which are overrides; prints
    /// {user_id, quotas:{...}, overrides:{...}} (null: the default).
    Show {
        /// User id (usr_...).
        #[arg(long = "user")]
        user_id: String,
    },
    /// Set per-account overrides (a whole number, or `default` to drop the
    /// override); prints what `show` prints. Exits non-zero, changing
    /// nothing, when a value is below what the account already uses.
    Set {
        /// User id (usr_...).
        #[arg(long = "user")]
        user_id: String,
        /// Databases the account may own (default 100).
        #[arg(long, value_parser = QuotaSetting::parse_cli)]
        databases: Option<QuotaSetting>,
        /// Requests per minute per API key (default 600, or the router's
        /// ROUTER_KEY_LIMIT_PER_MIN), published in X-RateLimit-Limit.
        #[arg(long, value_parser = QuotaSetting::parse_cli)]
        requests_per_minute: Option<QuotaSetting>,
        /// Original bytes of attachments per database (default 100 GB).
        #[arg(long, value_parser = QuotaSetting::parse_cli)]
        attachment_bytes: Option<QuotaSetting>,
        /// Tables per database (default 200).
        #[arg(long, value_parser = QuotaSetting::parse_cli)]
        tables_per_database: Option<QuotaSetting>,
        /// Fields per table (default 500).
        #[arg(long, value_parser = QuotaSetting::parse_cli)]
        fields_per_table: Option<QuotaSetting>,
    },
}

fn figure(v: Option<i64>, overridden: Option<i64>) -> String {
    let v = v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
    if overridden.is_some() {
        v
    } else {
        format!("{v} (default)")
    }
}

/// `quota  value` lines, `(default)` after figures without an override.
pub fn text(q: &AccountQuotas) -> String {
    let (e, o) = (&q.quotas, &q.overrides);
    table::fields(&[
        ("user", q.user_id.clone()),
        ("databases", figure(e.databases, o.databases)),
        (
            "requests_per_minute",
            figure(e.requests_per_minute, o.requests_per_minute),
        ),
        (
            "attachment_bytes",
            figure(e.attachment_bytes, o.attachment_bytes),
        ),
        (
            "tables_per_database",
            figure(e.tables_per_database, o.tables_per_database),
        ),
        (
            "fields_per_table",
            figure(e.fields_per_table, o.fields_per_table),
        ),
    ])
}

fn output(q: &AccountQuotas) -> anyhow::Result<Output> {
    Ok(Output {
        json: to_json(q)?,
        text: text(q),
        failure: None,
    })
}

pub async fn quotas(c: &ControlPlaneClient, cmd: QuotasCmd) -> anyhow::Result<Output> {
    match cmd {
        QuotasCmd::Show { user_id } => output(&c.quotas(&user_id).await?),
        QuotasCmd::Set {
            user_id,
            databases,
            requests_per_minute,
            attachment_bytes,
            tables_per_database,
            fields_per_table,
        } => {
            let change = QuotaChange {
                databases,
                requests_per_minute,
                attachment_bytes,
                tables_per_database,
                fields_per_table,
            };
            if change.is_empty() {
                anyhow::bail!(
                    "nothing to set: give at least one of --databases, --requests-per-minute, \
                     --attachment-bytes, --tables-per-database, --fields-per-table"
                );
            }
            output(&c.set_quotas(&user_id, &change).await?)
        }
    }
}
