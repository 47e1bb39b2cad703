//! What the two goose binaries share: environment knobs and a microsecond
//! latency histogram (goose's own metrics are whole milliseconds).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use cluster_protocol::control::{Access, Role};
use cluster_protocol::principal::{
    Principal, HEADER_PRINCIPAL, HEADER_SIGNATURE, HEADER_TIMESTAMP,
};
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
    }
}

/// `builder` with the router's signature headers for `principal`, signed
/// now with `secret` (`Principal::sign`: the router's own code).
pub fn signed(
    builder: reqwest::RequestBuilder,
    principal: &Principal,
    secret: &[u8],
) -> reqwest::RequestBuilder {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64;
    let signed = principal.sign(secret, now);
    builder
        .header(HEADER_PRINCIPAL, signed.principal)
        .header(HEADER_TIMESTAMP, signed.timestamp)
        .header(HEADER_SIGNATURE, signed.signature)
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
