//! `usage --user usr_...` and the fleet view `usage --top N [--by M]`
//! (docs/operations.md, "Quotas and usage").

use clap::Args;
use cluster_protocol::control::client::ControlPlaneClient;
use cluster_protocol::control::quotas::{AccountTotals, AccountUsage, TopUsage, UsageMeasure};

use super::exec::{to_json, Output};
use super::table;

#[derive(Debug, Args)]
pub struct UsageArgs {
    /// One account: its totals and each database it owns; prints
    /// {user_id, database_count, records, attachment_bytes,
    /// requests_last_hour, requests_last_day, databases:[...]}.
    #[arg(long = "user", conflicts_with = "top", required_unless_present = "top")]
    pub user_id: Option<String>,
    /// The fleet: the N accounts highest by --by; prints {by, accounts:[...]}.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub top: Option<u32>,
    /// What --top ranks by: requests_last_day (default), requests_last_hour,
    /// records, attachment_bytes or databases.
    #[arg(long, value_parser = parse_measure, requires = "top")]
    pub by: Option<UsageMeasure>,
}

fn parse_measure(s: &str) -> Result<UsageMeasure, String> {
    UsageMeasure::parse(s).ok_or_else(|| {
        let names: Vec<&str> = UsageMeasure::ALL.iter().map(|m| m.as_str()).collect();
        format!("{s:?} is not a measure: use one of {}", names.join(", "))
    })
}

/// The account's totals, then one row per database.
pub fn user_text(u: &AccountUsage) -> String {
    let totals = table::fields(&[
        ("user", u.user_id.clone()),
        ("databases", u.database_count.to_string()),
        ("records", u.records.to_string()),
        ("attachment_bytes", u.attachment_bytes.to_string()),
        ("requests_last_hour", u.requests_last_hour.to_string()),
        ("requests_last_day", u.requests_last_day.to_string()),
    ]);
    if u.databases.is_empty() {
        return totals;
    }
    let rows: Vec<Vec<String>> = u
        .databases
        .iter()
        .map(|d| {
            vec![
                d.database_id.clone(),
                d.shard.clone(),
                d.tables.to_string(),
                d.records.to_string(),
                d.attachment_bytes.to_string(),
                d.requests_last_hour.to_string(),
                d.requests_last_day.to_string(),
            ]
        })
        .collect();
    let per_db = table::table(
        &[
            "DATABASE",
            "SHARD",
            "TABLES",
            "RECORDS",
            "ATTACHMENT BYTES",
            "REQ 1H",
            "REQ 24H",
        ],
        &rows,
    );
    format!("{totals}\n\n{per_db}")
}

pub fn top_text(t: &TopUsage) -> String {
    if t.accounts.is_empty() {
        return "no accounts own databases".into();
    }
    let row = |a: &AccountTotals| {
        vec![
            a.user_id.clone(),
            a.database_count.to_string(),
            a.records.to_string(),
            a.attachment_bytes.to_string(),
            a.requests_last_hour.to_string(),
            a.requests_last_day.to_string(),
        ]
    };
    let rows: Vec<Vec<String>> = t.accounts.iter().map(row).collect();
    let list = table::table(
        &[
            "USER",
            "DATABASES",
            "RECORDS",
            "ATTACHMENT BYTES",
            "REQ 1H",
            "REQ 24H",
        ],
        &rows,
    );
    format!("by {}\n{list}", t.by.as_str())
}

pub async fn usage(c: &ControlPlaneClient, args: UsageArgs) -> anyhow::Result<Output> {
    if let Some(top) = args.top {
        let t = c.top_usage(top, args.by.unwrap_or_default()).await?;
        return Ok(Output {
            json: to_json(&t)?,
            text: top_text(&t),
            failure: None,
        });
    }
    let user_id = args
        .user_id
        .ok_or_else(|| anyhow::anyhow!("give --user usr_... or --top N"))?;
    let u = c.usage(&user_id).await?;
    Ok(Output {
        json: to_json(&u)?,
        text: user_text(&u),
        failure: None,
    })
}
