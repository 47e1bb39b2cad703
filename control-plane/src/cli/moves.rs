//! The scale-out commands: `move`, `moves list|show|abort`, `rebalance`,
//! `shards drain|activate` (ARCHITECTURE.md, "Operator contract").

use std::collections::HashSet;

use cluster_protocol::control::client::{ClientError, ControlPlaneClient};
use cluster_protocol::control::{CreateMove, DrainReply, Move, RebalanceRequest};

use super::exec::{to_json, Output};
use super::wait::{self, Progress};
use super::{table, MoveArgs, MovesCmd};

fn move_output(m: &Move, failure: Option<String>) -> anyhow::Result<Output> {
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

/// `move db_... --to S [--wait]`: prints the move once recorded, or once
/// finished with `--wait` (failing when it ended aborted).
pub async fn move_database(c: &ControlPlaneClient, args: MoveArgs) -> anyhow::Result<Output> {
    let m = c
        .create_move(&CreateMove {
            database_id: args.database_id,
            to: args.to,
            pause_budget_ms: args.pause_budget_ms,
            step_delay_ms: args.step_delay_ms,
        })
        .await?;
    if !args.wait {
        return move_output(&m, None);
    }
    let finished = wait::until_finished(c, vec![m], &mut Progress::new()).await?;
    let failure = wait::aborted_reason(&finished);
    let m = finished
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("the move vanished while waiting"))?;
    move_output(&m, failure)
}

pub async fn moves(c: &ControlPlaneClient, cmd: MovesCmd) -> anyhow::Result<Output> {
    match cmd {
        MovesCmd::List => {
            let list = c.moves().await?;
            Ok(Output {
                text: moves_text(&list.moves),
                json: to_json(&list)?,
                failure: None,
            })
        }
        MovesCmd::Show { id } => move_output(&c.get_move(&id).await?, None),
        MovesCmd::Abort { id } => match c.abort_move(&id).await {
            Ok(m) => move_output(&m, None),
            // Already finished (or past its flip): print it, and say why not.
            Err(ClientError::Api { status: 409, body }) => {
                move_output(&c.get_move(&id).await?, Some(body.message))
            }
            Err(e) => Err(e.into()),
        },
    }
}

/// `rebalance [--dry-run] [--wait]`.
pub async fn rebalance(
    c: &ControlPlaneClient,
    dry_run: bool,
    wait_for_moves: bool,
) -> anyhow::Result<Output> {
    let mut reply = c.rebalance(&RebalanceRequest { dry_run }).await?;
    if dry_run {
        let text = if reply.moves.is_empty() {
            "nothing to move: the shards are balanced".into()
        } else {
            table::plan(&reply.moves)
        };
        return Ok(Output {
            json: to_json(&reply)?,
            text,
            failure: None,
        });
    }
    let mut failure = None;
    let started = reply.started.take().unwrap_or_default();
    let started = if wait_for_moves {
        let finished = wait::until_finished(c, started, &mut Progress::new()).await?;
        failure = wait::aborted_reason(&finished);
        finished
    } else {
        started
    };
    let text = format!(
        "{} moves planned, {} started\n{}",
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

/// `shards drain N [--wait]`.
pub async fn drain(
    c: &ControlPlaneClient,
    name: &str,
    wait_for_it: bool,
) -> anyhow::Result<Output> {
    let mut reply = c.drain_shard(name).await?;
    let mut failure = None;
    if wait_for_it {
        failure = wait_drained(c, &mut reply).await?;
    }
    let head = if wait_for_it && failure.is_none() {
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
/// a move ended aborted) waiting ends with the reason.
async fn wait_drained(
    c: &ControlPlaneClient,
    reply: &mut DrainReply,
) -> anyhow::Result<Option<String>> {
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
            if let Some(reason) = wait::aborted_reason(&reply.moves) {
                return Ok(Some(reason));
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
                return Ok(Some(format!(
                    "{} database(s) are still on shard {name} with no move under way \
                     ({}); run `control-plane shards drain {name}` again",
                    left.len(),
                    listed.join(", ")
                )));
            }
            reply.moves.extend(others);
        }
        tokio::time::sleep(wait::POLL).await;
        wait::poll_round(c, &mut reply.moves, &mut progress).await?;
    }
}

/// `shards activate N`.
pub async fn activate(c: &ControlPlaneClient, name: &str) -> anyhow::Result<Output> {
    let s = c.activate_shard(name).await?;
    Ok(Output {
        text: format!("shard {} is active\n{}", s.name, table::shard(&s)),
        json: to_json(&s)?,
        failure: None,
    })
}
