//! Classifies a request once, from the route table
//! (`cluster_protocol::routes`): what the router does with it, and the
//! `route` label of its metrics.
//!
//! A request the table names is answered as its entry says. Beyond the
//! table, as before it: any other path under a tagged collection
//! (`/api/tables/{id}/...`, any method) goes to the shard owning the tag,
//! which answers 404 itself, except under a path the router answers
//! (`/api/databases/{id}/members...`: 404, never a shard); a malformed file
//! link (`GET`/`HEAD /api/files/...`) or share link
//! (`GET /api/share/{token}/records`) gets the link's 404 without a key.
//! The label is the matching template, whatever the method, for a
//! forwarded request; [`UNKNOWN_ROUTE`] for anything the table does not
//! name, so ids never become label values.

use cluster_protocol::routes::{
    self as table, Answer, Segments, Streamed, Tag, Tier, ROUTES, TAG_SEGMENT,
};
use http::Method;
use service_kit::metrics::UNKNOWN_ROUTE;

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
        /// The streamed body of the route (an upload, an import), if any.
        streamed: Option<Streamed>,
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

/// A request's route and the `route` label of its metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified<'a> {
    pub route: Route<'a>,
    pub label: &'static str,
}

/// The variants a file link may name.
pub const FILE_VARIANTS: [&str; 3] = ["original", "thumb-256", "card-1024"];

/// Classifies a request by method and path (no query string).
pub fn classify<'a>(method: &Method, path: &'a str) -> Classified<'a> {
    let Some(segs) = Segments::of(path) else {
        return unknown(Route::NotFound);
    };
    let found = table::find(method, &segs);
    if let Some(entry) = found.route {
        if let Some(route) = answer(entry, &segs) {
            return Classified {
                route,
                label: entry.metric_label(),
            };
        }
    }
    match beyond_the_table(method, &segs) {
        route @ Route::Tagged { .. } => Classified {
            route,
            label: found.template.unwrap_or(UNKNOWN_ROUTE),
        },
        route => unknown(route),
    }
}

fn unknown(route: Route<'_>) -> Classified<'_> {
    Classified {
        route,
        label: UNKNOWN_ROUTE,
    }
}

/// The route of a request matching `entry`; `None` when its id (or a file
/// link's variant) is malformed.
fn answer<'a>(entry: &table::Route, segs: &Segments<'a>) -> Option<Route<'a>> {
    let (Tier::Router(answer) | Tier::RouterAndShard(answer)) = entry.tier else {
        let tag = entry.tag.of(segs.get(TAG_SEGMENT)?)?;
        return match entry.tag {
            Tag::Id(_) => Some(Route::Tagged {
                tag,
                streamed: entry.streamed(),
            }),
            Tag::FileLink => FILE_VARIANTS
                .contains(&segs.get(TAG_SEGMENT + 1)?)
                .then_some(Route::File { tag: Some(tag) }),
            Tag::ShareToken => Some(Route::Share { tag: Some(tag) }),
            Tag::None => None,
        };
    };
    let action = match answer {
        Answer::Health => return Some(Route::Health),
        Answer::OpenApi => return Some(Route::OpenApi),
        Answer::Whoami => return Some(Route::Whoami),
        Answer::ListDatabases => return Some(Route::ListDatabases),
        Answer::CreateDatabase => return Some(Route::CreateDatabase),
        Answer::ListMembers => MemberAction::List,
        Answer::AddMember => MemberAction::Add,
        Answer::ChangeMemberRole => MemberAction::ChangeRole {
            user_id: segs.get(segs.len() - 1)?,
        },
        Answer::RemoveMember => MemberAction::Remove {
            user_id: segs.get(segs.len() - 1)?,
        },
    };
    let database_id = segs.get(TAG_SEGMENT)?;
    Some(Route::Members {
        tag: entry.tag.of(database_id)?,
        database_id,
        action,
    })
}

/// A request no entry answers: by the tag of its collection.
fn beyond_the_table<'a>(method: &Method, segs: &Segments<'a>) -> Route<'a> {
    let (Some(collection), Some(id)) = (segs.get(0), segs.get(TAG_SEGMENT)) else {
        return Route::NotFound;
    };
    match table::collection_tag(collection) {
        Some(kind @ Tag::Id(_)) => match kind.of(id) {
            Some(tag) if !answered_by_the_router(segs) => Route::Tagged {
                tag,
                streamed: None,
            },
            _ => Route::NotFound,
        },
        Some(Tag::FileLink) if has_entry(Tag::FileLink, method) => Route::File { tag: None },
        Some(Tag::ShareToken)
            if has_entry(Tag::ShareToken, method)
                && segs.len() == 3
                && segs.get(2) == Some("records") =>
        {
            Route::Share { tag: None }
        }
        _ => Route::NotFound,
    }
}

fn has_entry(tag: Tag, method: &Method) -> bool {
    ROUTES.iter().any(|r| r.tag == tag && r.method == *method)
}

