//! Issue 27, section 4: a thumbnail decode allocates no more than the
//! node's decode budget (`THUMBNAIL_DECODE_BYTES`), whatever an image's
//! header claims. Its own test binary: the allocator below counts every
//! allocation of the process, so nothing else may run beside it.

// Test code: an unwrap that fails is a failed test with its location.
#![allow(clippy::unwrap_used)]
// A counting global allocator is unsafe by definition (test code only).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Cursor;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use shard_node::attachments::thumbnails::Pool;

/// The system allocator, keeping the bytes live now and the most since
/// [`reset_peak`].
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
            grew(new_size);
        }
        p
    }
}

fn grew(n: usize) {
    let now = LIVE.fetch_add(n, Ordering::SeqCst) + n;
    PEAK.fetch_max(now, Ordering::SeqCst);
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Starts a measurement: returns the bytes live now.
fn reset_peak() -> usize {
    let now = LIVE.load(Ordering::SeqCst);
    PEAK.store(now, Ordering::SeqCst);
    now
}

/// The most bytes allocated at once since `base` was taken.
fn peak_over(base: usize) -> usize {
    PEAK.load(Ordering::SeqCst).saturating_sub(base)
}

fn png(width: u32, height: u32) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    image::DynamicImage::new_rgb8(width, height)
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

/// A 1x1 PNG whose header claims `width` x `height` (CRC fixed): a few
/// dozen bytes a naive decoder answers with a buffer of the claimed size.
fn bomb(width: u32, height: u32) -> Vec<u8> {
    let mut b = png(1, 1);
    b[16..20].copy_from_slice(&width.to_be_bytes());
    b[20..24].copy_from_slice(&height.to_be_bytes());
    let mut crc = 0xFFFF_FFFFu32;
    for &byte in &b[12..29] {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    b[29..33].copy_from_slice(&(!crc).to_be_bytes());
    b
}

const MIB: usize = 1024 * 1024;

#[tokio::test]
async fn decodes_stay_under_the_nodes_decode_budget() {
    let budget = 64 * MIB;
    let pool = Pool::new(2, 64 * MIB as u64, budget as u64);

    // Within the budget: both derivatives are made.
    let small = Bytes::from(png(64, 48));
    let base = reset_peak();
    assert!(
        pool.make(small).await.is_some(),
        "a small image gets thumbnails"
    );
    let used = peak_over(base);
    assert!(used < budget, "{used} bytes for a 64x48 image");

    // 8000 x 8000 claimed (192 MB of RGB, under the 100 MP ceiling): its
    // decode would take more than the budget, so it never starts; the
    // others are over the pixel ceiling.
    for (w, h) in [(8000, 8000), (50_000, 50_000), (100_000, 1)] {
        let source = Bytes::from(bomb(w, h));
        let base = reset_peak();
        assert!(pool.make(source).await.is_none(), "{w}x{h}");
        let used = peak_over(base);
        assert!(
            used < budget,
            "{w}x{h}: {used} bytes allocated, over the {budget} budget"
        );
    }

    // Several at once wait for each other's share instead of adding up.
    let images: Vec<Bytes> = (0..6).map(|_| Bytes::from(png(600, 600))).collect();
    let base = reset_peak();
    let made = futures::future::join_all(images.into_iter().map(|i| pool.make(i))).await;
    let used = peak_over(base);
    assert!(made.iter().all(Option::is_some), "600x600 fits the budget");
    assert!(
        used < budget + 8 * MIB,
        "{used} bytes for six decodes at once"
    );
}
