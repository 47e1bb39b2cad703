//! One request, start to finish: classify (once), gate, dispatch, rate-limit headers.

use std::net::IpAddr;

use http::{Request, Response};
use hyper::body::Incoming;
use tracing::Instrument;

use cluster_protocol::routes::Streamed;

use crate::account;
use crate::answers::{databases, files, health, members, openapi, share, whoami};
use crate::edge::metrics::Measured;
use crate::edge::routes::{classify, Classified, MemberAction, Route};
use crate::edge::trace::RequestSpan;
use crate::errors::{ApiError, Body};
use crate::forward::client::X_FORWARDED_FOR;
use crate::forward::proxy;
use crate::gate::{auth, bearer};
use crate::state::AppState;

/// The owned form of a route, so the request can be consumed afterwards.
enum Target {
    Health,
    OpenApi,
    File {
        tag: Option<String>,
    },
    Share {
        tag: Option<String>,
    },
    /// Behind the API-key gate.
    Gated(Gated),
}

/// A route behind the API-key gate.
enum Gated {
    Whoami,
    ListDatabases,
    CreateDatabase,
    Tagged {
        tag: String,
        streamed: Option<Streamed>,
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

impl Target {
    fn of(route: Route<'_>) -> Self {
        match route {
            Route::Health => Target::Health,
            Route::OpenApi => Target::OpenApi,
            Route::File { tag } => Target::File {
                tag: tag.map(str::to_string),
            },
            Route::Share { tag } => Target::Share {
                tag: tag.map(str::to_string),
            },
            Route::Whoami => Target::Gated(Gated::Whoami),
            Route::ListDatabases => Target::Gated(Gated::ListDatabases),
            Route::CreateDatabase => Target::Gated(Gated::CreateDatabase),
            Route::Tagged { tag, streamed } => Target::Gated(Gated::Tagged {
                tag: tag.to_string(),
                streamed,
            }),
            Route::Members {
                tag,
                database_id,
                action,
            } => Target::Gated(Gated::Members {
                tag: tag.to_string(),
                database_id: database_id.to_string(),
                action: OwnedMemberAction::of(action),
            }),
            Route::NotFound => Target::Gated(Gated::NotFound),
        }
    }
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
    if account::is_account_path(req.uri().path()) {
        return account_page(state, req, peer).await;
    }
    let (method, path) = (req.method(), req.uri().path());
    let Classified { route, label } = classify(method, path);
    let target = Target::of(route);
    let database = service_kit::metrics::database_id(label, path).map(str::to_owned);
    let measured = Measured::start(method, label).database(database.as_deref());
    let span = RequestSpan::new(req.method(), req.uri(), req.headers(), label);
    let resp = match span.opened() {
        Some(opened) => {
            let opened = opened.clone();
            dispatch(state, target, req, peer, &span)
                .instrument(opened)
                .await
        }
        None => dispatch(state, target, req, peer, &span).await,
    };
    span.finish(resp.status());
    // Inside the span, so the access-log line carries the trace id.
    match span.opened() {
        Some(opened) => opened.in_scope(|| measured.finish(resp.status())),
        None => measured.finish(resp.status()),
    }
    resp
}

/// A request under `/account` (the account pages), measured and traced
/// like any other.
async fn account_page(state: &AppState, req: Request<Incoming>, peer: IpAddr) -> Response<Body> {
    let measured = Measured::start(req.method(), account::METRIC_LABEL);
    let span = RequestSpan::new(
        req.method(),
        req.uri(),
        req.headers(),
        account::METRIC_LABEL,
    );
    let address = bearer::client_address(
        req.headers().get(X_FORWARDED_FOR).map(|v| v.as_bytes()),
        peer,
    );
    let resp = match span.opened() {
        Some(opened) => {
            let opened = opened.clone();
            account::serve(state, req, &address)
                .instrument(opened)
                .await
        }
        None => account::serve(state, req, &address).await,
    };
    span.finish(resp.status());
    measured.finish(resp.status());
    resp
}

async fn dispatch(
    state: &AppState,
    target: Target,
    req: Request<Incoming>,
    peer: IpAddr,
    span: &RequestSpan,
) -> Response<Body> {
    let address = bearer::client_address(
        req.headers().get(X_FORWARDED_FOR).map(|v| v.as_bytes()),
        peer,
    );
    let gated = match target {
        Target::Health => {
            return match auth::shield(state, req.headers(), &address).await {
                Ok(()) => health::answer(&state.health, &state.control).await,
                Err(e) => e.into_response(),
            }
        }
        Target::OpenApi => {
            return match auth::shield(state, req.headers(), &address).await {
                Ok(()) => openapi::answer(),
                Err(e) => e.into_response(),
            }
        }
        Target::File { tag } => {
            return files::serve(state, req, &address, tag.as_deref(), span).await;
        }
        Target::Share { tag } => {
            return share::serve(state, req, &address, tag.as_deref(), span).await;
        }
        Target::Gated(gated) => gated,
    };
    // The export route also accepts the session cookie, without a key
    // (and then answers without rate-limit headers).
    if let Gated::Tagged { tag, .. } = &gated {
        if account::export::is_export(req.method(), req.uri().path()) {
            if let Some(token) = account::export::session_cookie(state, req.headers()) {
                let token = token.to_owned();
                let tag = tag.clone();
                return account::export::forward(state, &token, &tag, req, &address, span)
                    .await
                    .unwrap_or_else(ApiError::into_response);
            }
        }
    }
    let caller = match auth::gate(state, req.headers(), address, span).await {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    let result = if !caller.budget.allowed {
        Err(ApiError::RateLimited {
            retry_after_ms: caller.budget.retry_after_ms,
        })
    } else {
        match gated {
            Gated::Whoami => Ok(whoami::answer(&caller)),
            Gated::ListDatabases => databases::list(state, &caller, req.headers(), span).await,
            Gated::CreateDatabase => databases::create(state, &caller, req, span).await,
            Gated::Tagged { tag, streamed } => {
                proxy::forward(state, &caller, &tag, streamed, req, span).await
            }
            Gated::Members {
                tag,
                database_id,
                action,
            } => {
                let action = action.borrowed();
                members::answer(state, &caller, &tag, &database_id, action, req, span).await
            }
            Gated::NotFound => Err(ApiError::NotFound),
        }
    };
    let mut resp = result.unwrap_or_else(ApiError::into_response);
    caller.stamp(&mut resp);
    resp
}
