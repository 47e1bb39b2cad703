//! Value parsers of settings, for clap's `value_parser`: the syntax the
//! services have always accepted from their environment.
//!
//! * [`duration`]: a whole number with a unit, `ms`, `s`, `m` or `h`
//!   (`250ms`, `10s`, `5m`); a bare number is seconds.
//! * [`durations`]: a comma list of those (`10s,60s,300s`); empty is none.
//! * [`positive`]: a whole number above zero (counts, bytes).
//! * [`millis`] and [`secs`]: a positive whole number of milliseconds or
//!   seconds.
//! * [`on_off`]: a switch, `on` or `off`.
//!
//! Surrounding blanks are ignored, and [`blank_is_unset`] makes a blank
//! environment variable count as unset, as it always has.

use std::time::Duration;

use anyhow::Context;

/// One duration: a whole number with a unit, `ms`, `s`, `m` or `h`
/// (`250ms`, `10s`, `5m`); a bare number is seconds.
pub fn duration(text: &str) -> anyhow::Result<Duration> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .with_context(|| format!("{t:?} is not a duration like 10s"))?;
    let ms = match unit {
        "ms" => n,
        "" | "s" => n * 1000,
        "m" => n * 60_000,
        "h" => n * 3_600_000,
        other => anyhow::bail!("unknown unit {other:?} in {t:?} (ms, s, m, h)"),
    };
    Ok(Duration::from_millis(ms))
}

/// A comma list of [`duration`]s (`10s,60s,300s`); empty means none.
pub fn durations(text: &str) -> anyhow::Result<Vec<Duration>> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(duration)
        .collect()
}

/// [`durations`] as one value (clap takes a `Vec` field as many values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Durations(pub Vec<Duration>);

/// [`durations`] for a [`Durations`] field.
pub fn duration_list(text: &str) -> anyhow::Result<Durations> {
    durations(text).map(Durations)
}

/// A whole number above zero.
pub fn positive<T>(text: &str) -> anyhow::Result<T>
where
    T: std::str::FromStr + PartialOrd + Default,
{
    text.trim()
        .parse()
        .ok()
        .filter(|n: &T| *n > T::default())
        .context("must be a positive integer")
}

/// A whole number, zero included.
pub fn number<T: std::str::FromStr>(text: &str) -> anyhow::Result<T> {
    text.trim()
        .parse()
        .ok()
        .context("must be a non-negative integer")
}

/// A positive whole number of milliseconds.
pub fn millis(text: &str) -> anyhow::Result<Duration> {
    positive::<u64>(text)
        .context("must be a positive whole number of milliseconds")
        .map(Duration::from_millis)
}

/// A positive whole number of seconds.
pub fn secs(text: &str) -> anyhow::Result<Duration> {
    positive::<u64>(text)
        .context("must be a positive whole number of seconds")
        .map(Duration::from_secs)
}

/// A whole number of milliseconds, zero included.
pub fn millis_or_zero(text: &str) -> anyhow::Result<Duration> {
    number::<u64>(text).map(Duration::from_millis)
}

/// A switch: `on` or `off` (any case).
pub fn on_off(text: &str) -> anyhow::Result<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "on" => Ok(true),
        "off" => Ok(false),
        other => anyhow::bail!("{other:?} is neither on nor off"),
    }
}

/// A comma list of words (`10.0.0.0/8, ::1/128`), blanks dropped.
pub fn list(text: &str) -> Vec<String> {
    text.split(',')
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty())
        .collect()
}

/// `command` with every argument whose environment variable is set but
/// blank made to ignore it, so its default (or its absence) applies: the
/// services have always read a blank variable as unset. Subcommands too.
pub fn blank_is_unset(command: clap::Command) -> clap::Command {
    command
        .mut_args(|arg| match arg.get_env() {
            Some(name) if is_blank(name) => arg.env(None::<&str>),
            _ => arg,
        })
        .mut_subcommands(blank_is_unset)
}

fn is_blank(name: &std::ffi::OsStr) -> bool {
    std::env::var_os(name).is_some_and(|v| v.to_string_lossy().trim().is_empty())
}

/// Parses `C` from the command line and the environment ([`blank_is_unset`]),
/// exiting with clap's message (and status 0 for `--help` and `--version`)
/// when it cannot.
pub fn args<C: clap::Parser>() -> C {
    args_from(std::env::args_os())
}

/// [`args`] from the given command line.
pub fn args_from<C, I, A>(argv: I) -> C
where
    C: clap::Parser,
    I: IntoIterator<Item = A>,
    A: Into<std::ffi::OsString> + Clone,
{
    let matches = blank_is_unset(C::command()).get_matches_from(argv);
    C::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// [`args_from`], returning the error instead of exiting (for
/// configuration read from the environment alone, by `Config::from_env`).
pub fn try_args_from<C, I, A>(argv: I) -> anyhow::Result<C>
where
    C: clap::Parser,
    I: IntoIterator<Item = A>,
    A: Into<std::ffi::OsString> + Clone,
{
    let matches = blank_is_unset(C::command())
        .try_get_matches_from(argv)
        .map_err(|e| anyhow::anyhow!("{}", e.render()))?;
    C::from_arg_matches(&matches).map_err(|e| anyhow::anyhow!("{}", e.render()))
}

/// `C` from the command line alone, as if no environment variable were
/// set: for tests of the settings' defaults, which must not depend on the
/// environment they run in (deploy/test exports several settings).
pub fn try_args_only<C, I, A>(argv: I) -> anyhow::Result<C>
where
    C: clap::Args + clap::FromArgMatches,
    I: IntoIterator<Item = A>,
    A: Into<std::ffi::OsString> + Clone,
{
    let command = C::augment_args(clap::Command::new("settings")).mut_args(|a| a.env(None::<&str>));
    let matches = command
        .try_get_matches_from(argv)
        .map_err(|e| anyhow::anyhow!("{}", e.render()))?;
    C::from_arg_matches(&matches).map_err(|e| anyhow::anyhow!("{}", e.render()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_a_unit_and_default_to_seconds() {
        assert_eq!(duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(duration(" 5m ").unwrap(), Duration::from_secs(300));
        assert_eq!(duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(duration("10x").is_err());
        assert!(duration("s").is_err());
        assert_eq!(
            durations("10s,60s,300s").unwrap(),
            [10, 60, 300].map(Duration::from_secs).to_vec()
        );
        assert!(durations("").unwrap().is_empty());
    }

    #[test]
    fn positive_refuses_zero_and_words() {
        assert_eq!(positive::<usize>(" 4 ").unwrap(), 4);
        assert!(positive::<usize>("0").is_err());
        assert!(positive::<u64>("x").is_err());
        assert_eq!(millis("250").unwrap(), Duration::from_millis(250));
        assert!(secs("0").is_err());
        assert_eq!(millis_or_zero("0").unwrap(), Duration::ZERO);
        assert_eq!(list(" a, ,b "), ["a", "b"]);
    }

    #[test]
    fn switches() {
        assert!(on_off(" ON ").unwrap());
        assert!(!on_off("off").unwrap());
        assert!(on_off("yes").is_err());
    }
}
