//! The scale-out commands: `move`, `moves list|show|abort`, `rebalance`,
//! `shards drain|activate` (ARCHITECTURE.md, "Operator contract").

use std::collections::HashSet;

use cluster_protocol::control::client::{ClientError, ControlPlaneClient};
use cluster_protocol::control::{
    CreateMove, DrainReply, DrainRequest, Move, MoveFilter, PlannedMove, RebalanceRequest,
    REBALANCE_BATCH_PREFIX,
};
use serde_json::json;

use super::exec::{output, to_json, Output};
use super::exit::CliError;
use super::wait::{self, Deadline, Progress};
use super::{dsn, lists, table, MoveArgs, MovesCmd, WaitArgs};

fn move_output(m: &Move, failure: Option<CliError>) -> anyhow::Result<Output> {
    Ok(Output {
        json: to_json(m)?,
        text: table::one_move(m),
        failure,
    })
}

fn moves_text(moves: &[Move]) -> String {
    if moves.is_empty() {
        "no moves".into()
    } else {
        table::moves(moves)
    }
}

fn plan_text(plan: &[PlannedMove], none: &str) -> String {
    if plan.is_empty() {
        none.into()
    } else {
        table::plan(plan)
    }
}

/// `move db_... --to S [--wait [--timeout D]] [--dry-run]`: prints the move
/// once recorded, or once finished with `--wait` (failing when it ended
/// aborted or the timeout ran out); with `--dry-run` the control plane
/// checks the move and records nothing.
pub async fn move_database(c: &ControlPlaneClient, args: MoveArgs) -> anyhow::Result<Output> {
    let m = c
        .create_move(&CreateMove {
            database_id: args.database_id,
            to: args.to,
            pause_budget_ms: args.pause_budget_ms,
            step_delay_ms: args.step_delay_ms,
            dry_run: args.dry_run,
        })
        .await?;
    if args.dry_run {
        let plan = vec![PlannedMove {
            database_id: m.database_id,
            from: m.from,
            to: m.to,
        }];
        return Ok(output(
            json!({ "moves": plan }),
            format!(
                "would start (dry run, nothing changed):\n{}",
                table::plan(&plan)
            ),
        ));
    }
    if !args.wait {
        return move_output(&m, None);
    }
    let deadline = Deadline::after(args.waiting.timeout);
    let (finished, timed_out) =
        wait::until_finished(c, vec![m], &mut Progress::new(), deadline).await?;
    let failure = timed_out.or_else(|| wait::aborted(&finished));
    let m = finished
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("the move vanished while waiting"))?;
    move_output(&m, failure)
}

pub async fn moves(c: &ControlPlaneClient, cmd: MovesCmd) -> anyhow::Result<Output> {
    match cmd {
        MovesCmd::List {
            shard,
            state,
            database,
            batch,
            page,
        } => {
            let filter = MoveFilter {
                shard,
                state,
                database,
                batch,
                limit: page.limit,
                cursor: page.cursor,
            };
            lists::moves(c, filter).await
        }
        MovesCmd::Show { id } => move_output(&c.get_move(&id).await?, None),
        MovesCmd::Abort {
            id: Some(id),
            batch: None,
            all: false,
        } => match c.abort_move(&id).await {
            Ok(m) => move_output(&m, None),
            // Already finished (or past its flip): print it, and say why not.
            Err(ClientError::Api { status: 409, body }) => move_output(
                &c.get_move(&id).await?,
                Some(CliError::refused(body.code.as_str(), body.message)),
            ),
            Err(e) => Err(e.into()),
        },
        MovesCmd::Abort { batch, all, .. } => {
            if batch.is_none() && !all {
                return Err(CliError::usage("give a move id, --batch B or --all").into());
            }
            let filter = MoveFilter {
                batch,
                state: Some("unfinished".into()),
                ..MoveFilter::default()
            };
            let unfinished = c.moves_where(&filter).await?.moves;
            abort_all(c, unfinished, "no unfinished move to abort").await
        }
    }
}

