//! One `server` span per request, parented on the router's W3C
//! `traceparent` (`service_kit::trace::server`), its path as logs may show
//! it (a share token cut).

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;

pub async fn request_span(request: Request, next: Next) -> Response {
    service_kit::trace::server(request, next, cluster_protocol::ids::loggable_path).await
}
