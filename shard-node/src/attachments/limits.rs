//! Part C's attachment limits, in one place.

use std::time::Duration;

/// Bytes per file, uploaded or fetched from a URL ("100 MB", read as MiB).
pub const MAX_FILE_BYTES: u64 = 100 * 1024 * 1024;
/// Slack over [`MAX_FILE_BYTES`] a declared upload `Content-Length` may
/// have (the multipart framing and the other parts) before it is refused
/// without reading the body.
pub const UPLOAD_ENVELOPE_BYTES: u64 = 1024 * 1024;
/// Original bytes per database ("100 GB", read as GiB).
pub const MAX_DATABASE_BYTES: i64 = 100 * 1024 * 1024 * 1024;
/// Uploads per account per window, answered 400 (part C).
pub const UPLOADS_PER_WINDOW: u64 = 60;
pub const UPLOAD_WINDOW: Duration = Duration::from_secs(60);
/// Images larger than this get no derivatives (`thumb_url = url`).
pub const MAX_THUMBNAIL_SOURCE_BYTES: u64 = 50 * 1024 * 1024;
/// Images with more pixels than this get no derivatives.
pub const MAX_THUMBNAIL_SOURCE_PIXELS: u64 = 100_000_000;
/// Longest edge of the two WebP derivatives.
pub const THUMB_EDGE: u32 = 256;
pub const CARD_EDGE: u32 = 1024;
/// URLs fetched per write request, across every record and field.
pub const MAX_URLS_PER_REQUEST: usize = 20;
pub const URL_FETCH_TIMEOUT: Duration = Duration::from_secs(30);
pub const URL_FETCH_TOTAL: Duration = Duration::from_secs(60);
/// Signed links work this long from signing...
pub const LINK_LIFETIME: Duration = Duration::from_secs(3600);
/// ...and one signature is reused for this long (so a link handed out has
/// at least 45 minutes left).
pub const LINK_REUSE: Duration = Duration::from_secs(15 * 60);
/// Unplaced uploads (never written into their cell) are swept after this.
pub const UNPLACED_TTL: Duration = Duration::from_secs(24 * 3600);
