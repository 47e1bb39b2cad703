//! Where `shards add` takes the shard's PostgreSQL DSN from. A DSN on the
//! command line (`--postgres`, kept for the operator contract) is visible
//! to every local user in the process list, so the CLI warns when it holds
//! a password; `--postgres-env VAR` and `--postgres-stdin` keep it out of
//! argv.

use std::io::BufRead;
use std::str::FromStr;

use anyhow::{bail, Context};

/// The longest DSN read from standard input.
const MAX_DSN_BYTES: u64 = 8 * 1024;

/// Printed on stderr when `--postgres` carries a password.
pub const ARGV_PASSWORD_WARNING: &str = "warning: the --postgres DSN holds a password, which any local user can read in the process list; pass it with --postgres-env VAR or --postgres-stdin instead";

/// The DSN options of `shards add`, as parsed (clap makes exactly one given).
#[derive(Debug, Default)]
pub struct DsnSource {
    pub argv: Option<String>,
    pub env: Option<String>,
    pub stdin: bool,
}

/// Whether a DSN names a password (either syntax). One that does not parse
/// is left to the control plane to refuse.
pub fn has_password(dsn: &str) -> bool {
    tokio_postgres::Config::from_str(dsn)
        .is_ok_and(|c| c.get_password().is_some_and(|p| !p.is_empty()))
}

/// The DSN from its source; `warn` is called with a warning for stderr.
pub fn resolve(
    source: DsnSource,
    env: impl Fn(&str) -> Option<String>,
    stdin: impl BufRead,
    warn: impl Fn(&str),
) -> anyhow::Result<String> {
    let dsn = match source {
        DsnSource { argv: Some(dsn), .. } => {
            if has_password(&dsn) {
                warn(ARGV_PASSWORD_WARNING);
            }
            dsn
        }
        DsnSource { env: Some(var), .. } => env(&var)
            .filter(|v| !v.trim().is_empty())
            .with_context(|| format!("--postgres-env {var}: that environment variable is not set"))?,
        DsnSource { stdin: true, .. } => first_line(stdin)?,
        _ => bail!("give the shard's PostgreSQL DSN with --postgres-env VAR, --postgres-stdin or --postgres DSN"),
    };
    Ok(dsn.trim().to_string())
}

/// The first line of `input`, at most `MAX_DSN_BYTES`.
fn first_line(input: impl BufRead) -> anyhow::Result<String> {
    let mut line = String::new();
    input
        .take(MAX_DSN_BYTES + 1)
        .read_line(&mut line)
        .context("read the DSN from standard input")?;
    if line.len() as u64 > MAX_DSN_BYTES {
        bail!("--postgres-stdin: the DSN is longer than {MAX_DSN_BYTES} bytes");
    }
    if line.trim().is_empty() {
        bail!("--postgres-stdin: standard input holds no DSN");
    }
    Ok(line)
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    fn run(source: DsnSource, stdin: &str) -> (anyhow::Result<String>, Vec<String>) {
        let warnings = RefCell::new(Vec::new());
        let env = |name: &str| (name == "SHARD_DSN").then(|| "postgres://u:pw@h/db\n".to_string());
        let got = resolve(source, env, stdin.as_bytes(), |w| {
            warnings.borrow_mut().push(w.to_string())
        });
        (got, warnings.into_inner())
    }

    #[test]
    fn argv_with_a_password_is_taken_with_a_warning() {
        let (got, warned) = run(
            DsnSource {
                argv: Some("postgres://u:pw@h/db".into()),
                ..DsnSource::default()
            },
            "",
        );
        assert_eq!(got.unwrap(), "postgres://u:pw@h/db");
        assert_eq!(warned, vec![ARGV_PASSWORD_WARNING.to_string()]);
        let (got, warned) = run(
            DsnSource {
                argv: Some("host=h user=u password=pw dbname=db".into()),
                ..DsnSource::default()
            },
            "",
        );
        assert!(got.is_ok());
        assert_eq!(warned.len(), 1);
        let (_, warned) = run(
            DsnSource {
                argv: Some("postgres://u@h/db".into()),
                ..DsnSource::default()
            },
            "",
        );
        assert!(warned.is_empty(), "no password, no warning");
    }

    #[test]
    fn env_and_stdin_sources() {
        let (got, warned) = run(
            DsnSource {
                env: Some("SHARD_DSN".into()),
                ..DsnSource::default()
            },
            "",
        );
        assert_eq!(got.unwrap(), "postgres://u:pw@h/db");
        assert!(warned.is_empty());
        let (got, _) = run(
            DsnSource {
                env: Some("UNSET".into()),
                ..DsnSource::default()
            },
            "",
        );
        assert!(got.unwrap_err().to_string().contains("UNSET"));
        let stdin = DsnSource {
            stdin: true,
            ..DsnSource::default()
        };
        let (got, warned) = run(stdin, "postgres://u:pw@h/db\nignored\n");
        assert_eq!(got.unwrap(), "postgres://u:pw@h/db");
        assert!(warned.is_empty());
        let stdin = DsnSource {
            stdin: true,
            ..DsnSource::default()
        };
        assert!(run(stdin, "\n").0.is_err());
        let stdin = DsnSource {
            stdin: true,
            ..DsnSource::default()
        };
        let long = "x".repeat(9000);
        assert!(run(stdin, &long).0.is_err());
        assert!(run(DsnSource::default(), "").0.is_err());
    }
}
