//! Share links of views (README "Share links"): an editor makes a
//! read-only link to one view; anyone holding its token reads that view's
//! records, and nothing else, without a key.
//!
//! * [`create`], [`list`], [`delete`]: the editor's routes.
//! * [`read`]: `GET /api/share/{token}/records`, the anonymous read;
//!   [`bookmark`] seals its bookmarks (a view may sort by a hidden field).
//!
//! The token (`cluster_protocol::ids::new_share_token`) carries the
//! database's routing tag so the router can route it; only its SHA-256 is
//! stored, so the token is shown once, in the create reply.

pub mod bookmark;
pub mod create;
pub mod delete;
pub mod list;
pub mod read;
