//! Database moves, drain and rebalance: the types of the control plane's
//! routes for them (see the table in [`super`]) and the operator CLI's
//! output shapes (ARCHITECTURE.md, "Operator contract").

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::Shard;

/// Where a move is. `Done` and `Aborted` are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MoveState {
    /// Recorded; waits for a free move slot on both shards.
    Pending,
    /// Schema made on the target, rows copied by logical replication,
    /// secondary indexes built after.
    Copying,
    /// The target replays the source's changes until the lag fits the pause budget.
    CatchingUp,
    /// Routers hold the database's requests, the source is fenced, the target
    /// replays the last change, the copy is verified and the placement flips.
    Cutover,
    /// Flipped: replication is dropped and, once every router has
    /// acknowledged the new epoch, the source copy.
    Cleanup,
    Done,
    Aborted,
}

impl MoveState {
    pub const ALL: [MoveState; 7] = [
        MoveState::Pending,
        MoveState::Copying,
        MoveState::CatchingUp,
        MoveState::Cutover,
        MoveState::Cleanup,
        MoveState::Done,
        MoveState::Aborted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MoveState::Pending => "pending",
            MoveState::Copying => "copying",
            MoveState::CatchingUp => "catching_up",
            MoveState::Cutover => "cutover",
            MoveState::Cleanup => "cleanup",
            MoveState::Done => "done",
            MoveState::Aborted => "aborted",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// `done` or `aborted`.
    pub fn is_finished(self) -> bool {
        matches!(self, MoveState::Done | MoveState::Aborted)
    }
}

/// How far a move has come (best effort, for progress bars).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MoveProgress {
    /// Replicated tables (tenant tables and catalog tables) in the copy.
    pub tables_total: i64,
    /// Of those, the ones whose initial copy has finished.
    pub tables_copied: i64,
    /// Bytes of WAL the target still has to replay (catching up), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_bytes: Option<i64>,
}

/// A database move as the API and `--json` print it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Move {
    /// `mov_` + 12 characters.
    pub id: String,
    pub database_id: String,
    /// Shard names.
    pub from: String,
    pub to: String,
    pub state: MoveState,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// How long the database's requests were held at cutover (fence to
    /// release), once a cutover has run.
    pub pause_ms: Option<i64>,
    /// Why the move was aborted (or why its last step failed and is retried).
    pub error: Option<String>,
    /// Cutover attempts so far.
    #[serde(default)]
    pub attempts: i32,
    /// Pause budget of this move's cutover.
    #[serde(default)]
    pub pause_budget_ms: i64,
    /// From the flip until every live router acknowledged the new epoch.
    #[serde(default)]
    pub convergence_ms: Option<i64>,
    #[serde(default)]
    pub progress: MoveProgress,
    pub finished_at: Option<DateTime<Utc>>,
    /// The rebalance (`reb_...`) or drain (`drn_...`) that started the
    /// move; absent for a move started on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
}

/// `POST /internal/moves`
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreateMove {
    pub database_id: String,
    /// Target shard name.
    pub to: String,
    /// Overrides the control plane's `MOVE_PAUSE_BUDGET_MS` for this move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_budget_ms: Option<i64>,
    /// Test hook: the mover waits this long after entering each state and
    /// after the fence, so chaos tests can act while the move is in a given
    /// state (the CLI's hidden `--step-delay-ms`). Overrides `MOVE_STEP_DELAY_MS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_delay_ms: Option<i64>,
    /// Validate and answer the move as it would be recorded, recording
    /// nothing (`move --dry-run`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

/// `GET /internal/moves` (newest first). `next_cursor` is set when a
/// `limit` cut the list short: pass it as `cursor` for the next page.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MoveList {
    pub moves: Vec<Move>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// The filters and page of `GET /internal/moves` (query string), all optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MoveFilter {
    /// Moves from or to this shard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// A move state, or `unfinished` (neither `done` nor `aborted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Moves of this database.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// Moves started by this rebalance or drain (`reb_...`, `drn_...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// A page of a list: at most `limit` items after the item `cursor` names
/// (the previous page's `next_cursor`). No limit: the whole list.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Page {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// One move of a rebalance plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedMove {
    pub database_id: String,
    pub from: String,
    pub to: String,
}

/// `POST /internal/rebalance`
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RebalanceRequest {
    #[serde(default)]
    pub dry_run: bool,
}

/// The reply of `POST /internal/rebalance`: with `dry_run`, only the plan
/// (`moves`, changing nothing); otherwise the plan and the moves it started
/// (`started`, in the plan's order).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RebalanceReply {
    pub moves: Vec<PlannedMove>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<Vec<Move>>,
    /// The batch id recorded on the started moves (`moves abort --batch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
}

/// The prefix of a rebalance's batch id ([`Move::batch`]).
pub const REBALANCE_BATCH_PREFIX: &str = "reb_";
/// The prefix of a drain's batch id.
pub const DRAIN_BATCH_PREFIX: &str = "drn_";

/// `POST /internal/shards/{name}/drain` (an empty body is a real drain).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DrainRequest {
    /// Answer the plan only; the shard stays as it is and no move starts.
    #[serde(default)]
    pub dry_run: bool,
}

/// The reply of `POST /internal/shards/{name}/drain`: the shard (now
/// `draining`) and the moves started to empty it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DrainReply {
    #[serde(flatten)]
    pub shard: Shard,
    pub moves: Vec<Move>,
    /// The planned moves (with `dry_run`, the only answer: `moves` is empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Vec<PlannedMove>>,
    /// The batch id recorded on the started moves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
}
