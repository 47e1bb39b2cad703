//! The two WebP derivatives of an image attachment (part B: longest edge
//! 256 and 1024 px, never enlarged). Decoding and encoding run off the
//! async runtime, on blocking threads, at most one per CPU at once
//! ([`Pool`]), so a large image never stalls other requests.
//!
//! Skipped (the attachment keeps `thumb_url = card_url = url`): anything
//! that is not a raster image the decoder knows, SVG, sources over
//! [`MAX_THUMBNAIL_SOURCE_BYTES`] or [`MAX_THUMBNAIL_SOURCE_PIXELS`] (read
//! from the header before anything is decoded), undecodable bytes, and
//! images the node's memory budgets have no room for ([`Pool`]). Each
//! decode reserves what its header says it will take ([`decode_cost`])
//! from the node-wide `THUMBNAIL_DECODE_BYTES` before it starts and runs
//! with that as the decoder's `max_alloc`, so decompression bombs fail to
//! decode, and all decodes together stay under the budget.

use std::io::Cursor;
use std::sync::Arc;

use bytes::Bytes;
use image::codecs::webp::WebPEncoder;
use image::imageops::FilterType;
use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::limits::{
    CARD_EDGE, MAX_THUMBNAIL_SOURCE_BYTES, MAX_THUMBNAIL_SOURCE_PIXELS, THUMB_EDGE,
};
use super::settings::AttachmentSettings;

const MIB: u64 = 1024 * 1024;

/// What a decoder may allocate beyond its output buffer: a second buffer
/// as large (a JPEG's component planes, a format conversion) plus this.
pub const DECODER_SLACK_BYTES: u64 = 16 * MIB;
/// The derivatives' own buffers (the card and thumb images, the thumb's
/// resize, their RGBA copies and encodings), counted once per decode.
pub const ENCODE_BYTES: u64 = 16 * MIB;

/// The bounded pool thumbnails are made on: one decode per CPU at once,
/// under two node-wide byte budgets (`THUMBNAIL_QUEUE_BYTES` for sources
/// held in memory, `THUMBNAIL_DECODE_BYTES` for what decodes allocate).
#[derive(Clone, Debug)]
pub struct Pool {
    permits: Arc<Semaphore>,
    /// Bytes of sources held in memory (queued or decoding).
    queue: Arc<Semaphore>,
    queue_budget: u64,
    /// Bytes decodes may allocate, reckoned from each header.
    decode: Arc<Semaphore>,
    decode_budget: u64,
}

impl Default for Pool {
    fn default() -> Self {
        Self::with_budgets(&AttachmentSettings::default())
    }
}

/// A source's share of the queue budget, held until its derivatives are
/// made (or given up).
#[derive(Debug)]
pub struct Held(#[allow(dead_code)] OwnedSemaphorePermit);

impl Pool {
    /// One permit per CPU, the budgets of `settings`.
    pub fn with_budgets(settings: &AttachmentSettings) -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::new(
            cpus,
            settings.thumbnail_queue_bytes,
            settings.thumbnail_decode_bytes,
        )
    }

    pub fn new(size: usize, queue_bytes: u64, decode_bytes: u64) -> Self {
        let permits_of = |bytes: u64| bytes.min(Semaphore::MAX_PERMITS as u64) as usize;
        Self {
            permits: Arc::new(Semaphore::new(size.max(1))),
            queue: Arc::new(Semaphore::new(permits_of(queue_bytes))),
            queue_budget: queue_bytes,
            decode: Arc::new(Semaphore::new(permits_of(decode_bytes))),
            decode_budget: decode_bytes,
        }
    }

    /// Room in the queue budget for a source of `bytes`, taken now or not
    /// at all: a node over its budget makes no thumbnails for this image
    /// rather than hold it in memory until a decoder is free.
    pub fn hold(&self, bytes: u64) -> Option<Held> {
        if bytes > self.queue_budget {
            return None;
        }
        let n = u32::try_from(bytes.max(1)).ok()?;
        self.queue.clone().try_acquire_many_owned(n).ok().map(Held)
    }

    /// [`make_planned`] on a blocking thread once a CPU permit and the
    /// decode's reckoned bytes ([`decode_cost`]) are free; `None` at once
    /// when the image does not qualify or its cost alone is over the
    /// node's decode budget. The permits go with the thread: a request
    /// dropped meanwhile does not free them before the work is done.
    pub async fn make(&self, source: Bytes) -> Option<Derivatives> {
        let plan = plan(&source)?;
        let cost = decode_cost(&plan);
        if cost > self.decode_budget {
            tracing::info!(
                width = plan.width,
                height = plan.height,
                cost,
                budget = self.decode_budget,
                "an image would take more than the node's decode budget; no thumbnails"
            );
            return None;
        }
        let bytes = self
            .decode
            .clone()
            .acquire_many_owned(u32::try_from(cost).ok()?)
            .await
            .ok()?;
        let permit = self.permits.clone().acquire_owned().await.ok()?;
        let work = move || {
            let _held = (permit, bytes);
            make_planned(&source, &plan)
        };
        match tokio::task::spawn_blocking(work).await {
            Ok(made) => made,
            Err(e) => {
                tracing::warn!(error = %e, "thumbnail task failed");
                None
            }
        }
    }
}

