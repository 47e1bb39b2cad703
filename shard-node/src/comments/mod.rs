//! Comments on records (README "Comments"): list and create under a
//! record, edit and delete by id. One module per verb.
//!
//! Who may do what: any member reads; any member may comment, viewers
//! included (a comment is conversation about the data, not a change to
//! it), but a read-only key and a support grant are refused as for every
//! write; only the author edits; the author or an owner deletes.

pub mod create;
pub mod delete;
pub mod list;
pub mod update;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use cluster_protocol::control::Access as KeyAccess;
use cluster_protocol::error::forbidden;
use serde_json::{Map, Value};

use crate::auth::{Access, Reader};
use crate::config::MAX_COMMENT_CHARS;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// 403 for an edit by anyone but the author.
pub const AUTHOR_ONLY_EDIT: &str = "Only the author can edit a comment.";
/// 403 for a delete by anyone but the author or an owner.
pub const AUTHOR_OR_OWNER_DELETE: &str = "Only the author or an owner can delete a comment.";

/// A member allowed to write comments: any role (viewers too) with a
/// read-write key; a support grant is refused.
pub struct Commenter(pub Access);

impl FromRequestParts<AppState> for Commenter {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let Reader(access) = Reader::from_request_parts(parts, state).await?;
        if access.principal.access == KeyAccess::ReadOnly {
            return Err(ApiError::Forbidden(forbidden::KEY_READ_ONLY));
        }
        if access.principal.role.is_none() {
            return Err(ApiError::Forbidden(forbidden::SUPPORT_READ_ONLY));
        }
        Ok(Commenter(access))
    }
}

/// The body's `text`: a string, not blank after trimming, at most
/// [`MAX_COMMENT_CHARS`] characters; returned as sent (untrimmed).
pub fn text(body: &Map<String, Value>) -> ApiResult<String> {
    let text = match body.get("text") {
        None | Some(Value::Null) => return Err(ApiError::bad_request("text is required.")),
        Some(Value::String(s)) => s,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "text must be a string, not {}.",
                crate::http::body::json_kind(other)
            )))
        }
    };
    if text.trim().is_empty() {
        return Err(ApiError::bad_request("text must not be blank."));
    }
    let n = text.chars().count();
    if n > MAX_COMMENT_CHARS {
        return Err(ApiError::bad_request(format!(
            "A comment may be at most {MAX_COMMENT_CHARS} characters; this one has {n}."
        )));
    }
    Ok(text.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> ApiResult<String> {
        text(v.as_object().unwrap())
    }

    #[test]
    fn text_is_a_non_blank_string_within_the_limit_kept_as_sent() {
        assert_eq!(parse(json!({"text": "  hi "})).unwrap(), "  hi ");
        for bad in [
            json!({}),
            json!({"text": null}),
            json!({"text": 3}),
            json!({"text": " \n"}),
        ] {
            assert!(parse(bad).is_err());
        }
        let at_limit = "é".repeat(MAX_COMMENT_CHARS);
        assert!(parse(json!({ "text": at_limit })).is_ok());
        let over = "a".repeat(MAX_COMMENT_CHARS + 1);
        let Err(ApiError::BadRequest(m)) = parse(json!({ "text": over })) else {
            panic!("over the limit must be refused");
        };
        assert!(m.contains("10000"), "{m}");
    }
}
