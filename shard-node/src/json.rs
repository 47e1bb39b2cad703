//! JSON conventions shared by every response: timestamps are RFC 3339 UTC
//! with milliseconds (`2026-11-22T04:15:33.123Z`).

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serializer;

pub fn format_ts(ts: &DateTime<Utc>) -> String {
    ts.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// `#[serde(serialize_with = "crate::json::ts")]`
pub fn ts<S: Serializer>(ts: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_ts(ts))
}

/// `#[serde(serialize_with = "crate::json::ts_opt")]`
pub fn ts_opt<S: Serializer>(ts: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match ts {
        Some(t) => s.serialize_str(&format_ts(t)),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn millisecond_utc_form() {
        let t = Utc.with_ymd_and_hms(2026, 11, 22, 4, 15, 33).unwrap()
            + chrono::Duration::milliseconds(123);
        assert_eq!(format_ts(&t), "2026-11-22T04:15:33.123Z");
        let whole = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        assert_eq!(format_ts(&whole), "2026-01-02T03:04:05.000Z");
    }
}
