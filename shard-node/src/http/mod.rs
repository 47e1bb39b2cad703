//! Router assembly: the node's internal routes, the public API's (`api`),
//! their middleware, the fallbacks.

pub mod api;
pub mod body;
pub mod guard;
pub mod health;
pub mod metrics_page;
pub mod trace;

use axum::routing::{get, post};
use axum::Router;

use crate::auth::principal::require_principal;
use crate::error::ApiError;
use crate::state::AppState;
use crate::{attachments, databases};

async fn not_found() -> ApiError {
    ApiError::NotFound
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/internal/health", get(health::handler))
        .route("/metrics", get(metrics_page::handler))
        .route("/internal/databases/lookup", post(databases::list::handler))
        .merge(api::routes().into_router())
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