/// `rebalance --abort`: aborts every unfinished move a rebalance started
/// (its batch `reb_...`).
pub async fn stop_rebalance(c: &ControlPlaneClient) -> anyhow::Result<Output> {
    let filter = MoveFilter {
        state: Some("unfinished".into()),
        ..MoveFilter::default()
    };
    let of_rebalances: Vec<Move> = c
        .moves_where(&filter)
        .await?
        .moves
        .into_iter()
        .filter(|m| {
            m.batch
                .as_deref()
                .is_some_and(|b| b.starts_with(REBALANCE_BATCH_PREFIX))
        })
        .collect();
    abort_all(c, of_rebalances, "no rebalance under way: nothing to abort").await
}

/// Aborts each of `moves`; prints {"aborted":[moves],"refused":[{id,
/// state,code,message}]} and fails (refused) when some could not be
/// aborted (finished or switched over meanwhile).
async fn abort_all(c: &ControlPlaneClient, moves: Vec<Move>, none: &str) -> anyhow::Result<Output> {
    let mut aborted = Vec::new();
    let mut refused = Vec::new();
    for m in moves {
        match c.abort_move(&m.id).await {
            Ok(after) => aborted.push(after),
            Err(ClientError::Api { status, body }) if (400..500).contains(&status) => {
                refused.push(json!({
                    "id": m.id,
                    "database_id": m.database_id,
                    "code": body.code.as_str(),
                    "message": body.message,
                }));
            }
            Err(e) => return Err(e.into()),
        }
    }
    let mut text = if aborted.is_empty() && refused.is_empty() {
        none.to_string()
    } else {
        format!(
            "{} aborted (a running move rolls back at its next step), {} refused\n{}",
            aborted.len(),
            refused.len(),
            moves_text(&aborted)
        )
    };
    for r in &refused {
        let field = |k: &str| r[k].as_str().unwrap_or_default().to_string();
        text.push_str(&format!("\nrefused {}: {}", field("id"), field("message")));
    }
    let failure = (!refused.is_empty()).then(|| {
        CliError::refused(
            "conflict",
            format!(
                "{} move(s) could not be aborted (finished or switched over)",
                refused.len()
            ),
        )
    });
    Ok(Output {
        json: json!({ "aborted": aborted, "refused": refused }),
        text,
        failure,
    })
}

/// `rebalance [--dry-run] [--wait [--timeout D]]`.
pub async fn rebalance(
    c: &ControlPlaneClient,
    dry_run: bool,
    waiting: Option<WaitArgs>,
) -> anyhow::Result<Output> {
    let mut reply = c.rebalance(&RebalanceRequest { dry_run }).await?;
    if dry_run {
        let text = plan_text(&reply.moves, "nothing to move: the shards are balanced");
        return Ok(output(to_json(&reply)?, text));
    }
    let mut failure = None;
    let started = reply.started.take().unwrap_or_default();
    let started = match waiting {
        Some(w) => {
            let deadline = Deadline::after(w.timeout);
            let (finished, timed_out) =
                wait::until_finished(c, started, &mut Progress::new(), deadline).await?;
            failure = timed_out.or_else(|| wait::aborted(&finished));
            finished
        }
        None => started,
    };
    let batch = reply
        .batch
        .as_deref()
        .map(|b| format!(" (batch {b}; stop it with `control-plane rebalance --abort`)"))
        .unwrap_or_default();
    let text = format!(
        "{} moves planned, {} started{batch}\n{}",
        reply.moves.len(),
        started.len(),
        moves_text(&started)
    );
    reply.started = Some(started);
    Ok(Output {
        json: to_json(&reply)?,
        text,
        failure,
    })
}

