//! Date values of the filter language: bare dates, instants, relative dates,
//! and the arithmetic that resolves them in the database's timezone.

use chrono::{
    DateTime, Days, FixedOffset, LocalResult, Months, NaiveDate, NaiveDateTime, NaiveTime, Offset,
    TimeZone, Utc,
};
use chrono_tz::Tz;
use serde_json::Value;

use crate::schema::Env;

/// Largest relative offset either way (Part C).
pub const MAX_RELATIVE_OFFSET: i64 = 366;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelativeAnchor {
    Today,
    Now,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelativeUnit {
    Day,
    Week,
    Month,
}

/// `{relative, offset?, unit?}`
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Relative {
    pub anchor: RelativeAnchor,
    pub offset: i32,
    pub unit: RelativeUnit,
}

/// A date operand as written by the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateOperand {
    /// `YYYY-MM-DD`
    Day(NaiveDate),
    /// A full timestamp (date-with-time fields only).
    Instant(DateTime<Utc>),
    Relative(Relative),
}

/// A date operand resolved against the request clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolved {
    Day(NaiveDate),
    Instant(DateTime<Utc>),
}

/// Strict `YYYY-MM-DD`.
pub fn parse_day(s: &str) -> Option<NaiveDate> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    if !b
        .iter()
        .enumerate()
        .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
    {
        return None;
    }
    let y: i32 = s[0..4].parse().ok()?;
    let m: u32 = s[5..7].parse().ok()?;
    let d: u32 = s[8..10].parse().ok()?;
    NaiveDate::from_ymd_opt(y, m, d)
}

/// A full timestamp: `YYYY-MM-DD(T| )HH:MM[:SS[.fraction]][Z|±HH:MM|±HHMM]`.
/// Without an offset the wall-clock time is read in the database timezone.
pub fn parse_instant(s: &str, tz: Tz) -> Option<DateTime<Utc>> {
    if s.len() < 16 || !s.is_char_boundary(10) {
        return None;
    }
    let day = parse_day(&s[..10])?;
    let rest = &s[10..];
    let rest = rest.strip_prefix('T').or_else(|| rest.strip_prefix(' '))?;
    // Split the offset off the end.
    let (clock, offset): (&str, Option<FixedOffset>) = if let Some(c) = rest.strip_suffix('Z') {
        (c, Some(FixedOffset::east_opt(0)?))
    } else if let Some(pos) = rest.rfind(['+', '-']) {
        let (c, off) = rest.split_at(pos);
        (c, Some(parse_offset(off)?))
    } else {
        (rest, None)
    };
    let time = parse_clock(clock)?;
    let local = day.and_time(time);
    match offset {
        Some(off) => off
            .from_local_datetime(&local)
            .single()
            .map(|t| t.with_timezone(&Utc)),
        None => Some(local_to_utc(tz, local)),
    }
}

fn parse_offset(s: &str) -> Option<FixedOffset> {
    let sign = match s.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits: String = s[1..].chars().filter(|c| *c != ':').collect();
    if digits.len() != 4 || !digits.bytes().all(|c| c.is_ascii_digit()) || s.len() > 6 {
        return None;
    }
    let h: i32 = digits[..2].parse().ok()?;
    let m: i32 = digits[2..].parse().ok()?;
    if h > 23 || m > 59 {
        return None;
    }
    FixedOffset::east_opt(sign * (h * 3600 + m * 60))
}

fn parse_clock(s: &str) -> Option<NaiveTime> {
    let b = s.as_bytes();
    let two = |i: usize| -> Option<u32> {
        let d = b.get(i..i + 2)?;
        if d.iter().all(u8::is_ascii_digit) {
            Some(u32::from(d[0] - b'0') * 10 + u32::from(d[1] - b'0'))
        } else {
            None
        }
    };
    let h = two(0)?;
    if b.get(2) != Some(&b':') {
        return None;
    }
    let m = two(3)?;
    let mut sec = 0;
    let mut nanos = 0;
    let mut i = 5;
    if b.len() > 5 {
        if b[5] != b':' {
            return None;
        }
        sec = two(6)?;
        i = 8;
        if b.len() > 8 {
            if b[8] != b'.' {
                return None;
            }
            let frac = &s[9..];
            if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            nanos = frac.parse::<u32>().ok()? * 10u32.pow(9 - frac.len() as u32);
            i = b.len();
        }
    }
    if i != b.len() {
        return None;
    }
    NaiveTime::from_hms_nano_opt(h, m, sec, nanos)
}

