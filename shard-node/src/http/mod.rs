//! Router assembly: every route of the node, its middleware, the fallbacks.

pub mod body;
pub mod guard;
pub mod health;
pub mod metrics_page;
pub mod trace;

use axum::routing::{get, post, MethodRouter};
use axum::Router;

use crate::auth::principal::require_principal;
use crate::error::ApiError;
use crate::state::AppState;
use crate::webhooks::api as webhooks;
use crate::{
    attachments, comments, databases, fields, import, records, shares, tables, trash, views,
};

async fn not_found() -> ApiError {
    ApiError::NotFound
}

/// A streamed route (`cluster_protocol::principal::is_streamed_route`):
/// the router streams its body unread and `require_principal` hands it on
/// unread, so the node-wide body limit does not apply; the handler caps
/// what it reads itself.
fn streamed(route: MethodRouter<AppState>) -> MethodRouter<AppState> {
    route.layer(axum::extract::DefaultBodyLimit::disable())
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/internal/health", get(health::handler))
        .route("/metrics", get(metrics_page::handler))
        .route("/internal/databases/lookup", post(databases::list::handler))
        .route("/api/databases", post(databases::create::handler))
        .route(
            "/api/databases/{id}",
            axum::routing::patch(databases::update::handler).delete(databases::delete::handler),
        )
        .route(
            "/api/databases/{id}/import",
            streamed(post(import::api::handler)),
        )
        .route(
            "/api/databases/{id}/tables",
            get(tables::list::handler).post(tables::create::handler),
        )
        .route("/api/databases/{id}/export", get(crate::export::handler))
        .route(
            "/api/tables/{id}",
            get(tables::get::handler)
                .patch(tables::update::handler)
                .delete(tables::delete::handler),
        )
        .route(
            "/api/tables/{id}/views",
            get(views::list::handler).post(views::create::handler),
        )
        .route(
            "/api/views/{id}",
            axum::routing::patch(views::update::handler).delete(views::delete::handler),
        )
        .route(
            "/api/tables/{id}/records",
            get(records::list::get_handler)
                .post(records::create::handler)
                .patch(records::update::handler)
                .put(records::upsert::handler)
                .delete(records::delete::handler),
        )
        .route(
            "/api/tables/{id}/records/list",
            post(records::list::post_handler),
        )
        .route("/api/tables/{id}/records/{rid}", get(records::get::handler))
        .route(
            "/api/tables/{id}/records/{rid}/press",
            post(records::press::handler),
        )
        .route(
            "/api/tables/{id}/records/{rid}/comments",
            get(comments::list::handler).post(comments::create::handler),
        )
        .route(
            "/api/comments/{id}",
            axum::routing::patch(comments::update::handler).delete(comments::delete::handler),
        )
        .route(
            "/api/views/{id}/shares",
            get(shares::list::handler).post(shares::create::handler),
        )
        .route(
            "/api/shares/{id}",
            axum::routing::delete(shares::delete::handler),
        )
        .route("/api/share/{token}/records", get(shares::read::handler))
        .route("/api/tables/{id}/trash", get(trash::list::handler))
        .route(
            "/api/tables/{id}/trash/restore",
            post(trash::restore::handler),
        )
        .route("/api/tables/{id}/trash/purge", post(trash::purge::handler))
        .route(
            "/api/tables/{id}/attachments",
            post(attachments::upload::handler).layer(axum::extract::DefaultBodyLimit::max(
                (attachments::limits::MAX_FILE_BYTES + attachments::limits::UPLOAD_ENVELOPE_BYTES)
                    as usize,
            )),
        )
        .route(
            "/api/files/{attachment_id}/{variant}",
            get(attachments::files::handler),
        )
        .route(
            "/api/tables/{id}/fields",
            get(fields::list::handler).post(fields::create::handler),
        )
        .route(
            "/api/fields/{id}",
            axum::routing::patch(fields::update::handler).delete(fields::delete::handler),
        )
        .route(
            "/api/databases/{id}/webhooks",
            get(webhooks::list::handler).post(webhooks::create::handler),
        )
        .route(
            "/api/webhooks/{id}",
            get(webhooks::get::handler)
                .patch(webhooks::update::handler)
                .delete(webhooks::delete::handler),
        )
        .route("/api/webhooks/{id}/secret", post(webhooks::secret::handler))
        .route(
            "/api/webhooks/{id}/test",
            post(webhooks::send_test::handler),
        )
        .route(
            "/api/webhooks/{id}/deliveries",
            get(webhooks::deliveries::handler),
        )
        .route(
            "/api/webhooks/{id}/deliveries/{delivery_id}/replay",
            post(webhooks::replay::handler),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::max(
            crate::config::BODY_LIMIT_BYTES,
        ))
        .layer(axum::middleware::from_fn(guard::refuse_nul_in_address))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            require_principal,
        ))
        .layer(axum::middleware::from_fn(attachments::fetch_charge::scope))
        .layer(axum::middleware::from_fn(guard::envelope_rejections))
        .layer(axum::middleware::from_fn(crate::metrics::measure))
        .layer(axum::middleware::from_fn(trace::request_span))
        .with_state(state)
}
