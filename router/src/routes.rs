//! The routing table: which requests the router answers itself, and which go
//! to the shard owning the database named by the routing tag inside an id.

use cluster_protocol::ids::{share_token_tag, tag_of, Kind};
use http::Method;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route<'a> {
    Health,
    /// `GET /api/openapi.json`: the API's description, no key.
    OpenApi,
    Whoami,
    ListDatabases,
    CreateDatabase,
    /// Forwarded to the shard holding the database with this routing tag.
    Tagged {
        tag: &'a str,
        /// `POST /api/databases/{id}/import`: forwarded without the membership check.
        import: bool,
    },
    /// `/api/databases/{id}/members[/{user_id}]`: member management, answered
    /// by the router with the control plane (which owns memberships); never
    /// forwarded to a shard.
    Members {
        tag: &'a str,
        database_id: &'a str,
        action: MemberAction<'a>,
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

/// What a member-management request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberAction<'a> {
    List,
    Add,
    /// `user_id` is the path segment as sent (checked by `members`).
    ChangeRole {
        user_id: &'a str,
    },
    Remove {
        user_id: &'a str,
    },
}

/// The member-management routes `classify` answers with [`Route::Members`]
/// (read by deploy/check-openapi; a unit test ties them to `classify`).
pub const MEMBER_ROUTES: [(&str, &str); 4] = [
    ("GET", "/api/databases/{id}/members"),
    ("POST", "/api/databases/{id}/members"),
    ("PATCH", "/api/databases/{id}/members/{user_id}"),
    ("DELETE", "/api/databases/{id}/members/{user_id}"),
];

/// The member action of `tail` (what follows `/api/databases/{id}/`), if
/// it is a member route; `Some(None)` for a member path with a method it
/// does not have (404 like any unknown route).
fn member_action<'a>(method: &Method, tail: &'a str) -> Option<Option<MemberAction<'a>>> {
    if tail == "members" {
        return Some(match *method {
            Method::GET => Some(MemberAction::List),
            Method::POST => Some(MemberAction::Add),
            _ => None,
        });
    }
    let user_id = tail.strip_prefix("members/")?;
    if user_id.is_empty() || user_id.contains('/') {
        return Some(None);
    }
    Some(match *method {
        Method::PATCH => Some(MemberAction::ChangeRole { user_id }),
        Method::DELETE => Some(MemberAction::Remove { user_id }),
        _ => None,
    })
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
        "openapi.json" if method == Method::GET => return Route::OpenApi,
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
    let Some(tag) = tag_of(kind, id) else {
        return Route::NotFound;
    };
    if kind == Kind::Database {
        if let Some(action) = tail.and_then(|t| member_action(method, t)) {
            return match action {
                Some(action) => Route::Members {
                    tag,
                    database_id: id,
                    action,
                },
                None => Route::NotFound,
            };
        }
    }
    Route::Tagged {
        tag,
        import: kind == Kind::Database && method == Method::POST && tail == Some("import"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn router_answered_routes() {
        assert_eq!(classify(&Method::GET, "/api/health"), Route::Health);
        assert_eq!(classify(&Method::POST, "/api/health"), Route::NotFound);
        assert_eq!(classify(&Method::GET, "/api/openapi.json"), Route::OpenApi);
        assert_eq!(
            classify(&Method::POST, "/api/openapi.json"),
            Route::NotFound
        );
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
    fn member_routes_are_answered_by_the_router() {
        let db = "db_Ab3dZ1234567";
        let members = format!("/api/databases/{db}/members");
        let one = format!("/api/databases/{db}/members/usr_abcdefghijkl");
        let expect = |action| Route::Members {
            tag: "Ab3dZ",
            database_id: db,
            action,
        };
        assert_eq!(classify(&Method::GET, &members), expect(MemberAction::List));
        assert_eq!(classify(&Method::POST, &members), expect(MemberAction::Add));
        let user_id = "usr_abcdefghijkl";
        assert_eq!(
            classify(&Method::PATCH, &one),
            expect(MemberAction::ChangeRole { user_id })
        );
        assert_eq!(
            classify(&Method::DELETE, &one),
            expect(MemberAction::Remove { user_id })
        );
        // The segment is passed on as sent; `members` checks it.
        assert_eq!(
            classify(&Method::DELETE, &format!("{members}/nobody")),
            expect(MemberAction::Remove { user_id: "nobody" })
        );
        // Other methods, empty or deeper segments: 404, never a shard.
        for (m, p) in [
            (Method::PUT, members.clone()),
            (Method::DELETE, members.clone()),
            (Method::PATCH, members.clone()),
            (Method::GET, one.clone()),
            (Method::POST, one.clone()),
            (Method::PUT, one.clone()),
            (Method::DELETE, format!("{members}/")),
            (Method::DELETE, format!("{one}/x")),
            (Method::GET, format!("{one}/x")),
        ] {
            assert_eq!(classify(&m, &p), Route::NotFound, "{m} {p}");
        }
        // A bad database id is 404; `members` of other kinds is a shard's path.
        assert_eq!(
            classify(&Method::GET, "/api/databases/db_bad/members"),
            Route::NotFound
        );
        assert_eq!(
            classify(&Method::GET, "/api/tables/tbl_Ab3dZ1234567/members"),
            Route::Tagged {
                tag: "Ab3dZ",
                import: false
            }
        );
        // `membersx` and friends are not member routes.
        assert_eq!(
            classify(&Method::GET, &format!("/api/databases/{db}/membersx")),
            Route::Tagged {
                tag: "Ab3dZ",
                import: false
            }
        );
    }

    #[test]
    fn member_routes_list_matches_classify() {
        for (method, path) in MEMBER_ROUTES {
            let method: Method = method.parse().unwrap();
            let path = path
                .replace("{id}", "db_Ab3dZ1234567")
                .replace("{user_id}", "usr_abcdefghijkl");
            assert!(
                matches!(classify(&method, &path), Route::Members { .. }),
                "{method} {path}"
            );
        }
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
