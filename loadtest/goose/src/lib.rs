//! What the two goose binaries share: environment knobs and a microsecond
//! latency histogram (goose's own metrics are whole milliseconds).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use cluster_protocol::control::{Access, Role};
use cluster_protocol::principal::{Principal, Target};
use hdrhistogram::Histogram;

pub fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

pub fn env_num(name: &str, default: u64) -> u64 {
    env_or(name, &default.to_string())
        .parse()
        .unwrap_or_else(|_| panic!("{name} must be a number"))
}

/// The principal the router signs for the owner's read-write key.
pub fn owner_principal(user_id: String, key_id: String, database_id: String) -> Principal {
    Principal {
        user_id,
        key_id,
        access: Access::ReadWrite,
        narrowed: false,
        database_id: Some(database_id),
        role: Some(Role::Owner),
        support: false,
        epoch: None,
        new_database: None,
        share: false,
    }
}

/// `builder` with the router's signature headers for `principal`, signed
/// now with `secret` over the request's method, path and query and its
/// (empty) body, as the router signs (`Principal::sign_request`). Only for
/// requests without a body.
pub fn signed(
    builder: reqwest::RequestBuilder,
    principal: &Principal,
    secret: &[u8],
) -> reqwest::RequestBuilder {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64;
    let (client, request) = builder.build_split();
    let mut request = request.expect("a valid request");
    let url = request.url();
    let path_and_query = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
    let method = request.method().to_string();
    let target = Target {
        method: &method,
        path_and_query: &path_and_query,
    };
    let signed = principal.sign_request(secret, now, target, b"");
    for (name, value) in signed.headers() {
        let value = reqwest::header::HeaderValue::from_str(value).expect("ASCII header");
        request.headers_mut().insert(name, value);
    }
    reqwest::RequestBuilder::from_parts(client, request)
}

/// Latencies (send to last body byte, µs) and counts of one scenario.
pub struct Stats {
    hist: Mutex<Histogram<u64>>,
    pub ok: AtomicU64,
    pub failed: AtomicU64,
    pub late: AtomicU64,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            hist: Mutex::new(
                Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds"),
            ),
            ok: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            late: AtomicU64::new(0),
        }
    }
}

