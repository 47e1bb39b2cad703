//! The CLI's exit codes, in one place, and how an error maps to one (and
//! to the stable `code` of its JSON form, see `report`).

use cluster_protocol::control::client::ClientError;

/// The process exit codes of the operator commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Done.
    Ok,
    /// Failed on this side (a reply that could not be read, standard input
    /// that could not be read, ...).
    Failed,
    /// The command line is wrong (clap's code for usage errors).
    Usage,
    /// The control plane refused the request (a 4xx: unknown id, conflict,
    /// invalid value, bad token).
    Refused,
    /// The control plane could not be reached, or failed (5xx).
    Unreachable,
    /// A waited move (or one of a rebalance's or drain's) ended aborted.
    Aborted,
    /// `--wait --timeout` ran out; the moves go on.
    TimedOut,
}

impl Exit {
    pub const fn code(self) -> i32 {
        match self {
            Exit::Ok => 0,
            Exit::Failed => 1,
            Exit::Usage => 2,
            Exit::Refused => 3,
            Exit::Unreachable => 4,
            Exit::Aborted => 5,
            Exit::TimedOut => 6,
        }
    }
}

/// The exit codes as `--help` shows them (and docs/operations.md).
pub const HELP: &str = "\
Connection: CONTROL_PLANE_URL (--server) and CONTROL_PLANE_TOKEN (--token).

Exit codes:
  0  done
  1  failed on this side (unreadable reply or input)
  2  usage: the command line is wrong
  3  refused by the control plane (unknown id, conflict, invalid value, bad token)
  4  control plane unreachable, or it failed (5xx)
  5  aborted: a waited move ended aborted
  6  timed out: --wait --timeout ran out (the moves go on)

With --json the result is one JSON object on stdout, and an error one JSON
object on stderr: {\"error\":{\"code\":\"...\",\"message\":\"...\",\"exit\":N}}.";

/// An error as the CLI reports it: its exit code, a stable `code` and the
/// message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    pub exit: Exit,
    /// `usage`, `failed`, `unreachable`, `aborted`, `timed_out`, or the
    /// control plane's own code of a refusal or failure (`not_found`,
    /// `conflict`, `bad_request`, `unauthorized`, `forbidden`, `internal`,
    /// `unavailable`, ...).
    pub code: String,
    pub message: String,
}

impl CliError {
    pub fn new(exit: Exit, code: &str, message: impl Into<String>) -> Self {
        Self {
            exit,
            code: code.to_string(),
            message: message.into(),
        }
    }
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Exit::Usage, "usage", message)
    }
    pub fn aborted(message: impl Into<String>) -> Self {
        Self::new(Exit::Aborted, "aborted", message)
    }
    pub fn timed_out(message: impl Into<String>) -> Self {
        Self::new(Exit::TimedOut, "timed_out", message)
    }
    /// A refusal the CLI reports itself (for example a move that had
    /// already finished when asked to abort it).
    pub fn refused(code: &str, message: impl Into<String>) -> Self {
        Self::new(Exit::Refused, code, message)
    }

    /// Classifies an error a command returned: a [`CliError`] it raised,
    /// or a [`ClientError`] anywhere in its chain, or anything else
    /// (`failed`).
    pub fn of(e: &anyhow::Error) -> Self {
        if let Some(own) = e.downcast_ref::<CliError>() {
            return own.clone();
        }
        let message = format!("{e:#}");
        match e.downcast_ref::<ClientError>() {
            Some(ClientError::Api { status, body }) => {
                let exit = if (400..500).contains(status) {
                    Exit::Refused
                } else {
                    Exit::Unreachable
                };
                Self::new(exit, body.code.as_str(), message)
            }
            Some(ClientError::Transport(_)) => Self::new(Exit::Unreachable, "unreachable", message),
            None => Self::new(Exit::Failed, "failed", message),
        }
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

#[cfg(test)]
mod tests {
    use cluster_protocol::error::{ErrorBody, ErrorCode};

    use super::*;

    fn api(status: u16, code: ErrorCode) -> anyhow::Error {
        ClientError::Api {
            status,
            body: ErrorBody::new(code, "no"),
        }
        .into()
    }

    #[test]
    fn errors_map_to_exit_codes_and_stable_codes() {
        let e = CliError::of(&api(404, ErrorCode::NotFound));
        assert_eq!((e.exit.code(), e.code.as_str()), (3, "not_found"));
        let e = CliError::of(&api(409, ErrorCode::Conflict));
        assert_eq!((e.exit.code(), e.code.as_str()), (3, "conflict"));
        let e = CliError::of(&api(401, ErrorCode::Unauthorized));
        assert_eq!((e.exit.code(), e.code.as_str()), (3, "unauthorized"));
        let e = CliError::of(&api(503, ErrorCode::Unavailable));
        assert_eq!((e.exit.code(), e.code.as_str()), (4, "unavailable"));
        let e = CliError::of(&ClientError::Transport("refused".into()).into());
        assert_eq!((e.exit.code(), e.code.as_str()), (4, "unreachable"));
        let e = CliError::of(&anyhow::anyhow!("stdin closed"));
        assert_eq!((e.exit.code(), e.code.as_str()), (1, "failed"));
        let wrapped = anyhow::Error::new(CliError::usage("give --access")).context("keys update");
        assert_eq!(CliError::of(&wrapped).exit, Exit::Usage);
        let in_context = anyhow::Error::from(ClientError::Transport("x".into())).context("poll");
        assert_eq!(CliError::of(&in_context).exit, Exit::Unreachable);
    }

    #[test]
    fn codes_are_distinct_and_listed_in_the_help() {
        let all = [
            Exit::Ok,
            Exit::Failed,
            Exit::Usage,
            Exit::Refused,
            Exit::Unreachable,
            Exit::Aborted,
            Exit::TimedOut,
        ];
        for (i, a) in all.iter().enumerate() {
            assert!(all[i + 1..].iter().all(|b| b.code() != a.code()));
            assert!(HELP.contains(&format!("  {}  ", a.code())), "{a:?}");
        }
    }
}