/// What one decode will take, read from the image's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub width: u32,
    pub height: u32,
    /// The decoded pixels' bytes (dimensions and colour type).
    pub decoded_bytes: u64,
}

impl Plan {
    /// What the decoder may allocate: its output and as much again, plus
    /// [`DECODER_SLACK_BYTES`] (its `Limits::max_alloc`).
    pub fn decode_alloc(&self) -> u64 {
        self.decoded_bytes
            .saturating_mul(2)
            .saturating_add(DECODER_SLACK_BYTES)
    }
}

/// The plan of `source` when it is an image that qualifies: a raster
/// format the decoder knows, within the pixel ceiling (nothing decoded).
pub fn plan(source: &[u8]) -> Option<Plan> {
    if source.len() as u64 > MAX_THUMBNAIL_SOURCE_BYTES {
        return None;
    }
    let decoder = reader(source, decoder_limits(DECODER_SLACK_BYTES))?
        .into_decoder()
        .ok()?;
    let (width, height) = decoder.dimensions();
    if u64::from(width) * u64::from(height) > MAX_THUMBNAIL_SOURCE_PIXELS
        || width == 0
        || height == 0
    {
        return None;
    }
    Some(Plan {
        width,
        height,
        decoded_bytes: decoder.total_bytes(),
    })
}

/// The bytes one decode of `plan` is reckoned to take at its peak: what
/// the decoder may allocate, the card's resize (its vertical pass is RGBA
/// `f32`, the source's width by the card's height; an image already small
/// enough is copied) and the derivatives' buffers.
pub fn decode_cost(plan: &Plan) -> u64 {
    let card = fit(plan.width, plan.height, CARD_EDGE);
    let resize = if card == (plan.width, plan.height) {
        plan.decoded_bytes
    } else {
        u64::from(plan.width) * u64::from(card.1) * 16
    };
    plan.decode_alloc()
        .saturating_add(resize)
        .saturating_add(ENCODE_BYTES)
}

/// The two encoded WebP images.
#[derive(Debug, Clone)]
pub struct Derivatives {
    pub thumb: Bytes,
    pub card: Bytes,
}

/// The raster format the first bytes of a file say it is, when it is one
/// the decoder can read (SVG and unknown formats are `None`).
pub fn raster_format(head: &[u8]) -> Option<ImageFormat> {
    image::guess_format(head)
        .ok()
        .filter(|f| f.reading_enabled())
}

/// The content type the first bytes of a file show, for a part that
/// declared none (or `application/octet-stream`).
pub fn sniff(head: &[u8]) -> Option<&'static str> {
    image::guess_format(head).ok().map(|f| f.to_mime_type())
}

/// Whether a file of `content_type` and `size` bytes starting with `head`
/// should get derivatives at all (before anything is read or decoded).
pub fn qualifies(content_type: &str, size: u64, head: &[u8]) -> bool {
    let ct = content_type.to_ascii_lowercase();
    ct.starts_with("image/")
        && !ct.starts_with("image/svg")
        && size <= MAX_THUMBNAIL_SOURCE_BYTES
        && raster_format(head).is_some()
}

/// The size of an image `width` x `height` fitted into `edge` on its
/// longest side, keeping the aspect ratio and never enlarging it.
pub fn fit(width: u32, height: u32, edge: u32) -> (u32, u32) {
    let longest = width.max(height);
    if longest <= edge || longest == 0 {
        return (width.max(1), height.max(1));
    }
    let scale = |side: u32| {
        let scaled =
            (u64::from(side) * u64::from(edge) + u64::from(longest) / 2) / u64::from(longest);
        (scaled as u32).max(1)
    };
    (scale(width), scale(height))
}

/// What the decoder may allocate (`max_alloc`) and accept.
pub fn decoder_limits(max_alloc: u64) -> Limits {
    let mut limits = Limits::default();
    limits.max_image_width = Some(100_000);
    limits.max_image_height = Some(100_000);
    limits.max_alloc = Some(max_alloc);
    limits
}

fn reader(source: &[u8], limits: Limits) -> Option<ImageReader<Cursor<&[u8]>>> {
    let mut reader = ImageReader::new(Cursor::new(source))
        .with_guessed_format()
        .ok()?;
    reader.limits(limits);
    Some(reader)
}

/// The header's dimensions, without decoding the pixels.
pub fn dimensions(source: &[u8]) -> Option<(u32, u32)> {
    reader(source, decoder_limits(DECODER_SLACK_BYTES))?
        .into_dimensions()
        .ok()
}

/// Makes both derivatives of `source`, or `None` when it is not an image
/// that qualifies (too many pixels, undecodable). No memory budget: the
/// node goes through [`Pool::make`].
pub fn make(source: &[u8]) -> Option<Derivatives> {
    make_planned(source, &plan(source)?)
}

