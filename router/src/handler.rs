//! One request, start to finish: route, gate, dispatch, rate-limit headers.

use std::net::IpAddr;
use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;
use tracing::Instrument;

use crate::errors::{ApiError, Body};
use crate::routes::{classify, Route};
use crate::state::AppState;
use crate::{auth, bearer, databases, health, proxy, trace, whoami};

/// The owned form of a route, so the request can be consumed afterwards.
enum Target {
    Whoami,
    ListDatabases,
    CreateDatabase,
    Tagged { tag: String, import: bool },
    NotFound,
}

pub async fn handle(state: Arc<AppState>, req: Request<Incoming>, peer: IpAddr) -> Response<Body> {
    let span = tracing::info_span!(
        "request",
        method = %req.method(),
        path = %req.uri().path(),
        status = tracing::field::Empty,
    );
    trace::adopt_parent(&span, req.headers());
    let inner = span.clone();
    async move {
        let resp = dispatch(&state, req, peer, &inner).await;
        inner.record("status", resp.status().as_u16());
        resp
    }
    .instrument(span)
    .await
}

async fn dispatch(
    state: &AppState,
    req: Request<Incoming>,
    peer: IpAddr,
    span: &tracing::Span,
) -> Response<Body> {
    let address = bearer::client_address(
        req.headers().get("x-forwarded-for").map(|v| v.as_bytes()),
        peer,
    );
    let target = match classify(req.method(), req.uri().path()) {
        Route::Health => {
            return match auth::shield(state, req.headers(), &address).await {
                Ok(()) => health::answer(state).await,
                Err(e) => e.into_response(),
            }
        }
        Route::Whoami => Target::Whoami,
        Route::ListDatabases => Target::ListDatabases,
        Route::CreateDatabase => Target::CreateDatabase,
        Route::Tagged { tag, import } => Target::Tagged {
            tag: tag.to_string(),
            import,
        },
        Route::NotFound => Target::NotFound,
    };
    let caller = match auth::gate(state, req.headers(), address).await {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    let result = if !caller.budget.allowed {
        Err(ApiError::RateLimited {
            retry_after_ms: caller.budget.retry_after_ms,
        })
    } else {
        match target {
            Target::Whoami => Ok(whoami::answer(&caller)),
            Target::ListDatabases => databases::list(state, &caller, req.headers(), span).await,
            Target::CreateDatabase => databases::create(state, &caller, req, span).await,
            Target::Tagged { tag, import } => {
                proxy::forward(state, &caller, &tag, import, req, span).await
            }
            Target::NotFound => Err(ApiError::NotFound),
        }
    };
    let mut resp = result.unwrap_or_else(ApiError::into_response);
    caller.stamp(&mut resp);
    resp
}
