//! A 100 MB body streamed into each store (and read back) grows this
//! process's resident memory by a few MiB, not by the body's size. Alone in
//! its test binary, so nothing else allocates while it measures; the two
//! stores run one after the other. Prints what it measured (`cargo test
//! -p blobstore --test memory -- --nocapture`).

// Test code: an unwrap that fails is a failed test with its location.
#![allow(clippy::unwrap_used)]

#[path = "store/support.rs"]
mod support;

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;

use support::{fresh_key, pattern, TestStore};

const TOTAL: usize = 100 * 1000 * 1000;
const CHUNK: usize = 64 * 1024;
/// The bytes repeat every MiB (a multiple of CHUNK): byte `p` is `BASE[p % MIB]`.
const MIB: usize = 1 << 20;
/// Generous: a part (8 MiB on S3) plus buffers and the runtime's own.
const MAX_GROWTH: u64 = 64 * 1024 * 1024;

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// Samples RSS every 2 ms until dropped; reports the peak.
struct PeakRss {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PeakRss {
    fn start() -> Self {
        let peak = Arc::new(AtomicU64::new(rss_bytes()));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (peak.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(rss_bytes(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        Self {
            peak,
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        self.peak.load(Ordering::Relaxed).max(rss_bytes())
    }
}

fn body(base: Bytes) -> impl futures::Stream<Item = io::Result<Bytes>> + Send {
    futures::stream::iter((0..TOTAL).step_by(CHUNK)).map(move |at| {
        let start = at % MIB;
        let len = CHUNK.min(TOTAL - at);
        Ok(base.slice(start..start + len))
    })
}

async fn measure(t: TestStore, name: &str) {
    let base = Bytes::from(pattern(MIB, 99));
    let key = fresh_key();

    let before = rss_bytes();
    let sampler = PeakRss::start();
    let started = Instant::now();
    let size = t
        .store
        .put(&key, body(base.clone()), TOTAL as u64)
        .await
        .unwrap();
    let put_time = started.elapsed();
    let put_growth = sampler.finish().saturating_sub(before);
    assert_eq!(size, TOTAL as u64);

    let before = rss_bytes();
    let sampler = PeakRss::start();
    let started = Instant::now();
    let mut read = t.store.get(&key, None).await.unwrap().body;
    let mut at = 0;
    while let Some(chunk) = read.next().await {
        let chunk = chunk.unwrap();
        let mut rest = &chunk[..];
        while !rest.is_empty() {
            let start = at % MIB;
            let n = rest.len().min(MIB - start);
            assert!(
                rest[..n] == base[start..start + n],
                "bytes from {at} differ"
            );
            at += n;
            rest = &rest[n..];
        }
    }
    let get_time = started.elapsed();
    let get_growth = sampler.finish().saturating_sub(before);
    assert_eq!(at, TOTAL);
    t.store.delete(&key).await.unwrap();

    let mib = |b: u64| b as f64 / MIB as f64;
    println!(
        "{name}: put 100 MB in {:.2}s, RSS +{:.1} MiB; get in {:.2}s, RSS +{:.1} MiB",
        put_time.as_secs_f64(),
        mib(put_growth),
        get_time.as_secs_f64(),
        mib(get_growth),
    );
    assert!(
        put_growth < MAX_GROWTH,
        "{name}: a 100 MB put grew RSS by {:.1} MiB",
        mib(put_growth)
    );
    assert!(
        get_growth < MAX_GROWTH,
        "{name}: a 100 MB get grew RSS by {:.1} MiB",
        mib(get_growth)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_mb_body_streams_through_each_store_in_little_memory() {
    measure(TestStore::local(), "local").await;
    // The production part size, not the suite's small one.
    let mut s3 = TestStore::s3();
    let mut settings = support::s3_settings();
    settings.part_size = blobstore::settings::DEFAULT_PART_SIZE;
    s3.store = blobstore::BlobStore::open(&blobstore::Settings::S3(settings)).unwrap();
    measure(s3, "s3").await;
}
