//! `--wait`: polling moves until they finish, with one progress bar per
//! move on stderr when stderr is a terminal (state, tables copied / total).
//! A control plane that is briefly unreachable (restarting) is waited for.

use std::collections::HashMap;
use std::future::Future;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use cluster_protocol::control::client::{ClientError, ControlPlaneClient};
use cluster_protocol::control::Move;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use super::exit::CliError;

/// How often a waiting command asks the control plane again.
pub const POLL: Duration = Duration::from_millis(200);
/// Unfinished moves read per poll: the first ones in order, which are the
/// ones the mover runs (the rest wait in `pending`), so a drain of many
/// databases costs a bounded number of requests per poll.
const POLLED_PER_ROUND: usize = 8;
/// How long the control plane may stay unreachable before waiting gives up.
const UNREACHABLE_LIMIT: Duration = Duration::from_secs(120);
/// Pause between tries while it is unreachable.
const UNREACHABLE_RETRY: Duration = Duration::from_secs(1);

/// Progress bars, or nothing when stderr is not a terminal.
pub struct Progress {
    multi: Option<MultiProgress>,
    bars: HashMap<String, ProgressBar>,
}

impl Progress {
    pub fn new() -> Self {
        Self {
            multi: std::io::stderr().is_terminal().then(MultiProgress::new),
            bars: HashMap::new(),
        }
    }

    /// Shows where `m` is now.
    pub fn show(&mut self, m: &Move) {
        let Some(multi) = &self.multi else { return };
        let bar = self.bars.entry(m.id.clone()).or_insert_with(|| {
            let style =
                ProgressStyle::with_template("{prefix} [{bar:24}] {pos}/{len} tables  {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> ");
            multi.add(
                ProgressBar::new(0)
                    .with_style(style)
                    .with_prefix(format!("{} {} -> {}", m.database_id, m.from, m.to))
                    .with_message(m.state.as_str()),
            )
        });
        bar.set_length(u64::try_from(m.progress.tables_total).unwrap_or(0));
        bar.set_position(u64::try_from(m.progress.tables_copied).unwrap_or(0));
        let msg = match &m.error {
            Some(e) => format!("{} ({e})", m.state.as_str()),
            None => m.state.as_str().to_string(),
        };
        if m.state.is_finished() {
            bar.finish_with_message(msg);
        } else {
            bar.set_message(msg);
        }
    }

    /// A line on stderr that does not tear the bars.
    pub fn note(&self, line: &str) {
        match &self.multi {
            Some(multi) => {
                if multi.println(line).is_err() {
                    eprintln!("{line}");
                }
            }
            None => eprintln!("{line}"),
        }
    }
}

/// Runs `call` until it answers, riding out a control plane that is
/// unreachable (or answers 503) for up to `UNREACHABLE_LIMIT`.
pub async fn patiently<T, F, Fut>(progress: &Progress, mut call: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ClientError>>,
{
    let mut since: Option<Instant> = None;
    loop {
        match call().await {
            Ok(v) => return Ok(v),
            Err(e @ (ClientError::Transport(_) | ClientError::Api { status: 503, .. })) => {
                let first = *since.get_or_insert_with(Instant::now);
                if first.elapsed() >= UNREACHABLE_LIMIT {
                    return Err(e.into());
                }
                if first.elapsed() < UNREACHABLE_RETRY {
                    progress.note(&format!("{e}; still waiting"));
                }
                tokio::time::sleep(UNREACHABLE_RETRY).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Reads the state of the first unfinished moves once (see `POLLED_PER_ROUND`).
pub async fn poll_round(
    c: &ControlPlaneClient,
    moves: &mut [Move],
    progress: &mut Progress,
) -> anyhow::Result<()> {
    let unfinished: Vec<usize> = (0..moves.len())
        .filter(|&i| !moves[i].state.is_finished())
        .take(POLLED_PER_ROUND)
        .collect();
    for i in unfinished {
        let id = moves[i].id.clone();
        moves[i] = patiently(progress, || c.get_move(&id)).await?;
    }
    for m in moves.iter() {
        progress.show(m);
    }
    Ok(())
}

/// When `--wait` gives up (`--timeout`), if ever.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Option<Instant>,
    after: Option<Duration>,
}

impl Deadline {
    /// `timeout` from now (`None`: never).
    pub fn after(timeout: Option<Duration>) -> Self {
        Self {
            at: timeout.map(|t| Instant::now() + t),
            after: timeout,
        }
    }

    pub fn passed(&self) -> bool {
        self.at.is_some_and(|at| Instant::now() >= at)
    }

    /// The timed-out error for `unfinished` moves still under way.
    pub fn error(&self, unfinished: &[&Move]) -> CliError {
        let ids: Vec<String> = unfinished
            .iter()
            .map(|m| format!("{} ({})", m.id, m.state.as_str()))
            .collect();
        let after = self
            .after
            .map(|d| format!(" after {}", humantime(d)))
            .unwrap_or_default();
        CliError::timed_out(format!(
            "timed out{after}: still under way, and left running: {}; watch with `control-plane moves show ID` or stop with `control-plane moves abort ID`",
            ids.join(", ")
        ))
    }
}

fn humantime(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// Polls until every move is `done` or `aborted`, or `deadline` passes;
/// returns them as they stand, with the timed-out error in the latter case.
pub async fn until_finished(
    c: &ControlPlaneClient,
    mut moves: Vec<Move>,
    progress: &mut Progress,
    deadline: Deadline,
) -> anyhow::Result<(Vec<Move>, Option<CliError>)> {
    for m in &moves {
        progress.show(m);
    }
    while moves.iter().any(|m| !m.state.is_finished()) {
        if deadline.passed() {
            let left: Vec<&Move> = moves.iter().filter(|m| !m.state.is_finished()).collect();
            let e = deadline.error(&left);
            return Ok((moves, Some(e)));
        }
        tokio::time::sleep(POLL).await;
        poll_round(c, &mut moves, progress).await?;
    }
    Ok((moves, None))
}

/// The aborted error to report when some of `moves` ended aborted.
pub fn aborted(moves: &[Move]) -> Option<CliError> {
    aborted_reason(moves).map(CliError::aborted)
}

/// The reason to report when some of `moves` ended aborted.
pub fn aborted_reason(moves: &[Move]) -> Option<String> {
    let aborted: Vec<String> = moves
        .iter()
        .filter(|m| m.state == cluster_protocol::control::MoveState::Aborted)
        .map(|m| {
            format!(
                "move {} of {} ({} -> {}) was aborted: {}",
                m.id,
                m.database_id,
                m.from,
                m.to,
                m.error.as_deref().unwrap_or("no reason recorded")
            )
        })
        .collect();
    (!aborted.is_empty()).then(|| aborted.join("\n"))
}
