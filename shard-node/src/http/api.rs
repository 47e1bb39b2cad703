//! The public API's routes on a shard: each registered by method and
//! template, and listed as it is, so a unit test can hold the list to the
//! route table (`cluster_protocol::routes`): a route added or removed here
//! without the table, or there without a handler here, fails it.
//!
//! axum answers `HEAD` with the `GET` handler of the same template (the
//! table's `HEAD /api/files/...`).

use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{self, MethodRouter};
use axum::Router;

use crate::state::AppState;
use crate::webhooks::api as webhooks;
use crate::{
    attachments, comments, databases, export, fields, import, records, shares, tables, trash, views,
};

/// A router being built, with what it serves so far.
pub struct Api {
    router: Router<AppState>,
    served: Vec<(Method, &'static str)>,
}

impl Api {
    fn new() -> Self {
        Self {
            router: Router::new(),
            served: Vec::new(),
        }
    }

    /// Serves `method` on `template` with `route` (a method router for that
    /// one method, with its own layers).
    fn route(
        mut self,
        method: Method,
        template: &'static str,
        route: MethodRouter<AppState>,
    ) -> Self {
        self.served.push((method, template));
        self.router = self.router.route(template, route);
        self
    }

    fn get<H: Handler<T, AppState>, T: 'static>(self, template: &'static str, h: H) -> Self {
        self.route(Method::GET, template, routing::get(h))
    }

    fn post<H: Handler<T, AppState>, T: 'static>(self, template: &'static str, h: H) -> Self {
        self.route(Method::POST, template, routing::post(h))
    }

    fn put<H: Handler<T, AppState>, T: 'static>(self, template: &'static str, h: H) -> Self {
        self.route(Method::PUT, template, routing::put(h))
    }

    fn patch<H: Handler<T, AppState>, T: 'static>(self, template: &'static str, h: H) -> Self {
        self.route(Method::PATCH, template, routing::patch(h))
    }

    fn delete<H: Handler<T, AppState>, T: 'static>(self, template: &'static str, h: H) -> Self {
        self.route(Method::DELETE, template, routing::delete(h))
    }

    pub fn into_router(self) -> Router<AppState> {
        self.router
    }
}

/// A streamed route (`Body::Streamed` in the route table): the router
/// streams its body unread and `require_principal` hands it on unread, so
/// the node-wide body limit does not apply; the handler caps what it reads
/// itself.
fn streamed(route: MethodRouter<AppState>) -> MethodRouter<AppState> {
    route.layer(axum::extract::DefaultBodyLimit::disable())
}

/// Every public route the shard serves.
pub fn routes() -> Api {
    let upload_limit =
        (attachments::limits::MAX_FILE_BYTES + attachments::limits::UPLOAD_ENVELOPE_BYTES) as usize;
    Api::new()
        .post("/api/databases", databases::create::handler)
        .patch("/api/databases/{id}", databases::update::handler)
        .delete("/api/databases/{id}", databases::delete::handler)
        .route(
            Method::POST,
            "/api/databases/{id}/import",
            streamed(routing::post(import::api::handler)),
        )
        .get("/api/databases/{id}/tables", tables::list::handler)
        .post("/api/databases/{id}/tables", tables::create::handler)
        .get("/api/databases/{id}/export", export::handler)
        .get("/api/tables/{id}", tables::get::handler)
        .patch("/api/tables/{id}", tables::update::handler)
        .delete("/api/tables/{id}", tables::delete::handler)
        .get("/api/tables/{id}/views", views::list::handler)
        .post("/api/tables/{id}/views", views::create::handler)
        .patch("/api/views/{id}", views::update::handler)
        .delete("/api/views/{id}", views::delete::handler)
        .get("/api/tables/{id}/records", records::list::get_handler)
        .post("/api/tables/{id}/records", records::create::handler)
        .patch("/api/tables/{id}/records", records::update::handler)
        .put("/api/tables/{id}/records", records::upsert::handler)
        .delete("/api/tables/{id}/records", records::delete::handler)
        .post("/api/tables/{id}/records/list", records::list::post_handler)
        .get("/api/tables/{id}/records/{rid}", records::get::handler)
        .post(
            "/api/tables/{id}/records/{rid}/press",
            records::press::handler,
        )
        .get(
            "/api/tables/{id}/records/{rid}/comments",
            comments::list::handler,
        )
        .post(
            "/api/tables/{id}/records/{rid}/comments",
            comments::create::handler,
        )
        .patch("/api/comments/{id}", comments::update::handler)
        .delete("/api/comments/{id}", comments::delete::handler)
        .get("/api/views/{id}/shares", shares::list::handler)
        .post("/api/views/{id}/shares", shares::create::handler)
        .delete("/api/shares/{id}", shares::delete::handler)
        .get("/api/share/{token}/records", shares::read::handler)
        .get("/api/tables/{id}/trash", trash::list::handler)
        .post("/api/tables/{id}/trash/restore", trash::restore::handler)
        .post("/api/tables/{id}/trash/purge", trash::purge::handler)
        .route(
            Method::POST,
            "/api/tables/{id}/attachments",
            routing::post(attachments::upload::handler)
                .layer(axum::extract::DefaultBodyLimit::max(upload_limit)),
        )
        .get(
            "/api/files/{attachment_id}/{variant}",
            attachments::files::handler,
        )
        .get("/api/tables/{id}/fields", fields::list::handler)
        .post("/api/tables/{id}/fields", fields::create::handler)
        .patch("/api/fields/{id}", fields::update::handler)
        .delete("/api/fields/{id}", fields::delete::handler)
        .get("/api/databases/{id}/webhooks", webhooks::list::handler)
        .post("/api/databases/{id}/webhooks", webhooks::create::handler)
        .get("/api/webhooks/{id}", webhooks::get::handler)
        .patch("/api/webhooks/{id}", webhooks::update::handler)
        .delete("/api/webhooks/{id}", webhooks::delete::handler)
        .post("/api/webhooks/{id}/secret", webhooks::secret::handler)
        .post("/api/webhooks/{id}/test", webhooks::send_test::handler)
        .get(
            "/api/webhooks/{id}/deliveries",
            webhooks::deliveries::handler,
        )
        .post(
            "/api/webhooks/{id}/deliveries/{delivery_id}/replay",
            webhooks::replay::handler,
        )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use cluster_protocol::routes::{Tier, ROUTES};

    use super::*;

    /// The shard serves exactly the table's routes a shard answers (those
    /// of `Tier::Shard`, and the router's creations through a shard), by
    /// method and template; `HEAD` comes with `GET`.
    #[test]
    fn the_shard_serves_the_route_tables_shard_routes() {
        let served: BTreeSet<(String, &str)> = routes()
            .served
            .iter()
            .map(|(m, t)| (m.to_string(), *t))
            .collect();
        assert_eq!(served.len(), routes().served.len(), "a route twice");
        let table: BTreeSet<(String, &str)> = ROUTES
            .iter()
            .filter(|r| matches!(r.tier, Tier::Shard | Tier::RouterAndShard(_)))
            .filter(|r| {
                let get_too = ROUTES
                    .iter()
                    .any(|g| g.method == Method::GET && g.template == r.template);
                !(r.method == Method::HEAD && get_too)
            })
            .map(|r| (r.method.to_string(), r.template))
            .collect();
        let missing: Vec<_> = table.difference(&served).collect();
        assert!(missing.is_empty(), "in the table, not served: {missing:?}");
        let extra: Vec<_> = served.difference(&table).collect();
        assert!(extra.is_empty(), "served, not in the table: {extra:?}");
    }
}
