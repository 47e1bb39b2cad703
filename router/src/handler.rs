//! One request, start to finish: route, gate, dispatch, rate-limit headers.

use std::net::IpAddr;

use http::{Request, Response};
use hyper::body::Incoming;
use tracing::Instrument;

use service_kit::metrics::METRICS_ROUTE;

use crate::errors::{ApiError, Body};
use crate::forward::X_FORWARDED_FOR;
use crate::metrics::{self, Measured};
use crate::routes::{classify, MemberAction, Route};
use crate::state::AppState;
use crate::trace::RequestSpan;
use crate::{auth, bearer, databases, files, health, members, openapi, proxy, share, whoami};

/// The owned form of a route, so the request can be consumed afterwards.
enum Target {
    Whoami,
    ListDatabases,
    CreateDatabase,
    Tagged {
        tag: String,
        import: bool,
    },
    Members {
        tag: String,
        database_id: String,
        action: OwnedMemberAction,
    },
    NotFound,
}

enum OwnedMemberAction {
    List,
    Add,
    ChangeRole(String),
    Remove(String),
}

impl OwnedMemberAction {
    fn of(action: MemberAction<'_>) -> Self {
        match action {
            MemberAction::List => Self::List,
            MemberAction::Add => Self::Add,
            MemberAction::ChangeRole { user_id } => Self::ChangeRole(user_id.to_string()),
            MemberAction::Remove { user_id } => Self::Remove(user_id.to_string()),
        }
    }
    fn borrowed(&self) -> MemberAction<'_> {
        match self {
            Self::List => MemberAction::List,
            Self::Add => MemberAction::Add,
            Self::ChangeRole(user_id) => MemberAction::ChangeRole { user_id },
            Self::Remove(user_id) => MemberAction::Remove { user_id },
        }
    }
}

pub async fn handle(state: &AppState, req: Request<Incoming>, peer: IpAddr) -> Response<Body> {
    let (method, path) = (req.method(), req.uri().path());
    if metrics::is_scrape(
        method,
        path,
        req.headers(),
        state.config.metrics_token.as_ref(),
    ) {
        let measured = Measured::start(method, METRICS_ROUTE);
        let resp = metrics::page(state.config.metrics.as_ref());
        measured.finish(resp.status());
        return resp;
    }
    let measured = Measured::start(method, metrics::route_template(method, path));
    let span = RequestSpan::new(req.method(), req.uri(), req.headers());
    let resp = match span.opened() {
        Some(opened) => {
            let opened = opened.clone();
            dispatch(state, req, peer, &span).instrument(opened).await
        }
        None => dispatch(state, req, peer, &span).await,
    };
    span.finish(resp.status());
    measured.finish(resp.status());
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
        Route::OpenApi => {
            return match auth::shield(state, req.headers(), &address).await {
                Ok(()) => openapi::answer(),
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
        Route::Members {
            tag,
            database_id,
            action,
        } => Target::Members {
            tag: tag.to_string(),
            database_id: database_id.to_string(),
            action: OwnedMemberAction::of(action),
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
            Target::Members {
                tag,
                database_id,
                action,
            } => {
                let action = action.borrowed();
                members::answer(state, &caller, &tag, &database_id, action, req, span).await
            }
            Target::NotFound => Err(ApiError::NotFound),
        }
    };
    let mut resp = result.unwrap_or_else(ApiError::into_response);
    caller.stamp(&mut resp);
    resp
}
