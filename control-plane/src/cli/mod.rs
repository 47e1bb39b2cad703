//! The `control-plane` command line: `serve` plus the operator commands of
//! the "Operator contract" in ARCHITECTURE.md. Every command takes `--json`
//! and then prints exactly one JSON object on stdout (and an error as one
//! JSON object on stderr, see `report`); exit codes are in `exit`.

mod dsn;
mod exec;
pub mod exit;
mod lists;
mod moves;
mod quotas;
pub mod report;
mod restores;
mod table;
mod usage;
mod wait;

pub use exec::execute;

use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use cluster_protocol::control::{Access, DatabaseScope};

#[derive(Debug, Parser)]
#[command(
    name = "control-plane",
    version,
    propagate_version = true,
    about = "The cluster's control plane: server and operator CLI.",
    after_long_help = exit::HELP
)]
pub struct Cli {
    /// Print exactly one JSON object on stdout (errors: one JSON object
    /// {"error":{"code","message","exit"}} on stderr).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(flatten)]
    pub connection: Connection,
    #[command(subcommand)]
    pub command: Command,
}

/// Where the operator commands find the control plane.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// Base URL of the control plane's internal API (operator commands).
    #[arg(
        long = "server",
        env = "CONTROL_PLANE_URL",
        default_value = "http://127.0.0.1:8090",
        global = true,
        value_name = "URL"
    )]
    pub control_plane_url: String,
    /// The control plane's admin token (operator commands). Prefer the
    /// environment: a flag is visible in the process list.
    #[arg(
        long = "token",
        env = "CONTROL_PLANE_TOKEN",
        hide_env_values = true,
        global = true,
        value_name = "TOKEN"
    )]
    pub control_plane_token: Option<String>,
}

/// Parses the command line like `service_kit::parse::args`, except that a
/// usage error of a command line holding `--json` is printed as one JSON
/// object on stderr (exit code 2 either way).
pub fn parse_args() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let parsed = service_kit::parse::blank_is_unset(Cli::command())
        .try_get_matches_from(&argv)
        .and_then(|m| Cli::from_arg_matches(&m));
    match parsed {
        Ok(cli) => cli,
        Err(e) => {
            let json = argv.iter().any(|a| a == "--json");
            if json && e.use_stderr() {
                let rendered = e.render().to_string();
                let message = first_line_of(&rendered).unwrap_or(rendered);
                report::print_error(true, &exit::CliError::usage(message));
                std::process::exit(exit::Exit::Usage.code());
            }
            e.exit()
        }
    }
}

/// The first non-empty line of clap's message, without its `error: `.
fn first_line_of(rendered: &str) -> Option<String> {
    rendered
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| l.trim_start_matches("error: ").to_string())
}

/// A `--timeout` value: `30s`, `5m`, `250ms`, `1h` (a bare number is seconds).
fn parse_timeout(s: &str) -> Result<Duration, String> {
    match service_kit::parse::duration(s) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err("the timeout must be longer than zero".into()),
        Err(e) => Err(format!("{e:#}")),
    }
}

/// `--limit`: 1 to 1000 (the control plane's largest page).
const LIMIT_RANGE: std::ops::RangeInclusive<i64> = 1..=1000;

/// `--limit N --cursor C` of a paged list.
#[derive(Debug, Clone, Default, Args)]
pub struct PageArgs {
    /// At most this many items (1 to 1000; default: all). When more follow,
    /// the output names the cursor of the next page (`next_cursor`).
    #[arg(long, value_parser = clap::value_parser!(u32).range(LIMIT_RANGE))]
    pub limit: Option<u32>,
    /// Start after this item: the `next_cursor` of the previous page.
    #[arg(long)]
    pub cursor: Option<String>,
}

