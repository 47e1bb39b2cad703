//! One request, start to finish: route, gate, dispatch, rate-limit headers.

use std::net::IpAddr;

use http::{Request, Response};
use hyper::body::Incoming;
use tracing::Instrument;

use crate::errors::{ApiError, Body};
use crate::forward::X_FORWARDED_FOR;
use crate::routes::{classify, Route};
use crate::state::AppState;
use crate::trace::RequestSpan;
use crate::{auth, bearer, databases, files, health, proxy, share, whoami};

/// The owned form of a route, so the request can be consumed afterwards.
enum Target {
    Whoami,
    ListDatabases,
    CreateDatabase,
    Tagged { tag: String, import: bool },
    NotFound,
}

pub async fn handle(state: &AppState, req: Request<Incoming>, peer: IpAddr) -> Response<Body> {
    let span = RequestSpan::new(req.method(), req.uri(), req.headers());
    let resp = match span.opened() {
        Some(opened) => {
            let opened = opened.clone();
            dispatch(state, req, peer, &span).instrument(opened).await
        }
        None => dispatch(state, req, peer, &span).await,
    };
    span.finish(resp.status());
    resp
}

async fn dispatch(
    state: &AppState,
    req: Request<Incoming>,
    peer: IpAddr,
    span: &RequestSpan,
) -> Response<Body> {
    let address = bearer::client_address(
        req.headers().get(X_FORWARDED_FOR).map(|v| v.as_bytes()),
        peer,
    );
    let target = match classify(req.method(), req.uri().path()) {
        Route::Health => {
            return match auth::shield(state, req.headers(), &address).await {
                Ok(()) => health::answer(state).await,
                Err(e) => e.into_response(),
            }
        }
        Route::File { tag } => {
            let tag = tag.map(str::to_string);
            return files::serve(state, req, &address, tag.as_deref(), span).await;
        }
        Route::Share { tag } => {
            let tag = tag.map(str::to_string);
            return share::serve(state, req, &address, tag.as_deref(), span).await;
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
    let caller = match auth::gate(state, req.headers(), address, span).await {
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
