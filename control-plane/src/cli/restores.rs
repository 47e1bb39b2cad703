//! `databases restore DB --as-of T [--into NAME] [--wait [--timeout D]]`
//! and `restores list|show` (docs/restore.md). With `--wait` a progress
//! bar (rows copied / total) on stderr when it is a terminal.

use std::io::IsTerminal;

use cluster_protocol::control::client::ControlPlaneClient;
use cluster_protocol::control::{CreateRestore, Restore, RestoreState};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use super::exec::{to_json, Output};
use super::exit::CliError;
use super::table::{self, fields, or_dash, time};
use super::wait::{patiently, Deadline, Progress, POLL};
use super::{RestoreArgs, RestoresCmd};

pub fn one(r: &Restore) -> String {
    fields(&[
        ("id", r.id.clone()),
        ("database_id", r.database_id.clone()),
        ("new_database_id", r.new_database_id.clone()),
        ("shard", r.shard.clone()),
        ("as_of", r.as_of.to_rfc3339()),
        ("into", or_dash(r.into.clone())),
        ("state", r.state.as_str().into()),
        ("rows", format!("{}/{} copied", r.rows_copied, r.rows_total)),
        ("error", or_dash(r.error.clone())),
        ("created_at", time(r.created_at)),
        ("updated_at", time(r.updated_at)),
        ("finished_at", or_dash(r.finished_at.map(time))),
    ])
}

fn many(list: &[Restore]) -> String {
    if list.is_empty() {
        return "no restores".into();
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|r| {
            vec![
                r.id.clone(),
                r.database_id.clone(),
                r.new_database_id.clone(),
                r.as_of.to_rfc3339(),
                r.state.as_str().into(),
                format!("{}/{}", r.rows_copied, r.rows_total),
                r.error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    table::table(
        &[
            "ID",
            "DATABASE",
            "NEW_DATABASE",
            "AS_OF",
            "STATE",
            "ROWS",
            "ERROR",
        ],
        &rows,
    )
}

fn restore_output(r: &Restore, failure: Option<CliError>) -> anyhow::Result<Output> {
    Ok(Output {
        json: to_json(r)?,
        text: one(r),
        failure,
    })
}

/// The error to report for a restore that ended `failed`.
pub fn failed(r: &Restore) -> Option<CliError> {
    (r.state == RestoreState::Failed).then(|| {
        CliError::aborted(format!(
            "restore {} of {} failed: {}",
            r.id,
            r.database_id,
            r.error.as_deref().unwrap_or("no reason recorded")
        ))
    })
}

/// `databases restore`: prints the recorded job, or with `--wait` the
/// finished one (failing when it failed or the timeout ran out).
pub async fn restore(c: &ControlPlaneClient, args: RestoreArgs) -> anyhow::Result<Output> {
    let r = c
        .create_restore(
            &args.database_id,
            &CreateRestore {
                as_of: args.as_of,
                into: args.into,
            },
        )
        .await?;
    if !args.wait {
        return restore_output(&r, None);
    }
    let deadline = Deadline::after(args.waiting.timeout);
    let notes = Progress::new();
    let bar = std::io::stderr().is_terminal().then(|| {
        let style = ProgressStyle::with_template("{prefix} [{bar:24}] {pos}/{len} rows  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        ProgressBar::new(0)
            .with_style(style)
            .with_prefix(format!("{} -> {}", r.database_id, r.new_database_id))
    });
    let mut r = r;
    loop {
        if let Some(bar) = &bar {
            bar.set_length(u64::try_from(r.rows_total).unwrap_or(0));
            bar.set_position(u64::try_from(r.rows_copied).unwrap_or(0));
            bar.set_message(r.state.as_str());
        }
        if r.state.is_finished() {
            if let Some(bar) = &bar {
                bar.finish_with_message(r.state.as_str());
            }
            let failure = failed(&r);
            return restore_output(&r, failure);
        }
        if deadline.passed() {
            let e = CliError::timed_out(format!(
                "timed out: restore {} is still {} and goes on; watch it with `control-plane restores show {}`",
                r.id,
                r.state.as_str(),
                r.id
            ));
            return restore_output(&r, Some(e));
        }
        tokio::time::sleep(POLL).await;
        let id = r.id.clone();
        r = patiently(&notes, || c.get_restore(&id)).await?;
    }
}

pub async fn restores(c: &ControlPlaneClient, cmd: RestoresCmd) -> anyhow::Result<Output> {
    match cmd {
        RestoresCmd::List => {
            let list = c.restores().await?;
            Ok(Output {
                text: many(&list.restores),
                json: json!({ "restores": list.restores }),
                failure: None,
            })
        }
        RestoresCmd::Show { id } => restore_output(&c.get_restore(&id).await?, None),
    }
}
