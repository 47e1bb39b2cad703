//! The routing table: which requests the router answers itself, and which go
//! to the shard owning the database named by the routing tag inside an id.

use cluster_protocol::ids::{share_token_tag, tag_of, Kind};
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
    /// `GET`/`HEAD /api/files/{att_id}/{variant}`: a public file link, no
    /// API key (the signature in its query is checked by the shard). `None`
    /// when the attachment id or the variant is malformed (404).
    File {
        tag: Option<&'a str>,
    },
    /// `GET /api/share/{token}/records`: a view's share link, no API key
    /// (the shard checks the token). `None` when the token is malformed (404).
    Share {
        tag: Option<&'a str>,
    },
    NotFound,
}

/// The variants a file link may name.
pub const FILE_VARIANTS: [&str; 3] = ["original", "thumb-256", "card-1024"];

/// The routing tag of a file link's path after `/api/files/`, if it is
/// `{att_id}/{variant}` with a well-formed id and a known variant.
fn file_tag(rest: &str) -> Option<&str> {
    let (id, variant) = rest.split_once('/')?;
    if !FILE_VARIANTS.contains(&variant) {
        return None;
    }
    tag_of(Kind::Attachment, id)
}

fn tagged_kind(segment: &str) -> Option<Kind> {
    Some(match segment {
        "databases" => Kind::Database,
        "tables" => Kind::Table,
        "fields" => Kind::Field,
        "views" => Kind::View,
        "webhooks" => Kind::Webhook,
        "comments" => Kind::Comment,
        "shares" => Kind::ShareLink,
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
    if let Some(file) = rest.strip_prefix("files/") {
        if method == Method::GET || method == Method::HEAD {
            return Route::File {
                tag: file_tag(file),
            };
        }
        return Route::NotFound;
    }
    if let Some(share) = rest.strip_prefix("share/") {
        return match share.strip_suffix("/records") {
            Some(token) if method == Method::GET && !token.contains('/') => Route::Share {
                tag: share_token_tag(token),
            },
            _ => Route::NotFound,
        };
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
        assert_eq!(t("/other"), Route::NotFound);
        assert_eq!(t("/api/tables/tbl_Ab3dZ12345678"), Route::NotFound);
    }

    #[test]
    fn comments_and_shares_route_by_their_ids_tag() {
        let t = |m: Method, p| classify(&m, p);
        let tagged = |tag| Route::Tagged { tag, import: false };
        assert_eq!(
            t(
                Method::GET,
                "/api/tables/tbl_Ab3dZ1234567/records/rec_Ab3dZ7654321/comments"
            ),
            tagged("Ab3dZ")
        );
        for m in [Method::PATCH, Method::DELETE] {
            assert_eq!(t(m, "/api/comments/cmt_Qq9zz1234567"), tagged("Qq9zz"));
        }
        assert_eq!(
            t(Method::POST, "/api/views/viw_Ab3dZ1234567/shares"),
            tagged("Ab3dZ")
        );
        assert_eq!(
            t(Method::DELETE, "/api/shares/shl_Ab3dZ1234567"),
            tagged("Ab3dZ")
        );
        for bad in [
            "/api/comments/cmt_short",
            "/api/comments/shl_Ab3dZ1234567",
            "/api/shares/cmt_Ab3dZ1234567",
            "/api/shares/shl_Ab3dZ12345678",
        ] {
            assert_eq!(t(Method::DELETE, bad), Route::NotFound, "{bad}");
        }
    }

    #[test]
    fn share_reads_carry_the_tokens_tag_or_nothing() {
        let token = cluster_protocol::ids::new_share_token("Ab3dZ");
        let path = format!("/api/share/{token}/records");
        assert_eq!(
            classify(&Method::GET, &path),
            Route::Share { tag: Some("Ab3dZ") }
        );
        for bad in [
            "/api/share/tok/records".to_string(),
            "/api/share//records".to_string(),
            format!("/api/share/{}/records", &token[..31]),
            format!("/api/share/{token}x/records"),
            format!("/api/share/{}/records", token.replacen("shr", "shl", 1)),
        ] {
            assert_eq!(
                classify(&Method::GET, &bad),
                Route::Share { tag: None },
                "{bad}"
            );
        }
        for other in [
            format!("/api/share/{token}"),
            format!("/api/share/{token}/records/x"),
            format!("/api/share/{token}/a/records"),
            "/api/share".to_string(),
        ] {
            assert_eq!(classify(&Method::GET, &other), Route::NotFound, "{other}");
        }
        for m in [Method::POST, Method::DELETE, Method::PATCH] {
            assert_eq!(classify(&m, &path), Route::NotFound);
        }
    }

    #[test]
    fn file_links_carry_the_attachment_tag_or_nothing() {
        let path = "/api/files/att_Ab3dZ1234567/thumb-256";
        for m in [Method::GET, Method::HEAD] {
            assert_eq!(classify(&m, path), Route::File { tag: Some("Ab3dZ") });
        }
        for variant in FILE_VARIANTS {
            let p = format!("/api/files/att_Ab3dZ1234567/{variant}");
            assert_eq!(
                classify(&Method::GET, &p),
                Route::File { tag: Some("Ab3dZ") }
            );
        }
        for bad in [
            "/api/files/att_short/original",
            "/api/files/rec_Ab3dZ1234567/original",
            "/api/files/att_Ab3dZ1234567/huge",
            "/api/files/att_Ab3dZ1234567",
            "/api/files/att_Ab3dZ1234567/",
            "/api/files/att_Ab3dZ1234567/original/x",
            "/api/files/",
        ] {
            assert_eq!(
                classify(&Method::GET, bad),
                Route::File { tag: None },
                "{bad}"
            );
        }
        assert_eq!(classify(&Method::POST, path), Route::NotFound);
        assert_eq!(classify(&Method::DELETE, path), Route::NotFound);
    }
}
