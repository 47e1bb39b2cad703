//! `GET /api/openapi.json`: the OpenAPI 3.1 document of every public route,
//! written by hand (`router/openapi.json`) and kept true by the unit test
//! below (its operations are exactly the route table's,
//! `cluster_protocol::routes`), by `deploy/check-openapi` (a valid
//! document) and by schemathesis in `deploy/test` (answers conform to it).

use http::{Response, StatusCode};

use crate::errors::{json, Body};

/// The document, as served.
pub const DOCUMENT: &str = include_str!("../../openapi.json");

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

    /// The session cookie is a scheme of the export route and of no other
    /// operation (part C: API routes refuse a cookie alone).
    #[test]
    fn the_cookie_opens_only_the_export() {
        let doc: serde_json::Value = serde_json::from_str(DOCUMENT).unwrap();
        let scheme = &doc["components"]["securitySchemes"]["cookieAuth"];
        assert_eq!(scheme["in"], "cookie");
        assert_eq!(scheme["name"], "__Host-session");
        for (template, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let with_cookie = op["security"]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|r| r.get("cookieAuth").is_some()));
                let export = method == "get" && template == "/api/databases/{id}/export";
                assert_eq!(with_cookie, export, "{method} {template}");
            }
        }
    }

    /// Every entry of the route table is an operation of the document, and
    /// every operation an entry (same method, same template).
    #[test]
    fn the_operations_are_the_route_tables() {
        use std::collections::BTreeSet;

        use cluster_protocol::routes::ROUTES;

        let doc: serde_json::Value = serde_json::from_str(DOCUMENT).unwrap();
        let mut documented = BTreeSet::new();
        for (template, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                if method != "parameters" {
                    documented.insert((method.to_uppercase(), template.clone()));
                }
            }
        }
        let table: BTreeSet<_> = ROUTES
            .iter()
            .map(|r| (r.method.to_string(), r.template.to_string()))
            .collect();
        let missing: Vec<_> = table.difference(&documented).collect();
        assert!(
            missing.is_empty(),
            "not in router/openapi.json: {missing:?}"
        );
        let extra: Vec<_> = documented.difference(&table).collect();
        assert!(extra.is_empty(), "not in the route table: {extra:?}");
    }
}
