//! SQL text: the ONLY two places user-derived text enters SQL
//! ([`quote_literal`], [`quote_ident`]) and the fixed guarded building blocks
//! that keep every compiled expression immutable and raise-free.
//!
//! Invariants kept by the building blocks (relied on by `compile.rs`):
//! - a number value is NULL or a finite `numeric` with |x| < 1e300 and at
//!   most 100 digits after the point ([`num_clamp`]);
//! - a date value is NULL or a `date` in 0001-01-01 ..= 9999-12-31, a
//!   date-time value is NULL or a `timestamp` (UTC, no zone) in the same
//!   years ([`date_clamp`], [`ts_clamp`]);
//! - a boolean produced for a condition is never NULL ([`truthy`]).
//!
//! Every guard tests exactly the values its guarded operation consumes, so
//! PostgreSQL's planner-time constant folding (which evaluates fully
//! constant sub-expressions, even inside CASE arms) never meets an
//! unguarded constant operation.

/// Quote `s` as a PostgreSQL string literal: `'...'` with `'` doubled, or
/// `E'...'` with `\` and `'` doubled when `s` holds a backslash, so the
/// result means the same whatever `standard_conforming_strings` says.
/// `None` when `s` contains NUL, which PostgreSQL text cannot hold.
pub fn quote_literal(s: &str) -> Option<String> {
    if s.contains('\0') {
        return None;
    }
    let escape_backslash = s.contains('\\');
    let mut out = String::with_capacity(s.len() + 3);
    if escape_backslash {
        out.push('E');
    }
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('\'');
    Some(out)
}

/// Quote `s` as a PostgreSQL identifier: always `"..."` with `"` doubled.
/// `None` when `s` is empty or contains NUL.
pub fn quote_ident(s: &str) -> Option<String> {
    if s.is_empty() || s.contains('\0') {
        return None;
    }
    Some(format!("\"{}\"", s.replace('"', "\"\"")))
}

/// A fixed literal of this module (never holds NUL).
pub(crate) fn lit(s: &str) -> String {
    quote_literal(s).unwrap_or_else(|| "NULL".to_string())
}

/// Largest magnitude (exclusive) of a number value.
pub(crate) const NUM_BOUND: &str = "1e300";
/// Digits kept after the decimal point.
pub(crate) const NUM_SCALE: u32 = 100;

/// NULL for NaN, infinities and |x| >= 1e300; rounds to 100 decimals and
/// trims trailing zeros. Evaluates `x` once.
pub(crate) fn num_clamp(x: &str) -> String {
    format!(
        "NULLIF(NULLIF(LEAST(GREATEST(trim_scale(round({x}, {NUM_SCALE})), -{NUM_BOUND}), {NUM_BOUND}), {NUM_BOUND}), -{NUM_BOUND})"
    )
}

const DATE_LO: &str = "DATE '0001-12-31 BC'";
const DATE_HI: &str = "DATE '10000-01-01'";
const TS_LO: &str = "TIMESTAMP '0001-12-31 23:59:59.999999 BC'";
const TS_HI: &str = "TIMESTAMP '10000-01-01 00:00:00'";

/// NULL for dates outside years 1..=9999 (and infinities). Evaluates once.
pub(crate) fn date_clamp(x: &str) -> String {
    format!("NULLIF(NULLIF(LEAST(GREATEST({x}, {DATE_LO}), {DATE_HI}), {DATE_LO}), {DATE_HI})")
}

/// NULL for timestamps outside years 1..=9999 (and infinities).
pub(crate) fn ts_clamp(x: &str) -> String {
    format!("NULLIF(NULLIF(LEAST(GREATEST({x}, {TS_LO}), {TS_HI}), {TS_LO}), {TS_HI})")
}

/// A number value as an `integer` clamped into `lo..=hi` (truncated).
/// NULL stays NULL. Never raises.
pub(crate) fn int_clamp(x: &str, lo: i64, hi: i64) -> String {
    format!("(LEAST(GREATEST(trunc({x}), {lo}), {hi}))::integer")
}

/// A numeric literal for a validated number token.
pub(crate) fn number_literal(n: &str) -> String {
    format!("{}::numeric", lit(n))
}

/// Epoch seconds of the first and the last instant of the supported range.
pub(crate) const EPOCH_LO: &str = "-62135596800";
pub(crate) const EPOCH_HI: &str = "253402300799.999999";
