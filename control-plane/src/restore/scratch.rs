//! The scratch instance: `RESTORE_SCRATCH_COMMAND restore <shard> <as-of>
//! <name>` restores the shard's backups as they were at `as-of` into a
//! promoted PostgreSQL and prints its DSN on one line; `... drop <name>`
//! removes it. The program is run directly (no shell), its stderr kept
//! for the error message.

use std::process::Stdio;

use anyhow::{bail, Context};
use chrono::{DateTime, SecondsFormat, Utc};
use cluster_protocol::ids::{self, Kind};
use tokio::process::Command;

use crate::mover::context::fatal;

/// Most characters of the program's stderr shown in an error.
const STDERR_SHOWN: usize = 2000;

/// The scratch name of a restore: `rst_` and the hex of the id's 12
/// characters, lowercase (safe as a directory, a role or a cluster name).
pub fn name(restore_id: &str) -> anyhow::Result<String> {
    if !ids::is_valid(Kind::Restore, restore_id) {
        bail!("refusing a scratch name from malformed restore id {restore_id:?}");
    }
    let body = &restore_id[restore_id.len() - ids::ID_BODY_LEN..];
    let hex: String = body.bytes().map(|b| format!("{b:02x}")).collect();
    Ok(format!("rst_{hex}"))
}

/// The DSN in the program's stdout: exactly one non-empty line, a
/// `postgres://` or `postgresql://` URL.
pub fn parse_dsn(stdout: &str) -> anyhow::Result<String> {
    let lines: Vec<&str> = stdout
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    match lines.as_slice() {
        [dsn] if dsn.starts_with("postgres://") || dsn.starts_with("postgresql://") => {
            Ok((*dsn).to_string())
        }
        [other] => bail!("the restore command printed {other:?}, not a postgres:// DSN"),
        [] => bail!("the restore command printed nothing (it must print the scratch DSN)"),
        _ => bail!(
            "the restore command printed {} lines; it must print exactly one DSN",
            lines.len()
        ),
    }
}

fn stderr_tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    let skip = text.chars().count().saturating_sub(STDERR_SHOWN);
    text.chars().skip(skip).collect()
}

/// Restores `shard`'s backups at `as_of` into scratch `name`; its DSN. A
/// refusal of the program (no backup covers the instant, ...) is fatal:
/// running it again would not change its answer.
pub async fn restore(
    program: &str,
    shard: &str,
    as_of: DateTime<Utc>,
    name: &str,
) -> anyhow::Result<String> {
    let as_of = as_of.to_rfc3339_opts(SecondsFormat::Micros, true);
    let out = Command::new(program)
        .args(["restore", shard, &as_of, name])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("run RESTORE_SCRATCH_COMMAND {program:?}"))?;
    if !out.status.success() {
        return Err(fatal(format!(
            "the scratch restore of shard {shard} at {as_of} failed ({}): {}",
            out.status,
            stderr_tail(&out.stderr)
        )));
    }
    parse_dsn(&String::from_utf8_lossy(&out.stdout)).map_err(|e| fatal(format!("{e:#}")))
}

/// Drops scratch `name` (the program must accept a name it does not know).
pub async fn drop(program: &str, name: &str) -> anyhow::Result<()> {
    let out = Command::new(program)
        .args(["drop", name])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("run RESTORE_SCRATCH_COMMAND {program:?}"))?;
    if !out.status.success() {
        bail!(
            "dropping scratch {name} failed ({}): {}",
            out.status,
            stderr_tail(&out.stderr)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_lowercase_hex_of_the_id() {
        assert_eq!(
            name("rst_AbCdEf012345").unwrap(),
            "rst_416243644566303132333435"
        );
        assert!(name("rst_x; rm -rf /").is_err());
        assert!(name("mov_AbCdEf012345").is_err());
    }

    #[test]
    fn exactly_one_dsn_line_is_accepted() {
        assert_eq!(
            parse_dsn("\npostgres://postgres@127.0.0.1:26650/cluster\n\n").unwrap(),
            "postgres://postgres@127.0.0.1:26650/cluster"
        );
        assert!(parse_dsn("").is_err());
        assert!(parse_dsn("restored\npostgres://x/y\n").is_err());
        assert!(parse_dsn("host=127.0.0.1 port=5432").is_err());
    }

    #[test]
    fn long_stderr_keeps_its_end() {
        let long = format!("{}THE END", "x".repeat(5000));
        let tail = stderr_tail(long.as_bytes());
        assert_eq!(tail.chars().count(), STDERR_SHOWN);
        assert!(tail.ends_with("THE END"));
    }
}
