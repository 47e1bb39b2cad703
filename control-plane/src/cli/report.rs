//! What an operator command prints: its result on stdout (one JSON object
//! with `--json`, the human form otherwise) and its error on stderr
//! (`error: ...`, or with `--json` exactly one JSON object
//! `{"error":{"code","message","exit"}}`), and the exit code that goes with
//! them (`exit`).

use serde_json::{json, Value};

use super::exit::{CliError, Exit};

/// The JSON form of an error (one line on stderr under `--json`).
pub fn error_json(e: &CliError) -> Value {
    json!({ "error": { "code": e.code, "message": e.message, "exit": e.exit.code() } })
}

/// Prints `e` on stderr in the form `--json` asks for.
pub fn print_error(json_out: bool, e: &CliError) {
    if json_out {
        eprintln!("{}", error_json(e));
    } else {
        eprintln!("error: {}", e.message);
    }
}

/// Prints a result and returns the exit code: `failure` (a result that
/// was printed but is not a success, like a waited move that ended
/// aborted) is reported on stderr after it.
pub fn finish(json_out: bool, json: &Value, text: &str, failure: Option<&CliError>) -> i32 {
    if json_out {
        println!("{json}");
    } else {
        println!("{text}");
    }
    match failure {
        Some(e) => {
            print_error(json_out, e);
            e.exit.code()
        }
        None => Exit::Ok.code(),
    }
}

/// Reports an error that left nothing to print; returns the exit code.
pub fn fail(json_out: bool, e: &anyhow::Error) -> i32 {
    let e = CliError::of(e);
    print_error(json_out, &e);
    e.exit.code()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_object_has_a_stable_shape() {
        let e = CliError::timed_out("still copying");
        assert_eq!(
            error_json(&e),
            json!({"error": {"code": "timed_out", "message": "still copying", "exit": 6}})
        );
        assert_eq!(error_json(&e).to_string().lines().count(), 1);
    }
}