/// A wall-clock time in `tz` as an instant. In a DST fold the earlier
/// instant wins; in a gap the clock is read as if the gap were not there
/// (its offset before the jump).
pub fn local_to_utc(tz: Tz, local: NaiveDateTime) -> DateTime<Utc> {
    match tz.from_local_datetime(&local) {
        LocalResult::Single(t) => t.with_timezone(&Utc),
        LocalResult::Ambiguous(a, _) => a.with_timezone(&Utc),
        LocalResult::None => {
            // In a gap: use the offset in force just before it.
            let before = local - chrono::Duration::hours(3);
            let off = match tz.from_local_datetime(&before) {
                LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => {
                    t.offset().fix().local_minus_utc()
                }
                LocalResult::None => 0,
            };
            Utc.from_utc_datetime(&(local - chrono::Duration::seconds(off.into())))
        }
    }
}

/// The first instant of `day` in `tz`.
pub fn start_of_day(tz: Tz, day: NaiveDate) -> DateTime<Utc> {
    local_to_utc(tz, day.and_time(NaiveTime::MIN))
}

/// Parse a relative object; `Err` carries the message.
pub fn parse_relative(obj: &serde_json::Map<String, Value>) -> Result<Relative, String> {
    for key in obj.keys() {
        if !matches!(key.as_str(), "relative" | "offset" | "unit") {
            return Err(format!(
                "Unknown key '{key}' in a relative date; allowed keys are relative, offset, unit."
            ));
        }
    }
    let anchor = match obj.get("relative") {
        Some(Value::String(s)) if s == "today" => RelativeAnchor::Today,
        Some(Value::String(s)) if s == "now" => RelativeAnchor::Now,
        None | Some(Value::Null) => {
            return Err("A relative date needs 'relative': 'today' or 'now'.".into())
        }
        Some(_) => return Err("'relative' must be 'today' or 'now'.".into()),
    };
    let offset = match obj.get("offset") {
        None | Some(Value::Null) => 0,
        Some(Value::Number(n)) => {
            // Saturating: a huge whole float is still "too far", not "not whole".
            let whole = n
                .as_i64()
                .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64));
            match whole {
                Some(v) if v.unsigned_abs() <= MAX_RELATIVE_OFFSET as u64 => v as i32,
                Some(_) => {
                    return Err(format!(
                        "A relative date offset is at most {MAX_RELATIVE_OFFSET} either way."
                    ))
                }
                None => return Err("A relative date offset must be a whole number.".into()),
            }
        }
        Some(_) => return Err("A relative date offset must be a whole number.".into()),
    };
    let unit = match obj.get("unit") {
        None | Some(Value::Null) => RelativeUnit::Day,
        Some(Value::String(s)) if s == "day" => RelativeUnit::Day,
        Some(Value::String(s)) if s == "week" => RelativeUnit::Week,
        Some(Value::String(s)) if s == "month" => RelativeUnit::Month,
        Some(_) => return Err("A relative date unit must be 'day', 'week' or 'month'.".into()),
    };
    Ok(Relative {
        anchor,
        offset,
        unit,
    })
}

fn step_day(d: NaiveDate, offset: i32, unit: RelativeUnit) -> NaiveDate {
    let step = |d: NaiveDate, n: i64| -> NaiveDate {
        if n >= 0 {
            d.checked_add_days(Days::new(n as u64))
        } else {
            d.checked_sub_days(Days::new(n.unsigned_abs()))
        }
        .unwrap_or(d)
    };
    match unit {
        RelativeUnit::Day => step(d, offset.into()),
        RelativeUnit::Week => step(d, i64::from(offset) * 7),
        RelativeUnit::Month => if offset >= 0 {
            d.checked_add_months(Months::new(offset as u32))
        } else {
            d.checked_sub_months(Months::new(offset.unsigned_abs()))
        }
        .unwrap_or(d),
    }
}

impl Relative {
    /// Resolve against the request clock. `today` is a calendar day in the
    /// database timezone; `now` is an instant stepped on the wall clock
    /// (a month step clamps to the shorter month). For a field without time
    /// `now` degrades to its day.
    pub fn resolve(&self, env: &Env, include_time: bool) -> Resolved {
        let local_now = env.now.with_timezone(&env.timezone).naive_local();
        match self.anchor {
            RelativeAnchor::Today => {
                Resolved::Day(step_day(local_now.date(), self.offset, self.unit))
            }
            RelativeAnchor::Now => {
                let day = step_day(local_now.date(), self.offset, self.unit);
                if !include_time {
                    return Resolved::Day(day);
                }
                if self.offset == 0 {
                    return Resolved::Instant(env.now);
                }
                Resolved::Instant(local_to_utc(env.timezone, day.and_time(local_now.time())))
            }
        }
    }
}

