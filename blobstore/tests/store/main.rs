//! The blob store suite: every behaviour the attachment, export and import
//! routes rely on, run against both real stores (a local directory and
//! the S3 test server of `deploy/test`).

// Test code: an unwrap that fails is a failed test with its location.
#![allow(clippy::unwrap_used)]

mod support;

mod deletes;
mod limits;
mod links;
mod multipart;
mod ranges;
mod round_trip;
mod s3_auth;