/// Whether the path lies under a tagged route the router answers, up to
/// that route's last literal segment (`/api/databases/{id}/members`).
fn answered_by_the_router(segs: &Segments<'_>) -> bool {
    ROUTES
        .iter()
        .filter(|r| matches!(r.tier, Tier::Router(_)) && r.tag != Tag::None)
        .any(|r| {
            let literal_end = r
                .segments()
                .enumerate()
                .filter(|(_, s)| !s.starts_with('{'))
                .map(|(i, _)| i + 1)
                .last()
                .unwrap_or(0);
            r.segments()
                .take(literal_end)
                .enumerate()
                .all(|(i, t)| match segs.get(i) {
                    Some(p) if t.starts_with('{') => !p.is_empty(),
                    Some(p) => p == t,
                    None => false,
                })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route_of<'a>(method: &Method, path: &'a str) -> Route<'a> {
        classify(method, path).route
    }

    #[test]
    fn router_answered_routes() {
        assert_eq!(route_of(&Method::GET, "/api/health"), Route::Health);
        assert_eq!(route_of(&Method::POST, "/api/health"), Route::NotFound);
        assert_eq!(route_of(&Method::GET, "/api/openapi.json"), Route::OpenApi);
        assert_eq!(
            route_of(&Method::POST, "/api/openapi.json"),
            Route::NotFound
        );
        assert_eq!(route_of(&Method::GET, "/api/meta/whoami"), Route::Whoami);
        assert_eq!(
            route_of(&Method::GET, "/api/databases"),
            Route::ListDatabases
        );
        assert_eq!(
            route_of(&Method::POST, "/api/databases"),
            Route::CreateDatabase
        );
        assert_eq!(route_of(&Method::DELETE, "/api/databases"), Route::NotFound);
    }

    #[test]
    fn tagged_routes_carry_the_tag() {
        let t = |p| route_of(&Method::GET, p);
        assert_eq!(
            t("/api/databases/db_Ab3dZ1234567"),
            Route::Tagged {
                tag: "Ab3dZ",
                streamed: None
            }
        );
        assert_eq!(
            t("/api/databases/db_Ab3dZ1234567/tables"),
            Route::Tagged {
                tag: "Ab3dZ",
                streamed: None
            }
        );
        assert_eq!(
            t("/api/tables/tbl_XYZ12abcdefg/records/rec_1"),
            Route::Tagged {
                tag: "XYZ12",
                streamed: None
            }
        );
        assert_eq!(
            t("/api/fields/fld_00000abcdefg"),
            Route::Tagged {
                tag: "00000",
                streamed: None
            }
        );
        assert_eq!(
            t("/api/views/viw_zzzzzabcdefg"),
            Route::Tagged {
                tag: "zzzzz",
                streamed: None
            }
        );
        assert_eq!(
            t("/api/webhooks/whk_aaaaa1234567/deliveries"),
            Route::Tagged {
                tag: "aaaaa",
                streamed: None
            }
        );
        // The webhook's tag routes; a `dlv_` id further down rides along.
        assert_eq!(
            route_of(
                &Method::POST,
                "/api/webhooks/whk_aaaaa1234567/deliveries/dlv_aaaaa7654321/replay"
            ),
            Route::Tagged {
                tag: "aaaaa",
                streamed: None
            }
        );
        assert_eq!(
            route_of(&Method::POST, "/api/webhooks/whk_aaaaa1234567/test"),
            Route::Tagged {
                tag: "aaaaa",
                streamed: None
            }
        );
    }

    #[test]
    fn import_is_flagged_only_for_post() {
        let p = "/api/databases/db_Ab3dZ1234567/import";
        assert_eq!(
            route_of(&Method::POST, p),
            Route::Tagged {
                tag: "Ab3dZ",
                streamed: Some(Streamed::Import)
            }
        );
        assert_eq!(
            route_of(&Method::GET, p),
            Route::Tagged {
                tag: "Ab3dZ",
                streamed: None
            }
        );
    }

    #[test]
    fn malformed_ids_and_unknown_paths_are_not_found() {
        let t = |p| route_of(&Method::GET, p);
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
        assert_eq!(route_of(&Method::GET, &members), expect(MemberAction::List));
        assert_eq!(route_of(&Method::POST, &members), expect(MemberAction::Add));
        let user_id = "usr_abcdefghijkl";
        assert_eq!(
            route_of(&Method::PATCH, &one),
            expect(MemberAction::ChangeRole { user_id })
        );
        assert_eq!(
            route_of(&Method::DELETE, &one),
            expect(MemberAction::Remove { user_id })
        );
        // The segment is passed on as sent; `members` checks it.
        assert_eq!(
            route_of(&Method::DELETE, &format!("{members}/nobody")),
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
            assert_eq!(route_of(&m, &p), Route::NotFound, "{m} {p}");
        }
        // A bad database id is 404; `members` of other kinds is a shard's path.
        assert_eq!(
            route_of(&Method::GET, "/api/databases/db_bad/members"),
            Route::NotFound
        );
        assert_eq!(
            route_of(&Method::GET, "/api/tables/tbl_Ab3dZ1234567/members"),
            Route::Tagged {
                tag: "Ab3dZ",
                streamed: None
            }
        );
        // `membersx` and friends are not member routes.
        assert_eq!(
            route_of(&Method::GET, &format!("/api/databases/{db}/membersx")),
            Route::Tagged {
                tag: "Ab3dZ",
                streamed: None
            }
        );
    }

    #[test]
    fn comments_and_shares_route_by_their_ids_tag() {
        let t = |m: Method, p| route_of(&m, p);
        let tagged = |tag| Route::Tagged {
            tag,
            streamed: None,
        };
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
            route_of(&Method::GET, &path),
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
                route_of(&Method::GET, &bad),
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
            assert_eq!(route_of(&Method::GET, &other), Route::NotFound, "{other}");
        }
        for m in [Method::POST, Method::DELETE, Method::PATCH] {
            assert_eq!(route_of(&m, &path), Route::NotFound);
        }
    }

    #[test]
    fn file_links_carry_the_attachment_tag_or_nothing() {
        let path = "/api/files/att_Ab3dZ1234567/thumb-256";
        for m in [Method::GET, Method::HEAD] {
            assert_eq!(route_of(&m, path), Route::File { tag: Some("Ab3dZ") });
        }
        for variant in FILE_VARIANTS {
            let p = format!("/api/files/att_Ab3dZ1234567/{variant}");
            assert_eq!(
                route_of(&Method::GET, &p),
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
                route_of(&Method::GET, bad),
                Route::File { tag: None },
                "{bad}"
            );
        }
        assert_eq!(route_of(&Method::POST, path), Route::NotFound);
        assert_eq!(route_of(&Method::DELETE, path), Route::NotFound);
    }

    #[test]
    fn ids_become_template_segments() {
        let t = |m: Method, p: &str| classify(&m, p).label;
        assert_eq!(
            t(Method::GET, "/api/tables/tbl_Ab3dZ1234567/records"),
            "/api/tables/{id}/records"
        );
        assert_eq!(
            t(
                Method::GET,
                "/api/tables/tbl_Ab3dZ1234567/records/rec_Ab3dZ7654321"
            ),
            "/api/tables/{id}/records/{rid}"
        );
        assert_eq!(
            t(
                Method::POST,
                "/api/webhooks/whk_aaaaa1234567/deliveries/dlv_aaaaa7654321/replay"
            ),
            "/api/webhooks/{id}/deliveries/{delivery_id}/replay"
        );
        assert_eq!(
            t(Method::GET, "/api/files/att_Ab3dZ1234567/thumb-256"),
            "/api/files/{attachment_id}/{variant}"
        );
        assert_eq!(t(Method::POST, "/api/databases"), "/api/databases");
        assert_eq!(t(Method::GET, "/api/health"), "/api/health");
    }

    /// Every path of `router/openapi.json` gets its own template as label,
    /// so a route added there without a template here fails.
    #[test]
    fn every_documented_path_is_its_own_label() {
        let doc: serde_json::Value =
            serde_json::from_str(crate::answers::openapi::DOCUMENT).unwrap();
        let paths = doc["paths"].as_object().unwrap();
        for (template, ops) in paths {
            // A sample path: each `{...}` segment becomes a tagged id.
            let sample = template
                .split('/')
                .enumerate()
                .map(|(i, seg)| match (seg.starts_with('{'), seg) {
                    (false, _) => seg.to_string(),
                    (true, "{variant}") => "thumb-256".into(),
                    (true, "{token}") => cluster_protocol::ids::new_share_token("Ab3dZ"),
                    (true, _) => {
                        let kind = template.split('/').nth(i - 1).unwrap_or("");
                        let prefix = match kind {
                            "databases" => "db_",
                            "tables" => "tbl_",
                            "fields" => "fld_",
                            "views" => "viw_",
                            "webhooks" => "whk_",
                            "records" => "rec_",
                            "deliveries" => "dlv_",
                            "files" => "att_",
                            "members" => "usr_",
                            "comments" => "cmt_",
                            "shares" => "shl_",
                            other => panic!("no id kind for {other} in {template}"),
                        };
                        format!("{prefix}Ab3dZ1234567")
                    }
                })
                .collect::<Vec<_>>()
                .join("/");
            for method in ops.as_object().unwrap().keys() {
                let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
                let label = classify(&m, &sample).label;
                assert_eq!(label, template, "{method} {sample}");
            }
        }
    }

    #[test]
    fn anything_else_is_one_fixed_label() {
        let t = |p: &str| classify(&Method::GET, p).label;
        for path in [
            "/api/tables/tbl_Ab3dZ1234567/whatever",
            "/api/tables/tbl_Ab3dZ1234567/records/rec_x/y/z",
            "/api/tables/tbl_Ab3dZ1234567/records/",
            "/api/nothing/here",
            "/metrics",
            "/api/files/att_short/original",
            "/wp-admin/login.php",
        ] {
            assert_eq!(t(path), UNKNOWN_ROUTE, "{path}");
        }
    }
}