/// `--wait [--timeout D]`.
#[derive(Debug, Clone, Default, Args)]
pub struct WaitArgs {
    /// Give up waiting after this long (30s, 5m, 1h): exit code 6 (timed
    /// out), the moves going on. Needs --wait.
    #[arg(long, requires = "wait", value_parser = parse_timeout, value_name = "DURATION")]
    pub timeout: Option<Duration>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the control-plane server (configured from flags or the
    /// environment).
    Serve(Box<crate::config::Settings>),
    /// Manage users.
    #[command(subcommand)]
    Users(UsersCmd),
    /// Manage API keys.
    #[command(subcommand)]
    Keys(KeysCmd),
    /// Manage database memberships.
    #[command(subcommand)]
    Members(MembersCmd),
    /// Manage read-only support grants.
    #[command(subcommand)]
    Support(SupportCmd),
    /// Manage the shard registry.
    #[command(subcommand)]
    Shards(ShardsCmd),
    /// Inspect databases and their placement.
    #[command(subcommand)]
    Databases(DatabasesCmd),
    /// Move a database to another shard, online; prints the move.
    Move(MoveArgs),
    /// List, show or abort database moves.
    #[command(subcommand)]
    Moves(MovesCmd),
    /// Even out database counts across the shards by weight.
    ///
    /// Each active shard's share is proportional to its weight (a draining
    /// shard's is zero); shards above their share give their newest
    /// databases to those below, with the fewest moves.
    Rebalance {
        /// Only print the plan {"moves":[{database_id,from,to}]}; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Return when every started move has finished (done or aborted);
        /// exits non-zero if one was aborted. Ignored with --dry-run.
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        waiting: WaitArgs,
        /// Stop the rebalance under way: abort every unfinished move a
        /// rebalance started (those past their cutover finish); prints
        /// {"aborted":[...],"refused":[...]}.
        #[arg(long, conflicts_with_all = ["dry_run", "wait"])]
        abort: bool,
    },
    /// List or show point-in-time restores (`databases restore` starts one).
    #[command(subcommand)]
    Restores(RestoresCmd),
    /// Show or set an account's quotas (per-account overrides of part C's
    /// limits).
    #[command(subcommand)]
    Quotas(quotas::QuotasCmd),
    /// What an account uses (--user), or the accounts using most (--top N).
    Usage(usage::UsageArgs),
}

#[derive(Debug, Subcommand)]
pub enum UsersCmd {
    /// Create a user; prints {id,email,name}.
    Create {
        /// Email address (unique).
        #[arg(long)]
        email: String,
        /// Display name (defaults to the part of the email before @).
        #[arg(long)]
        name: Option<String>,
        /// Read a password for the account pages from the first line of
        /// standard input (never from the command line).
        #[arg(long)]
        password_stdin: bool,
    },
    /// Set a user's password for the account pages (first line of standard
    /// input); every browser session of the user ends.
    SetPassword {
        /// User id (usr_...).
        user_id: String,
        /// Required: the password is read from standard input only.
        #[arg(long, required = true)]
        password_stdin: bool,
    },
    /// List users, oldest first; prints {"users":[{id,email,name,suspended}]}.
    List {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Suspend a user: their keys stop working at once.
    Suspend {
        /// User id (usr_...).
        user_id: String,
    },
    /// Lift a user's suspension.
    Unsuspend {
        /// User id (usr_...).
        user_id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum KeysCmd {
    /// Mint an API key; prints {id,token,name,access,databases} (the token only once).
    Create {
        /// Owner of the key (usr_...).
        #[arg(long = "user")]
        user_id: String,
        /// A label for the key.
        #[arg(long)]
        name: String,
        /// read_write (default) or read_only.
        #[arg(long, value_parser = parse_access, default_value = "read_write")]
        access: Access,
        /// all (default) or a comma-separated list of database ids.
        #[arg(long, value_parser = parse_scope, default_value = "all")]
        databases: DatabaseScope,
    },
    /// Change a key's access and/or database scope.
    Update {
        /// Key id (key_...).
        key_id: String,
        /// read_write or read_only.
        #[arg(long, value_parser = parse_access)]
        access: Option<Access>,
        /// all or a comma-separated list of database ids.
        #[arg(long, value_parser = parse_scope)]
        databases: Option<DatabaseScope>,
    },
    /// Revoke a key: it stops working on the very next request.
    Revoke {
        /// Key id (key_...).
        key_id: String,
    },
    /// List a user's keys (never their tokens); prints
    /// {"keys":[{id,name,user_id,access,databases,created_at}]}.
    List {
        /// Owner of the keys (usr_...).
        #[arg(long = "user")]
        user_id: String,
    },
}

/// A database and a user.
#[derive(Debug, Args)]
pub struct DatabaseUser {
    /// Database id (db_...).
    #[arg(long = "database")]
    pub database_id: String,
    /// User id (usr_...).
    #[arg(long = "user")]
    pub user_id: String,
}

#[derive(Debug, Subcommand)]
pub enum MembersCmd {
    /// Add a member or change their role.
    Add {
        #[command(flatten)]
        target: DatabaseUser,
        /// viewer, editor or owner.
        #[arg(long, value_parser = parse_role)]
        role: cluster_protocol::control::Role,
    },
    /// Remove a member.
    Remove {
        #[command(flatten)]
        target: DatabaseUser,
    },
    /// List a database's members; prints {"members":[{user:{id,name,email},role,created_at}]}.
    List {
        /// Database id (db_...).
        #[arg(long = "database")]
        database_id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum SupportCmd {
    /// Grant a user read-only support access to a database.
    Grant {
        #[command(flatten)]
        target: DatabaseUser,
    },
    /// Revoke a support grant.
    Revoke {
        #[command(flatten)]
        target: DatabaseUser,
    },
}

#[derive(Debug, Subcommand)]
pub enum ShardsCmd {
    /// List shards with their database count and size; prints
    /// {"shards":[{name,url,postgres,weight,state,databases,bytes}]} (the
    /// DSN's password shown as ***; bytes absent when the shard's
    /// PostgreSQL did not answer).
    List,
    /// Register a shard. The DSN of its PostgreSQL comes from at most one
    /// of --postgres-env, --postgres-stdin (--dsn-stdin) or --postgres;
    /// with none, from the SHARD_DSN environment variable.
    #[command(group(clap::ArgGroup::new("dsn").required(false).args(["postgres", "postgres_env", "postgres_stdin"])))]
    Add {
        /// Unique shard name.
        #[arg(long)]
        name: String,
        /// Base URL of the shard node.
        #[arg(long)]
        url: String,
        /// DSN of the shard's PostgreSQL. Any local user can read it in the
        /// process list: with a password, prefer --postgres-env or
        /// --postgres-stdin (a warning says so).
        #[arg(long, value_name = "DSN")]
        postgres: Option<String>,
        /// Name of the environment variable holding the DSN.
        #[arg(long, value_name = "VAR")]
        postgres_env: Option<String>,
        /// Read the DSN from the first line of standard input.
        #[arg(long, alias = "dsn-stdin")]
        postgres_stdin: bool,
        /// Relative share of new databases (default 100).
        #[arg(long, default_value_t = 100)]
        weight: u32,
    },
    /// Stop placing new databases on a shard and move every database off it.
    Drain {
        /// Shard name.
        name: String,
        /// Return when no database is left on the shard.
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        waiting: WaitArgs,
        /// Only print the moves a drain would start
        /// {"shard","moves":[{database_id,from,to}]}; change nothing.
        #[arg(long, conflicts_with = "wait")]
        dry_run: bool,
    },
    /// Make a draining shard eligible for new databases again (moves already
    /// started go on).
    Activate {
        /// Shard name.
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum DatabasesCmd {
    /// List databases by position; prints {"databases":[...]}.
    List {
        /// Only databases on this shard.
        #[arg(long)]
        shard: Option<String>,
        /// Only databases in this state: creating or active.
        #[arg(long, value_parser = ["creating", "active"])]
        state: Option<String>,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Show one database.
    Show {
        /// Database id (db_...).
        database_id: String,
    },
    /// Bring a database back as it was at a moment, into a NEW database of
    /// the same owner (docs/restore.md); the original is untouched. Prints
    /// the restore job.
    Restore(RestoreArgs),
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// Database id (db_...).
    pub database_id: String,
    /// The moment, RFC 3339 (2026-01-31T12:00:00Z).
    #[arg(long)]
    pub as_of: String,
    /// Name of the new database (default: "<name> (restored <as-of>)").
    #[arg(long)]
    pub into: Option<String>,
    /// Return when the restore is done or failed (exit 5 when it failed).
    #[arg(long)]
    pub wait: bool,
    #[command(flatten)]
    pub waiting: WaitArgs,
}

#[derive(Debug, Subcommand)]
pub enum RestoresCmd {
    /// List restores, newest first; prints {"restores":[...]}.
    List,
    /// Show one restore.
    Show {
        /// Restore id (rst_...).
        id: String,
    },
}

#[derive(Debug, Args)]
pub struct MoveArgs {
    /// Database id (db_...).
    pub database_id: String,
    /// Target shard.
    #[arg(long)]
    pub to: String,
    /// Return when the move is done or aborted (exit non-zero when aborted).
    #[arg(long)]
    pub wait: bool,
    #[command(flatten)]
    pub waiting: WaitArgs,
    /// Only check the move and print it as planned
    /// {"moves":[{database_id,from,to}]}; change nothing.
    #[arg(long, conflicts_with = "wait")]
    pub dry_run: bool,
    /// Longest hold of the database's requests at cutover (default: the
    /// control plane's MOVE_PAUSE_BUDGET_MS).
    #[arg(long, value_parser = clap::value_parser!(i64).range(1..))]
    pub pause_budget_ms: Option<i64>,
    /// Test hook: the mover waits this long after entering each state.
    #[arg(long, hide = true, value_parser = clap::value_parser!(i64).range(0..))]
    pub step_delay_ms: Option<i64>,
}

#[derive(Debug, Subcommand)]
pub enum MovesCmd {
    /// List moves, newest first; prints {"moves":[...]}.
    List {
        /// Only moves from or to this shard.
        #[arg(long)]
        shard: Option<String>,
        /// Only moves in this state, or `unfinished` (neither done nor aborted).
        #[arg(long, value_parser = MOVE_STATES)]
        state: Option<String>,
        /// Only moves of this database (db_...).
        #[arg(long)]
        database: Option<String>,
        /// Only moves started by this rebalance or drain (its `batch`, reb_... or drn_...).
        #[arg(long)]
        batch: Option<String>,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Show one move.
    Show {
        /// Move id (mov_...).
        id: String,
    },
    /// Abort a move before its cutover; exits non-zero if it had already
    /// finished. With --batch or --all, every unfinished move of the batch
    /// (or every one) is aborted; prints {"aborted":[...],"refused":[...]}.
    #[command(group(clap::ArgGroup::new("which").required(true).args(["id", "batch", "all"])))]
    Abort {
        /// Move id (mov_...).
        id: Option<String>,
        /// Every unfinished move of this rebalance or drain (reb_... or drn_...).
        #[arg(long)]
        batch: Option<String>,
        /// Every unfinished move.
        #[arg(long)]
        all: bool,
    },
}

/// What `moves list --state` accepts.
const MOVE_STATES: [&str; 8] = [
    "unfinished",
    "pending",
    "copying",
    "catching_up",
    "cutover",
    "cleanup",
    "done",
    "aborted",
];

fn parse_access(s: &str) -> Result<Access, String> {
    Access::parse(s).ok_or_else(|| format!("{s:?} is not an access: use read_write or read_only"))
}

fn parse_role(s: &str) -> Result<cluster_protocol::control::Role, String> {
    cluster_protocol::control::Role::parse(s)
        .ok_or_else(|| format!("{s:?} is not a role: use viewer, editor or owner"))
}

/// `all` or `db_a,db_b`; an empty list is refused.
pub fn parse_scope(s: &str) -> Result<DatabaseScope, String> {
    match DatabaseScope::parse_cli(s) {
        DatabaseScope::Only(ids) if ids.is_empty() => {
            Err("give all or a comma-separated list of database ids".to_string())
        }
        scope => Ok(scope),
    }
}

#[cfg(test)]
mod tests;
