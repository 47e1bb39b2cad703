//! The two WebP derivatives of an image attachment (part B: longest edge
//! 256 and 1024 px, never enlarged). Decoding and encoding run off the
//! async runtime, on blocking threads, at most one per CPU at once
//! ([`Pool`]), so a large image never stalls other requests.
//!
//! Skipped (the attachment keeps `thumb_url = card_url = url`): anything
//! that is not a raster image the decoder knows, SVG, sources over
//! [`MAX_THUMBNAIL_SOURCE_BYTES`] or [`MAX_THUMBNAIL_SOURCE_PIXELS`] (read
//! from the header before anything is decoded) and undecodable bytes. The
//! decoder runs under [`decoder_limits`], so a decompression bomb fails to
//! decode instead of exhausting memory.

use std::io::Cursor;
use std::sync::Arc;

use bytes::Bytes;
use image::codecs::webp::WebPEncoder;
use image::imageops::FilterType;
use image::{DynamicImage, ImageFormat, ImageReader, Limits};
use tokio::sync::Semaphore;

use super::limits::{
    CARD_EDGE, MAX_THUMBNAIL_SOURCE_BYTES, MAX_THUMBNAIL_SOURCE_PIXELS, THUMB_EDGE,
};

/// Bytes the decoder may allocate for one image: a source at the pixel
/// ceiling in 8-bit RGBA, with room for one intermediate buffer.
pub const MAX_DECODE_ALLOC: u64 = 4 * MAX_THUMBNAIL_SOURCE_PIXELS + 64 * 1024 * 1024;

/// The bounded pool thumbnails are made on: one permit per CPU.
#[derive(Clone, Debug)]
pub struct Pool {
    permits: Arc<Semaphore>,
}

impl Default for Pool {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::new(cpus)
    }
}

impl Pool {
    pub fn new(size: usize) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(size.max(1))),
        }
    }

    /// [`make`] on a blocking thread once a permit is free. The permit
    /// goes with the thread: a request dropped meanwhile does not free it
    /// before the work is done.
    pub async fn make(&self, source: Bytes) -> Option<Derivatives> {
        let permit = self.permits.clone().acquire_owned().await.ok()?;
        let work = move || {
            let _permit = permit;
            make(&source)
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

/// What the decoder may allocate and accept.
pub fn decoder_limits() -> Limits {
    let mut limits = Limits::default();
    limits.max_image_width = Some(100_000);
    limits.max_image_height = Some(100_000);
    limits.max_alloc = Some(MAX_DECODE_ALLOC);
    limits
}

fn reader(source: &[u8]) -> Option<ImageReader<Cursor<&[u8]>>> {
    let mut reader = ImageReader::new(Cursor::new(source))
        .with_guessed_format()
        .ok()?;
    reader.limits(decoder_limits());
    Some(reader)
}

/// The header's dimensions, without decoding the pixels.
pub fn dimensions(source: &[u8]) -> Option<(u32, u32)> {
    reader(source)?.into_dimensions().ok()
}

/// Makes both derivatives of `source`, or `None` when it is not an image
/// that qualifies (too many pixels, undecodable).
pub fn make(source: &[u8]) -> Option<Derivatives> {
    if source.len() as u64 > MAX_THUMBNAIL_SOURCE_BYTES {
        return None;
    }
    let (w, h) = dimensions(source)?;
    if u64::from(w) * u64::from(h) > MAX_THUMBNAIL_SOURCE_PIXELS || w == 0 || h == 0 {
        return None;
    }
    let image = match reader(source)?.decode() {
        Ok(image) => image,
        Err(e) => {
            tracing::debug!(error = %e, "image does not decode; no thumbnails");
            return None;
        }
    };
    let card = resized(&image, CARD_EDGE);
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
