//! The `control-plane` command line: `serve` plus the operator commands of
//! the "Operator contract" in ARCHITECTURE.md. Every command takes `--json`
//! and then prints exactly one JSON object on stdout.

mod dsn;
mod exec;
mod moves;
mod quotas;
mod table;
mod usage;
mod wait;

pub use exec::execute;

use clap::{Args, Parser, Subcommand};
use cluster_protocol::control::{Access, DatabaseScope};

#[derive(Debug, Parser)]
#[command(
    name = "control-plane",
    version,
    about = "The cluster's control plane: server and operator CLI."
)]
pub struct Cli {
    /// Print exactly one JSON object on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
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
    },
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
    /// List shards; prints {"shards":[...]}.
    List,
    /// Register a shard. The DSN of its PostgreSQL comes from exactly one
    /// of --postgres-env, --postgres-stdin or --postgres.
    #[command(group(clap::ArgGroup::new("dsn").required(true).args(["postgres", "postgres_env", "postgres_stdin"])))]
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
        #[arg(long)]
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
    },
    /// Show one database.
    Show {
        /// Database id (db_...).
        database_id: String,
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
    List,
    /// Show one move.
    Show {
        /// Move id (mov_...).
        id: String,
    },
    /// Abort a move before its cutover; exits non-zero if it had already finished.
    Abort {
        /// Move id (mov_...).
        id: String,
    },
}

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
