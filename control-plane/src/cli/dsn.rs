//! Where `shards add` takes the shard's PostgreSQL DSN from. A DSN on the
//! command line (`--postgres`, kept for the operator contract) is visible
//! to every local user in the process list, so the CLI warns when it holds
//! a password; `--postgres-env VAR`, `--postgres-stdin` (`--dsn-stdin`) and,
//! with none of them, the `SHARD_DSN` variable keep it out of argv. And a
//! DSN the CLI prints has its password replaced ([`redact`]).

use std::io::BufRead;
use std::str::FromStr;

use anyhow::{bail, Context};
use cluster_protocol::control::Shard;

use super::exit::CliError;

/// The longest DSN read from standard input.
const MAX_DSN_BYTES: u64 = 8 * 1024;

/// Printed on stderr when `--postgres` carries a password.
pub const ARGV_PASSWORD_WARNING: &str = "warning: the --postgres DSN holds a password, which any local user can read in the process list; pass it with --postgres-env VAR or --postgres-stdin instead";

/// The variable read when no DSN option is given.
pub const DEFAULT_ENV: &str = "SHARD_DSN";

/// What a printed DSN shows instead of its password.
pub const MASK: &str = "***";

/// The DSN options of `shards add`, as parsed (clap allows at most one).
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
            .ok_or_else(|| {
                CliError::usage(format!(
                    "--postgres-env {var}: that environment variable is not set"
                ))
            })?,
        DsnSource { stdin: true, .. } => first_line(stdin)?,
        _ => env(DEFAULT_ENV).filter(|v| !v.trim().is_empty()).ok_or_else(|| {
            CliError::usage(format!(
                "give the shard's PostgreSQL DSN in {DEFAULT_ENV}, or with --postgres-env VAR, --postgres-stdin or --postgres DSN"
            ))
        })?,
    };
    Ok(dsn.trim().to_string())
}

/// `dsn` with its password (URL or `key=value` form) replaced by [`MASK`].
pub fn redact(dsn: &str) -> String {
    let dsn = redact_url_userinfo(dsn);
    redact_password_values(&dsn)
}

/// The shard as the CLI prints it: its DSN redacted.
pub fn redact_shard(shard: &mut Shard) {
    shard.postgres = redact(&shard.postgres);
}

/// `postgres://user:secret@host/db` -> `postgres://user:***@host/db`.
fn redact_url_userinfo(dsn: &str) -> String {
    let Some(scheme_end) = dsn.find("://") else {
        return dsn.to_string();
    };
    let rest_start = scheme_end + 3;
    let rest = &dsn[rest_start..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else {
        return dsn.to_string();
    };
    let Some(colon) = authority[..at].find(':') else {
        return dsn.to_string();
    };
    format!(
        "{}{}{MASK}{}",
        &dsn[..rest_start],
        &authority[..=colon],
        &rest[at..]
    )
}

/// Every `password=value` (key-value form, or a URL's query parameter)
/// with its value, quoted or not, replaced.
fn redact_password_values(dsn: &str) -> String {
    let lower = dsn.to_ascii_lowercase();
    let mut out = String::with_capacity(dsn.len());
    let mut i = 0;
    while let Some(found) = lower[i..].find("password") {
        let key_start = i + found;
        let boundary =
            key_start == 0 || matches!(lower.as_bytes()[key_start - 1], b' ' | b'\t' | b'?' | b'&');
        let mut j = key_start + "password".len();
        while lower.as_bytes().get(j).is_some_and(|b| *b == b' ') {
            j += 1;
        }
        if !boundary || lower.as_bytes().get(j) != Some(&b'=') {
            out.push_str(&dsn[i..key_start + "password".len()]);
            i = key_start + "password".len();
            continue;
        }
        j += 1;
        while lower.as_bytes().get(j).is_some_and(|b| *b == b' ') {
            j += 1;
        }
        out.push_str(&dsn[i..j]);
        out.push_str(MASK);
        i = value_end(dsn.as_bytes(), j);
    }
    out.push_str(&dsn[i..]);
    out
}

/// Where the value starting at `start` ends: a quoted one after its
/// closing quote (backslash escapes), another at a space or `&`.
fn value_end(bytes: &[u8], start: usize) -> usize {
    if bytes.get(start) == Some(&b'\'') {
        let mut k = start + 1;
        while k < bytes.len() {
            match bytes[k] {
                b'\\' => k += 2,
                b'\'' => return k + 1,
                _ => k += 1,
            }
        }
        return bytes.len();
    }
    let mut k = start;
    while k < bytes.len() && !matches!(bytes[k], b' ' | b'\t' | b'&') {
        k += 1;
    }
    k
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
    }

    #[test]
    fn with_no_option_the_dsn_comes_from_shard_dsn() {
        let (got, warned) = run(DsnSource::default(), "");
        assert_eq!(got.unwrap(), "postgres://u:pw@h/db");
        assert!(warned.is_empty());
        let unset = resolve(DsnSource::default(), |_| None, "".as_bytes(), |_| {});
        let e = CliError::of(&unset.unwrap_err());
        assert_eq!(e.code, "usage");
        assert!(e.message.contains("SHARD_DSN"), "{}", e.message);
    }

    #[test]
    fn passwords_are_redacted_in_every_form() {
        for (dsn, want) in [
            ("postgres://u:pw@h:5432/db", "postgres://u:***@h:5432/db"),
            (
                "postgresql://u:p%40w@h/db?sslmode=require",
                "postgresql://u:***@h/db?sslmode=require",
            ),
            ("postgres://u@h/db", "postgres://u@h/db"),
            (
                "postgres://u:pw@h1:5432,h2:5433/db?target_session_attrs=read-write",
                "postgres://u:***@h1:5432,h2:5433/db?target_session_attrs=read-write",
            ),
            (
                "postgres://h/db?user=u&password=pw&sslmode=disable",
                "postgres://h/db?user=u&password=***&sslmode=disable",
            ),
            (
                "host=h user=u password=pw dbname=db",
                "host=h user=u password=*** dbname=db",
            ),
            (
                "host=h password = 'a b\\'c' dbname=db",
                "host=h password = *** dbname=db",
            ),
            ("password=pw", "password=***"),
            (
                "host=h user=nopassword dbname=db",
                "host=h user=nopassword dbname=db",
            ),
        ] {
            assert_eq!(redact(dsn), want, "{dsn}");
            assert!(!redact(dsn).contains("pw"), "{dsn}");
        }
    }
}