/// `shards drain N --dry-run`: the moves a drain would start.
pub async fn drain_plan(c: &ControlPlaneClient, name: &str) -> anyhow::Result<Output> {
    let reply = c
        .drain_shard_with(name, &DrainRequest { dry_run: true })
        .await?;
    let plan = reply.plan.unwrap_or_default();
    let text = format!(
        "draining {} would start (dry run, nothing changed):\n{}",
        reply.shard.name,
        plan_text(&plan, "no move: the shard holds no database to move")
    );
    Ok(output(
        json!({ "shard": reply.shard.name, "moves": plan }),
        text,
    ))
}

/// `shards drain N [--wait [--timeout D]]`.
pub async fn drain(
    c: &ControlPlaneClient,
    name: &str,
    waiting: Option<WaitArgs>,
) -> anyhow::Result<Output> {
    let mut reply = c.drain_shard(name).await?;
    dsn::redact_shard(&mut reply.shard);
    let mut failure = None;
    let waited = waiting.is_some();
    if let Some(w) = waiting {
        failure = wait_drained(c, &mut reply, Deadline::after(w.timeout)).await?;
    }
    let head = if waited && failure.is_none() {
        format!("shard {} is drained", reply.shard.name)
    } else if reply.moves.is_empty() {
        format!("shard {} is draining; no move started", reply.shard.name)
    } else {
        format!(
            "shard {} is draining; {} moves started",
            reply.shard.name,
            reply.moves.len()
        )
    };
    let text = if reply.moves.is_empty() {
        head
    } else {
        format!("{head}\n{}", table::moves(&reply.moves))
    };
    Ok(Output {
        text,
        json: to_json(&reply)?,
        failure,
    })
}

/// Waits until no database is left on the shard and every move of the
/// drain has finished. A database left with no move of ours running is
/// waited for if someone else's move of it is under way; otherwise (or if
/// a move ended aborted, or the deadline passed) waiting ends with the
/// error to report.
async fn wait_drained(
    c: &ControlPlaneClient,
    reply: &mut DrainReply,
    deadline: Deadline,
) -> anyhow::Result<Option<CliError>> {
    let name = reply.shard.name.clone();
    let mut progress = Progress::new();
    for m in &reply.moves {
        progress.show(m);
    }
    loop {
        let left = wait::patiently(&progress, || c.databases(Some(&name)))
            .await?
            .databases;
        let running = reply.moves.iter().any(|m| !m.state.is_finished());
        if left.is_empty() && !running {
            return Ok(None);
        }
        if !running {
            if let Some(e) = wait::aborted(&reply.moves) {
                return Ok(Some(e));
            }
            let ids: HashSet<&str> = left.iter().map(|d| d.id.as_str()).collect();
            let others: Vec<Move> = wait::patiently(&progress, || c.moves())
                .await?
                .moves
                .into_iter()
                .filter(|m| !m.state.is_finished() && ids.contains(m.database_id.as_str()))
                .collect();
            if others.is_empty() {
                let listed: Vec<&str> = left.iter().map(|d| d.id.as_str()).collect();
                return Ok(Some(CliError::new(
                    super::exit::Exit::Failed,
                    "not_drained",
                    format!(
                        "{} database(s) are still on shard {name} with no move under way \
                         ({}); run `control-plane shards drain {name}` again",
                        left.len(),
                        listed.join(", ")
                    ),
                )));
            }
            reply.moves.extend(others);
        }
        if deadline.passed() {
            let unfinished: Vec<&Move> = reply
                .moves
                .iter()
                .filter(|m| !m.state.is_finished())
                .collect();
            return Ok(Some(deadline.error(&unfinished)));
        }
        tokio::time::sleep(wait::POLL).await;
        wait::poll_round(c, &mut reply.moves, &mut progress).await?;
    }
}

/// `shards activate N`.
pub async fn activate(c: &ControlPlaneClient, name: &str) -> anyhow::Result<Output> {
    let mut s = c.activate_shard(name).await?;
    dsn::redact_shard(&mut s);
    Ok(output(
        to_json(&s)?,
        format!("shard {} is active\n{}", s.name, table::shard(&s)),
    ))
}
