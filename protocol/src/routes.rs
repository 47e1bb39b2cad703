//! The one table of the public API's routes: for each, its method and path
//! template, which tier answers it, which id in the path carries the routing
//! tag, whether the router streams its body unread (and the cap), and the
//! `route` label of its metrics (its template).
//!
//! The router classifies each request once from it (`router::routes`); the
//! shard node's axum table and `router/openapi.json` are tied to it by unit
//! tests (`shard-node/src/http/api.rs`, `router/src/answers/openapi.rs`). Adding a
//! route touches this table and its handler.
//!
//! Order matters where two templates can match one path: the one with the
//! literal segment comes first (`records/list` before `records/{rid}`), as
//! axum prefers it. Entries of one template are next to each other. The unit
//! tests below hold both.

use http::Method;

use crate::ids::{share_token_tag, tag_of, Kind};

/// The deepest template, in segments after `/api/`.
pub const MAX_SEGMENTS: usize = 5;
/// The index (after `/api/`) of the segment that carries the routing tag:
/// the id right after the collection, `/api/{collection}/{id}/...`.
pub const TAG_SEGMENT: usize = 1;

const MIB: u64 = 1024 * 1024;

/// A route of the public API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub method: Method,
    /// `/api/...`; a `{name}` segment matches any one non-empty segment.
    pub template: &'static str,
    pub tier: Tier,
    pub tag: Tag,
    pub body: Body,
}

/// Which tier answers a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// The router alone (with the control plane): no shard has the route.
    Router(Answer),
    /// The router, which asks the shard it picks through this same route.
    RouterAndShard(Answer),
    /// The shard holding the routing tag's database; the router gates the
    /// request and forwards it.
    Shard,
}

/// What the router answers on a route of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Health,
    /// The OpenAPI document.
    OpenApi,
    Whoami,
    ListDatabases,
    /// Allocates a database, creates it on the allocated shard, confirms it.
    CreateDatabase,
    ListMembers,
    AddMember,
    /// `{user_id}` is the last segment.
    ChangeMemberRole,
    /// `{user_id}` is the last segment.
    RemoveMember,
}

/// Which id in the path carries the routing tag (always the segment at
/// [`TAG_SEGMENT`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag {
    /// No tag: the router answers alone or picks the shard.
    None,
    /// An id of this kind, checked by the router's API-key gate.
    Id(Kind),
    /// A file link's attachment id. No API key: the signature in the query
    /// is the credential (the shard checks it).
    FileLink,
    /// A view's share-link token. No API key: the token is the credential
    /// (the shard checks it).
    ShareToken,
}

impl Tag {
    /// The routing tag inside `id` (the segment at [`TAG_SEGMENT`]), when
    /// it is well formed.
    pub fn of(self, id: &str) -> Option<&str> {
        match self {
            Tag::None => None,
            Tag::Id(kind) => tag_of(kind, id),
            Tag::FileLink => tag_of(Kind::Attachment, id),
            Tag::ShareToken => share_token_tag(id),
        }
    }
}

/// How the router passes a request body on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// Read whole (at most [`crate::MAX_BODY_BYTES`]) and signed by digest.
    Buffered,
    /// Streamed to the shard unread, signed with
    /// [`crate::principal::STREAMED_BODY`]; the shard caps what it reads.
    Streamed(Streamed),
}

/// The routes whose bodies are streamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Streamed {
    /// `POST /api/tables/{id}/attachments`
    Attachment,
    /// `POST /api/databases/{id}/import`
    Import,
}

impl Streamed {
    /// Most bytes of the request body: an upload's 100 MB file ("100 MB",
    /// read as MiB, as the shard does) plus 1 MB for the multipart framing
    /// and other parts; an import's 20 MB file plus the rest of the form.
    pub const fn cap(self) -> u64 {
        match self {
            Streamed::Attachment => 100 * MIB + MIB,
            Streamed::Import => 22 * MIB,
        }
    }
}