impl Stats {
    /// Counts one request that started at `started`; `measuring` is false
    /// during the warm-up, whose samples are discarded.
    pub fn record(&self, started: Instant, ok: bool, measuring: bool) {
        let elapsed = started.elapsed();
        if !measuring {
            return;
        }
        if ok {
            self.ok.fetch_add(1, Ordering::Relaxed);
            let us = (elapsed.as_micros() as u64).max(1);
            let _ = self.hist.lock().unwrap().record(us);
        } else {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Why the run counts as failed, if it does: a measured request failed
    /// (an error or a status other than 200), or none was measured. Both
    /// binaries then exit with status 1 (after their summary), so a script
    /// that runs them (`run.sh`, `deploy/loadtest-smoke`) sees the failure.
    pub fn failure(&self, name: &str) -> Option<String> {
        let ok = self.ok.load(Ordering::Relaxed);
        let failed = self.failed.load(Ordering::Relaxed);
        if failed > 0 {
            Some(format!(
                "{name}: {failed} of {} requests failed",
                ok + failed
            ))
        } else if ok == 0 {
            Some(format!("{name}: no request was measured"))
        } else {
            None
        }
    }

    /// The scenario's figures over `run_secs` of measuring, in ms.
    pub fn summary(&self, name: &str, run_secs: f64) -> serde_json::Value {
        let h = self.hist.lock().unwrap();
        let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        let ok = self.ok.load(Ordering::Relaxed);
        let failed = self.failed.load(Ordering::Relaxed);
        serde_json::json!({
            "scenario": name,
            "requests": ok + failed,
            "failed": failed,
            "late": self.late.load(Ordering::Relaxed),
            "rate": ok as f64 / run_secs,
            "p50_ms": ms(0.5),
            "p90_ms": ms(0.9),
            "p99_ms": ms(0.99),
            "max_ms": h.max() as f64 / 1000.0,
            "mean_ms": h.mean() / 1000.0,
        })
    }
}

/// Two paths measured in one run, in alternating slices of time.
pub mod interleaved {
    use std::time::Duration;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Path {
        Router,
        Direct,
    }

    /// The path of slice `i`: blocks of four, router, direct, direct,
    /// router, then the mirror image direct, router, router, direct. Over
    /// every eight slices each path has four, and their mean position is
    /// the same, so a steady drift of the machine's speed cancels out
    /// (`records.js` uses the same order).
    pub fn path_of(i: u64) -> Path {
        let router_first = (i / 4) % 2 == 0;
        let outer = matches!(i % 4, 0 | 3);
        if outer == router_first {
            Path::Router
        } else {
            Path::Direct
        }
    }

    /// The path of a request due `since` the start of an interleaved run:
    /// during the `warmup` the paths take turns by request (`sent`, the
    /// requests sent so far), so both warm up; then the path of its slice.
    pub fn path_at(since: Duration, warmup: Duration, slice: Duration, sent: u64) -> Path {
        match since.checked_sub(warmup) {
            None if sent % 2 == 0 => Path::Router,
            None => Path::Direct,
            Some(t) => path_of((t.as_millis() / slice.as_millis().max(1)) as u64),
        }
    }

    /// How much of the first `measured` of an interleaved run went to
    /// `path`, in slices of `slice` (the run need not end on a slice's
    /// boundary: goose starts its users over a while and runs on after the
    /// last one started).
    pub fn time_on(path: Path, measured: Duration, slice: Duration) -> Duration {
        let slice_us = slice.as_micros().max(1) as u64;
        let measured_us = measured.as_micros() as u64;
        let whole = measured_us / slice_us;
        let mut us = (0..whole).filter(|&i| path_of(i) == path).count() as u64 * slice_us;
        if path_of(whole) == path {
            us += measured_us % slice_us;
        }
        Duration::from_micros(us)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn path_at_takes_turns_in_the_warm_up_then_follows_the_slices() {
            let (w, s) = (Duration::from_secs(3), Duration::from_secs(5));
            let at = |ms, sent| path_at(Duration::from_millis(ms), w, s, sent);
            assert_eq!(at(1_000, 0), Path::Router);
            assert_eq!(at(1_000, 1), Path::Direct);
            // Measured time 0 to 5 s: slice 0, router, whatever was sent.
            assert_eq!(at(3_000, 1), Path::Router);
            assert_eq!(at(7_999, 1), Path::Router);
            // 5 to 10 s: slice 1, direct.
            assert_eq!(at(8_000, 0), Path::Direct);
        }

        #[test]
        fn time_on_splits_whole_and_partial_slices() {
            let s = Duration::from_secs(5);
            let secs = |p, m| time_on(p, Duration::from_millis(m), s).as_millis();
            // 40 s: four slices each.
            assert_eq!(secs(Path::Router, 40_000), 20_000);
            assert_eq!(secs(Path::Direct, 40_000), 20_000);
            // 42 s: slice 8 (router) has run 2 s.
            assert_eq!(secs(Path::Router, 42_000), 22_000);
            assert_eq!(secs(Path::Direct, 42_000), 20_000);
            // 7 s: slice 0 (router) whole, slice 1 (direct) 2 s.
            assert_eq!(secs(Path::Router, 7_000), 5_000);
            assert_eq!(secs(Path::Direct, 7_000), 2_000);
        }

        #[test]
        fn slices_go_router_direct_direct_router_then_the_mirror_image() {
            use Path::*;
            let order: Vec<Path> = (0..8).map(path_of).collect();
            assert_eq!(
                order,
                [Router, Direct, Direct, Router, Direct, Router, Router, Direct]
            );
        }

        #[test]
        fn every_eight_slices_balance_count_and_mean_position() {
            for start in [0u64, 8, 80] {
                let router: Vec<u64> = (start..start + 8)
                    .filter(|&i| path_of(i) == Path::Router)
                    .collect();
                let direct: Vec<u64> = (start..start + 8)
                    .filter(|&i| path_of(i) == Path::Direct)
                    .collect();
                assert_eq!(router.len(), 4);
                assert_eq!(direct.len(), 4);
                assert_eq!(router.iter().sum::<u64>(), direct.iter().sum::<u64>());
            }
        }
    }
}