impl DateOperand {
    pub fn resolve(&self, env: &Env, include_time: bool) -> Resolved {
        match self {
            DateOperand::Day(d) => Resolved::Day(*d),
            DateOperand::Instant(t) if include_time => Resolved::Instant(*t),
            DateOperand::Instant(t) => Resolved::Day(t.with_timezone(&env.timezone).date_naive()),
            DateOperand::Relative(r) => r.resolve(env, include_time),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(tz: &str, now: &str) -> Env {
        Env::new(tz, now.parse().unwrap()).unwrap()
    }

    #[test]
    fn bare_days() {
        assert_eq!(
            parse_day("2024-02-29"),
            NaiveDate::from_ymd_opt(2024, 2, 29)
        );
        assert_eq!(parse_day("2023-02-29"), None);
        assert_eq!(parse_day("2024-2-29"), None);
        assert_eq!(parse_day("2024-02-291"), None);
        assert_eq!(parse_day("+024-02-29"), None);
    }

    #[test]
    fn instants() {
        let tz: Tz = "Europe/Paris".parse().unwrap();
        let z = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        assert_eq!(
            parse_instant("2024-06-01T10:00:00Z", tz),
            Some(z("2024-06-01T10:00:00Z"))
        );
        assert_eq!(
            parse_instant("2024-06-01T10:00+02:00", tz),
            Some(z("2024-06-01T08:00:00Z"))
        );
        assert_eq!(
            parse_instant("2024-06-01 10:00:30.5-0130", tz),
            Some(z("2024-06-01T11:30:30.5Z"))
        );
        // No offset: database wall clock.
        assert_eq!(
            parse_instant("2024-06-01T10:00", tz),
            Some(z("2024-06-01T08:00:00Z"))
        );
        for bad in [
            "2024-06-01",
            "2024-06-01T10",
            "2024-06-01T25:00Z",
            "2024-06-01T10:00:00+2",
            "2024-06-01T10:00:00.Z",
            "2024-06-01X10:00",
            "2024-06-01T10:00:00Zjunk",
        ] {
            assert_eq!(parse_instant(bad, tz), None, "{bad}");
        }
    }

    #[test]
    fn relative_resolution() {
        let e = env("America/New_York", "2024-01-31T03:00:00Z"); // 30 Jan 22:00 local
        let rel = |anchor, offset, unit| Relative {
            anchor,
            offset,
            unit,
        };
        use RelativeAnchor::*;
        use RelativeUnit::*;
        let d = |y, m, dd| Resolved::Day(NaiveDate::from_ymd_opt(y, m, dd).unwrap());
        assert_eq!(rel(Today, 0, Day).resolve(&e, false), d(2024, 1, 30));
        assert_eq!(rel(Today, 1, Month).resolve(&e, false), d(2024, 2, 29));
        assert_eq!(rel(Today, -2, Week).resolve(&e, true), d(2024, 1, 16));
        assert_eq!(rel(Now, 0, Day).resolve(&e, false), d(2024, 1, 30));
        assert_eq!(rel(Now, 0, Day).resolve(&e, true), Resolved::Instant(e.now));
        // Month step clamps: Jan 30 + 1 month = Feb 29 at the same wall clock.
        assert_eq!(
            rel(Now, 1, Month).resolve(&e, true),
            Resolved::Instant("2024-03-01T03:00:00Z".parse().unwrap())
        );
    }

    #[test]
    fn midnight_in_zone() {
        let tz: Tz = "Asia/Tokyo".parse().unwrap();
        assert_eq!(
            start_of_day(tz, NaiveDate::from_ymd_opt(2024, 6, 1).unwrap()),
            "2024-05-31T15:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        // Midnight that does not exist (DST at 00:00 in Santiago, 2024-09-08).
        let tz: Tz = "America/Santiago".parse().unwrap();
        let t = start_of_day(tz, NaiveDate::from_ymd_opt(2024, 9, 8).unwrap());
        assert_eq!(t, "2024-09-08T04:00:00Z".parse::<DateTime<Utc>>().unwrap());
    }
}