impl Route {
    /// The `route` label of its requests' metrics.
    pub fn metric_label(&self) -> &'static str {
        self.template
    }

    /// The streamed body of this route, if it has one.
    pub fn streamed(&self) -> Option<Streamed> {
        match self.body {
            Body::Streamed(s) => Some(s),
            Body::Buffered => None,
        }
    }

    /// The template's segments after `/api/`.
    pub fn segments(&self) -> impl Iterator<Item = &'static str> {
        self.template
            .strip_prefix("/api/")
            .unwrap_or(self.template)
            .split('/')
    }

    /// Whether `path` matches the template.
    pub fn matches(&self, path: &Segments<'_>) -> bool {
        let mut n = 0;
        for (i, t) in self.segments().enumerate() {
            let Some(p) = path.get(i) else {
                return false;
            };
            let param = t.starts_with('{');
            if (param && p.is_empty()) || (!param && t != p) {
                return false;
            }
            n = i + 1;
        }
        n == path.len()
    }
}

/// A request path split at `/` after `/api/`, without allocating: the first
/// [`MAX_SEGMENTS`] + 1 segments are kept (enough to tell that no template
/// matches a deeper path) and all are counted.
#[derive(Debug, Clone, Copy)]
pub struct Segments<'a> {
    kept: [&'a str; MAX_SEGMENTS + 1],
    len: usize,
}

impl<'a> Segments<'a> {
    /// `None` when `path` does not start with `/api/`.
    pub fn of(path: &'a str) -> Option<Self> {
        let rest = path.strip_prefix("/api/")?;
        let mut kept = [""; MAX_SEGMENTS + 1];
        let mut len = 0;
        for seg in rest.split('/') {
            if let Some(slot) = kept.get_mut(len) {
                *slot = seg;
            }
            len += 1;
        }
        Some(Self { kept, len })
    }