/// Makes both derivatives of `source` as planned: the decoder may
/// allocate no more than [`Plan::decode_alloc`].
pub fn make_planned(source: &[u8], plan: &Plan) -> Option<Derivatives> {
    let image = match reader(source, decoder_limits(plan.decode_alloc()))?.decode() {
        Ok(image) => image,
        Err(e) => {
            tracing::debug!(error = %e, "image does not decode; no thumbnails");
            return None;
        }
    };
    let card = resized(&image, CARD_EDGE);
    drop(image);
    let thumb = resized(&card, THUMB_EDGE);
    Some(Derivatives {
        card: encode(&card)?,
        thumb: encode(&thumb)?,
    })
}

fn resized(image: &DynamicImage, edge: u32) -> DynamicImage {
    let (w, h) = fit(image.width(), image.height(), edge);
    if (w, h) == (image.width(), image.height()) {
        return image.clone();
    }
    image.resize_exact(w, h, FilterType::Triangle)
}

/// Lossless WebP (the encoder the `image` crate has), in RGBA.
fn encode(image: &DynamicImage) -> Option<Bytes> {
    let rgba = image.to_rgba8();
    let mut out = Vec::new();
    let encoded = WebPEncoder::new_lossless(&mut out).encode(
        rgba.as_raw(),
        rgba.width(),
        rgba.height(),
        image::ExtendedColorType::Rgba8,
    );
    match encoded {
        Ok(()) => Some(Bytes::from(out)),
        Err(e) => {
            tracing::warn!(error = %e, "could not encode a thumbnail");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let image = DynamicImage::new_rgb8(width, height);
        let mut out = Cursor::new(Vec::new());
        image.write_to(&mut out, ImageFormat::Png).unwrap();
        out.into_inner()
    }

    fn decoded(webp: &[u8]) -> (u32, u32) {
        let image = image::load_from_memory_with_format(webp, ImageFormat::WebP).unwrap();
        (image.width(), image.height())
    }

    #[test]
    fn fitting_keeps_the_ratio_and_never_enlarges() {
        assert_eq!(fit(4000, 3000, 1024), (1024, 768));
        assert_eq!(fit(3000, 4000, 256), (192, 256));
        assert_eq!(fit(300, 200, 1024), (300, 200));
        assert_eq!(fit(1024, 10, 1024), (1024, 10));
        assert_eq!(fit(20000, 1, 256), (256, 1));
        assert_eq!(fit(1, 1, 256), (1, 1));
    }

    #[test]
    fn a_png_gets_both_sizes() {
        let d = make(&png(2000, 1000)).unwrap();
        assert_eq!(decoded(&d.card), (1024, 512));
        assert_eq!(decoded(&d.thumb), (256, 128));
        let small = make(&png(100, 50)).unwrap();
        assert_eq!(decoded(&small.card), (100, 50));
        assert_eq!(decoded(&small.thumb), (100, 50));
    }

    #[test]
    fn what_gets_no_thumbnails() {
        let head = png(10, 10);
        assert!(qualifies("image/png", 100, &head));
        assert!(!qualifies(
            "image/svg+xml",
            100,
            b"<svg xmlns='http://www.w3.org/2000/svg'/>"
        ));
        assert!(!qualifies("image/png", 100, b"<svg/>"));
        assert!(!qualifies("text/plain", 100, &head));
        assert!(!qualifies(
            "image/png",
            MAX_THUMBNAIL_SOURCE_BYTES + 1,
            &head
        ));
        assert!(make(b"\x89PNG\r\n\x1a\nnot really a png").is_none());
        assert!(make(b"plain text").is_none());
        assert_eq!(sniff(&head), Some("image/png"));
        assert_eq!(sniff(b"hello"), None);
    }

    /// A 20000x20000 PNG of a few kilobytes: its header is read, its pixels
    /// never are (400 megapixels is over the ceiling).
    #[test]
    fn a_decompression_bomb_is_refused_from_its_header() {
        let mut bomb = png(1, 1);
        // IHDR's width and height sit at bytes 16..24; the CRC is not
        // checked before the dimensions are reported.
        bomb[16..20].copy_from_slice(&20000u32.to_be_bytes());
        bomb[20..24].copy_from_slice(&20000u32.to_be_bytes());
        let fixed_crc = crc_of_ihdr(&bomb);
        bomb[29..33].copy_from_slice(&fixed_crc.to_be_bytes());
        assert_eq!(dimensions(&bomb), Some((20000, 20000)));
        assert!(make(&bomb).is_none());
    }

    /// A 12000x9000 image (108 MP) is over the pixel ceiling even though
    /// each side is reasonable.
    #[test]
    fn the_pixel_ceiling_counts_area() {
        let mut big = png(1, 1);
        big[16..20].copy_from_slice(&12000u32.to_be_bytes());
        big[20..24].copy_from_slice(&9000u32.to_be_bytes());
        let crc = crc_of_ihdr(&big);
        big[29..33].copy_from_slice(&crc.to_be_bytes());
        assert!(make(&big).is_none());
    }

    fn crc_of_ihdr(png: &[u8]) -> u32 {
        // Chunk type + data of IHDR: bytes 12..29.
        let mut crc = 0xFFFF_FFFFu32;
        for &b in &png[12..29] {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
}
