//! The attachment settings a node is given (`crate::settings`) (the fixed
//! limits of part C are in [`super::limits`]): the storage quota per
//! database, and the node-wide memory budgets of thumbnail making.

use super::limits::MAX_DATABASE_BYTES;

const MIB: u64 = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentSettings {
    /// `ATTACHMENT_QUOTA_BYTES`, default 100 GiB (part C's "100 GB"):
    /// original bytes one database may hold, uploads and URL fetches alike.
    pub database_quota_bytes: i64,
    /// `THUMBNAIL_QUEUE_BYTES`, default 256 MiB: image sources this node
    /// holds in memory at once for their thumbnails (waiting for a decoder
    /// or being decoded). An image that does not fit in what is left gets
    /// no thumbnails (`thumb_url = url`) rather than waiting in memory.
    pub thumbnail_queue_bytes: u64,
    /// `THUMBNAIL_DECODE_BYTES`, default 1 GiB: what every decode of this
    /// node may allocate at once (decoded pixels, the resize's buffer, the
    /// encodings). A decode waits until its reckoned share is free; an
    /// image whose share alone is larger gets no thumbnails.
    pub thumbnail_decode_bytes: u64,
}

impl Default for AttachmentSettings {
    fn default() -> Self {
        Self {
            database_quota_bytes: MAX_DATABASE_BYTES,
            thumbnail_queue_bytes: 256 * MIB,
            thumbnail_decode_bytes: 1024 * MIB,
        }
    }
}

/// A quota as messages name it: whole GB (GiB) when it is, else bytes.
pub fn quota_text(bytes: i64) -> String {
    const GIB: i64 = 1024 * 1024 * 1024;
    if bytes >= GIB && bytes % GIB == 0 {
        format!("{} GB", bytes / GIB)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_read_as_written() {
        assert_eq!(quota_text(MAX_DATABASE_BYTES), "100 GB");
        assert_eq!(quota_text(5000), "5000 bytes");
    }
}
