//! `GET /api/openapi.json`: the OpenAPI 3.1 document of every public route,
//! written by hand (`router/openapi.json`) and kept true by
//! `deploy/check-openapi` (every registered route is in it) and by
//! schemathesis in `deploy/test` (answers conform to it).

use http::{Response, StatusCode};

use crate::errors::{json, Body};

/// The document, as served.
pub const DOCUMENT: &str = include_str!("../openapi.json");

pub fn answer() -> Response<Body> {
    json(StatusCode::OK, DOCUMENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_is_openapi_3_1_json() {
        let doc: serde_json::Value = serde_json::from_str(DOCUMENT).unwrap();
        assert_eq!(doc["openapi"], "3.1.0");
        assert!(doc["paths"]["/api/openapi.json"]["get"].is_object());
        assert!(doc["components"]["securitySchemes"]["bearerAuth"].is_object());
    }
}
