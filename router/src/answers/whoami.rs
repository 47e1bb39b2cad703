//! `GET /api/meta/whoami`, answered from the verified key.

use chrono::{DateTime, SecondsFormat, Utc};
use http::{Response, StatusCode};

use crate::errors::{json, Body};
use crate::gate::auth::Caller;

pub fn rfc3339_ms(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

pub fn answer(caller: &Caller) -> Response<Body> {
    let r = &caller.key.record;
    let last_used = caller
        .last_used_ms
        .and_then(DateTime::<Utc>::from_timestamp_millis)
        .map(rfc3339_ms);
    let body = serde_json::json!({
        "user": {"id": r.user.id, "name": r.user.name, "email": r.user.email},
        "key": {
            "id": r.id,
            "name": r.name,
            "created_at": rfc3339_ms(r.created_at),
            "last_used_at": last_used,
            "access": r.access,
            "databases": r.databases,
        },
    });
    json(StatusCode::OK, body.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_have_milliseconds_and_z() {
        let t = DateTime::<Utc>::from_timestamp_millis(1_700_000_000_123).unwrap();
        assert_eq!(rfc3339_ms(t), "2023-11-14T22:13:20.123Z");
    }
}