    /// The segment at `i`, if the path has it and it is among those kept.
    pub fn get(&self, i: usize) -> Option<&'a str> {
        if i < self.len {
            self.kept.get(i).copied()
        } else {
            None
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// What the table says about a path.
#[derive(Debug, Clone, Copy, Default)]
pub struct Found {
    /// The first template the path matches, whatever the method.
    pub template: Option<&'static str>,
    /// The entry of that template for the request's method.
    pub route: Option<&'static Route>,
}

/// Looks a request up: the first template its path matches, and that
/// template's entry for its method.
pub fn find(method: &Method, path: &Segments<'_>) -> Found {
    let mut found = Found::default();
    let mut skip: Option<&str> = None;
    for route in ROUTES {
        if let Some(t) = found.template {
            if route.template != t {
                break;
            }
        } else if skip == Some(route.template) {
            continue;
        } else if route.matches(path) {
            found.template = Some(route.template);
        } else {
            skip = Some(route.template);
            continue;
        }
        if route.method == *method {
            found.route = Some(route);
            break;
        }
    }
    found
}

/// The tag of the collection `collection` (`tables`, `files`, ...): the
/// tag of the table's entries under `/api/{collection}/{...}`.
pub fn collection_tag(collection: &str) -> Option<Tag> {
    ROUTES
        .iter()
        .find(|r| r.tag != Tag::None && r.segments().next() == Some(collection))
        .map(|r| r.tag)
}

const fn route(method: Method, template: &'static str, tier: Tier, tag: Tag) -> Route {
    Route {
        method,
        template,
        tier,
        tag,
        body: Body::Buffered,
    }
}

/// Forwarded to the shard owning the tag inside the `{id}` of kind `kind`.
const fn shard(method: Method, template: &'static str, kind: Kind) -> Route {
    route(method, template, Tier::Shard, Tag::Id(kind))
}

const fn streamed(method: Method, template: &'static str, kind: Kind, s: Streamed) -> Route {
    Route {
        method,
        template,
        tier: Tier::Shard,
        tag: Tag::Id(kind),
        body: Body::Streamed(s),
    }
}

const fn router(method: Method, template: &'static str, answer: Answer) -> Route {
    route(method, template, Tier::Router(answer), Tag::None)
}

const fn members(method: Method, template: &'static str, answer: Answer) -> Route {
    route(
        method,
        template,
        Tier::Router(answer),
        Tag::Id(Kind::Database),
    )
}

use Kind::{Comment, Database, Field, ShareLink, Table, View, Webhook};
const GET: Method = Method::GET;
const HEAD: Method = Method::HEAD;
const POST: Method = Method::POST;
const PUT: Method = Method::PUT;
const PATCH: Method = Method::PATCH;
const DELETE: Method = Method::DELETE;

/// Every route of the public API.
pub static ROUTES: &[Route] = &[
    router(GET, "/api/health", Answer::Health),
    router(GET, "/api/openapi.json", Answer::OpenApi),
    router(GET, "/api/meta/whoami", Answer::Whoami),
    router(GET, "/api/databases", Answer::ListDatabases),
    route(
        POST,
        "/api/databases",
        Tier::RouterAndShard(Answer::CreateDatabase),
        Tag::None,
    ),
    shard(PATCH, "/api/databases/{id}", Database),
    shard(DELETE, "/api/databases/{id}", Database),
    members(GET, "/api/databases/{id}/members", Answer::ListMembers),
    members(POST, "/api/databases/{id}/members", Answer::AddMember),
    members(
        PATCH,
        "/api/databases/{id}/members/{user_id}",
        Answer::ChangeMemberRole,
    ),
    members(
        DELETE,
        "/api/databases/{id}/members/{user_id}",
        Answer::RemoveMember,
    ),
    streamed(
        POST,
        "/api/databases/{id}/import",
        Database,
        Streamed::Import,
    ),
    shard(GET, "/api/databases/{id}/tables", Database),
    shard(POST, "/api/databases/{id}/tables", Database),
    shard(GET, "/api/databases/{id}/export", Database),
    shard(GET, "/api/databases/{id}/webhooks", Database),
    shard(POST, "/api/databases/{id}/webhooks", Database),
    shard(GET, "/api/tables/{id}", Table),
    shard(PATCH, "/api/tables/{id}", Table),
    shard(DELETE, "/api/tables/{id}", Table),
    shard(GET, "/api/tables/{id}/fields", Table),
    shard(POST, "/api/tables/{id}/fields", Table),
    shard(GET, "/api/tables/{id}/views", Table),
    shard(POST, "/api/tables/{id}/views", Table),
    shard(GET, "/api/tables/{id}/records", Table),
    shard(POST, "/api/tables/{id}/records", Table),
    shard(PATCH, "/api/tables/{id}/records", Table),
    shard(PUT, "/api/tables/{id}/records", Table),
    shard(DELETE, "/api/tables/{id}/records", Table),
    shard(POST, "/api/tables/{id}/records/list", Table),
    shard(GET, "/api/tables/{id}/records/{rid}", Table),
    shard(POST, "/api/tables/{id}/records/{rid}/press", Table),
    shard(GET, "/api/tables/{id}/records/{rid}/comments", Table),
    shard(POST, "/api/tables/{id}/records/{rid}/comments", Table),
    shard(GET, "/api/tables/{id}/trash", Table),
    shard(POST, "/api/tables/{id}/trash/restore", Table),
    shard(POST, "/api/tables/{id}/trash/purge", Table),
    streamed(
        POST,
        "/api/tables/{id}/attachments",
        Table,
        Streamed::Attachment,
    ),
    shard(PATCH, "/api/fields/{id}", Field),
    shard(DELETE, "/api/fields/{id}", Field),
    shard(PATCH, "/api/views/{id}", View),
    shard(DELETE, "/api/views/{id}", View),
    shard(GET, "/api/views/{id}/shares", View),
    shard(POST, "/api/views/{id}/shares", View),
    shard(PATCH, "/api/comments/{id}", Comment),
    shard(DELETE, "/api/comments/{id}", Comment),
    shard(DELETE, "/api/shares/{id}", ShareLink),
    shard(GET, "/api/webhooks/{id}", Webhook),
    shard(PATCH, "/api/webhooks/{id}", Webhook),
    shard(DELETE, "/api/webhooks/{id}", Webhook),
    shard(POST, "/api/webhooks/{id}/secret", Webhook),
    shard(POST, "/api/webhooks/{id}/test", Webhook),
    shard(GET, "/api/webhooks/{id}/deliveries", Webhook),
    shard(
        POST,
        "/api/webhooks/{id}/deliveries/{delivery_id}/replay",
        Webhook,
    ),
    route(
        GET,
        "/api/files/{attachment_id}/{variant}",
        Tier::Shard,
        Tag::FileLink,
    ),
    route(
        HEAD,
        "/api/files/{attachment_id}/{variant}",
        Tier::Shard,
        Tag::FileLink,
    ),
    route(
        GET,
        "/api/share/{token}/records",
        Tier::Shard,
        Tag::ShareToken,
    ),
];

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn sample(route: &Route) -> String {
        let segs: Vec<&str> = route
            .segments()
            .map(|s| if s.starts_with('{') { "x" } else { s })
            .collect();
        format!("/api/{}", segs.join("/"))
    }

    #[test]
    fn each_entry_is_found_by_its_own_method_and_template() {
        for r in ROUTES {
            let path = sample(r);
            let found = find(&r.method, &Segments::of(&path).unwrap());
            assert_eq!(found.template, Some(r.template), "{path}");
            assert_eq!(found.route, Some(r), "{} {path}", r.method);
        }
    }

    #[test]
    fn entries_are_unique_and_grouped_by_template() {
        let mut seen = HashSet::new();
        let mut templates = HashSet::new();
        let mut previous = "";
        for r in ROUTES {
            assert!(seen.insert((r.method.clone(), r.template)), "{r:?}");
            if r.template != previous {
                assert!(templates.insert(r.template), "{} is split", r.template);
                previous = r.template;
            }
            assert!(r.segments().count() <= MAX_SEGMENTS, "{}", r.template);
        }
    }

    #[test]
    fn tags_sit_in_the_tag_segment_and_agree_per_collection() {
        for r in ROUTES {
            let segs: Vec<&str> = r.segments().collect();
            if r.tag == Tag::None {
                assert!(segs.iter().all(|s| !s.starts_with('{')), "{r:?}");
                continue;
            }
            assert!(segs[TAG_SEGMENT].starts_with('{'), "{r:?}");
            assert_eq!(collection_tag(segs[0]), Some(r.tag), "{r:?}");
        }
    }

    #[test]
    fn only_the_upload_and_the_import_stream() {
        let streamed: Vec<_> = ROUTES
            .iter()
            .filter_map(|r| Some((r.streamed()?, r.method.as_str(), r.template)))
            .collect();
        assert_eq!(
            streamed,
            [
                (Streamed::Import, "POST", "/api/databases/{id}/import"),
                (Streamed::Attachment, "POST", "/api/tables/{id}/attachments"),
            ]
        );
        assert_eq!(Streamed::Attachment.cap(), 101 * 1024 * 1024);
        assert_eq!(Streamed::Import.cap(), 22 * 1024 * 1024);
    }

    #[test]
    fn paths_match_by_segment() {
        let find = |m: Method, p: &str| find(&m, &Segments::of(p).unwrap());
        let f = find(Method::GET, "/api/tables/tbl_x/records/list");
        assert_eq!(f.template, Some("/api/tables/{id}/records/list"));
        assert_eq!(f.route, None);
        let f = find(Method::PUT, "/api/tables/tbl_x");
        assert_eq!(f.template, Some("/api/tables/{id}"));
        assert_eq!(f.route, None);
        for p in [
            "/api/tables/tbl_x/records/",
            "/api/tables//records",
            "/api/tables/tbl_x/records/rec_x/y/z",
            "/api/webhooks/w/deliveries/d/replay/x/y/z",
            "/api/nothing",
        ] {
            assert_eq!(find(Method::GET, p).template, None, "{p}");
        }
        assert!(Segments::of("/other").is_none());
    }
}
