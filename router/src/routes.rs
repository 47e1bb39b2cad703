//! The routing table: which requests the router answers itself, and which go
//! to the shard owning the database named by the routing tag inside an id.

use cluster_protocol::ids::{tag_of, Kind};
use http::Method;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route<'a> {
    Health,
    Whoami,
    ListDatabases,
    CreateDatabase,
    /// Forwarded to the shard holding the database with this routing tag.
    Tagged {
        tag: &'a str,
        /// `POST /api/databases/{id}/import`: forwarded without the membership check.
        import: bool,
    },
    NotFound,
}

fn tagged_kind(segment: &str) -> Option<Kind> {
    Some(match segment {
        "databases" => Kind::Database,
        "tables" => Kind::Table,
        "fields" => Kind::Field,
        "views" => Kind::View,
        "webhooks" => Kind::Webhook,
        _ => return None,
    })
}

/// Classifies a request by method and path (no query string).
pub fn classify<'a>(method: &Method, path: &'a str) -> Route<'a> {
    let Some(rest) = path.strip_prefix("/api/") else {
        return Route::NotFound;
    };
    match rest {
        "health" if method == Method::GET => return Route::Health,
        "meta/whoami" if method == Method::GET => return Route::Whoami,
        "databases" if method == Method::GET => return Route::ListDatabases,
        "databases" if method == Method::POST => return Route::CreateDatabase,
        _ => {}
    }
    let mut parts = rest.splitn(3, '/');
    let (Some(collection), Some(id)) = (parts.next(), parts.next()) else {
        return Route::NotFound;
    };
    let tail = parts.next();
    let Some(kind) = tagged_kind(collection) else {
        return Route::NotFound;
    };
    match tag_of(kind, id) {
        Some(tag) => Route::Tagged {
            tag,
            import: kind == Kind::Database && method == Method::POST && tail == Some("import"),
        },
        None => Route::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn router_answered_routes() {
        assert_eq!(classify(&Method::GET, "/api/health"), Route::Health);
        assert_eq!(classify(&Method::POST, "/api/health"), Route::NotFound);
        assert_eq!(classify(&Method::GET, "/api/meta/whoami"), Route::Whoami);
        assert_eq!(
            classify(&Method::GET, "/api/databases"),
            Route::ListDatabases
        );
        assert_eq!(
            classify(&Method::POST, "/api/databases"),
            Route::CreateDatabase
        );
        assert_eq!(classify(&Method::DELETE, "/api/databases"), Route::NotFound);
    }

    #[test]
    fn tagged_routes_carry_the_tag() {
        let t = |p| classify(&Method::GET, p);
        assert_eq!(
            t("/api/databases/db_Ab3dZ1234567"),
            Route::Tagged {
                tag: "Ab3dZ",
                import: false
            }
        );
        assert_eq!(
            t("/api/databases/db_Ab3dZ1234567/tables"),
            Route::Tagged {
                tag: "Ab3dZ",
                import: false
            }
        );
        assert_eq!(
            t("/api/tables/tbl_XYZ12abcdefg/records/rec_1"),
            Route::Tagged {
                tag: "XYZ12",
                import: false
            }
        );
        assert_eq!(
            t("/api/fields/fld_00000abcdefg"),
            Route::Tagged {
                tag: "00000",
                import: false
            }
        );
        assert_eq!(
            t("/api/views/viw_zzzzzabcdefg"),
            Route::Tagged {
                tag: "zzzzz",
                import: false
            }
        );
        assert_eq!(
            t("/api/webhooks/whk_aaaaa1234567/deliveries"),
            Route::Tagged {
                tag: "aaaaa",
                import: false
            }
        );
        // The webhook's tag routes; a `dlv_` id further down rides along.
        assert_eq!(
            classify(
                &Method::POST,
                "/api/webhooks/whk_aaaaa1234567/deliveries/dlv_aaaaa7654321/replay"
            ),
            Route::Tagged {
                tag: "aaaaa",
                import: false
            }
        );
        assert_eq!(
            classify(&Method::POST, "/api/webhooks/whk_aaaaa1234567/test"),
            Route::Tagged {
                tag: "aaaaa",
                import: false
            }
        );
    }

    #[test]
    fn import_is_flagged_only_for_post() {
        let p = "/api/databases/db_Ab3dZ1234567/import";
        assert_eq!(
            classify(&Method::POST, p),
            Route::Tagged {
                tag: "Ab3dZ",
                import: true
            }
        );
        assert_eq!(
            classify(&Method::GET, p),
            Route::Tagged {
                tag: "Ab3dZ",
                import: false
            }
        );
    }

    #[test]
    fn malformed_ids_and_unknown_paths_are_not_found() {
        let t = |p| classify(&Method::GET, p);
        assert_eq!(t("/api/tables/db_Ab3dZ1234567"), Route::NotFound);
        assert_eq!(t("/api/tables/tbl_short"), Route::NotFound);
        assert_eq!(t("/api/tables/"), Route::NotFound);
        assert_eq!(t("/api/tables"), Route::NotFound);
        assert_eq!(t("/api/records/rec_Ab3dZ1234567"), Route::NotFound);
        assert_eq!(t("/api/share/tok/records"), Route::NotFound);
        assert_eq!(t("/other"), Route::NotFound);
        assert_eq!(t("/api/tables/tbl_Ab3dZ12345678"), Route::NotFound);
    }
}
