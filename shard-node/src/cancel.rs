//! Abandoned requests. When a request's future is dropped before it
//! finishes (the router timed out or the client closed the connection), the
//! statement its PostgreSQL session is running would otherwise run on to its
//! time limit, and the session would go back to the pool still busy: the
//! next request given it would queue behind the abandoned statement.
//!
//! [`abandon_on_drop`] wraps each request's future (see `crate::run_until`).
//! While such a future is dropped unfinished, every [`PgConn`] dropped with
//! it leaves the pool, asks PostgreSQL to cancel whatever its session runs,
//! and is closed once the cancel request is delivered; the pool opens a
//! fresh session when one is needed. The session's place in its database's
//! share of the pool (`crate::fair_share`) comes back only then, so a
//! database's abandoned statements count against its share until they stop.
//! A finished request returns its sessions to the pool as before: the check
//! is one thread-local read.

use std::cell::Cell;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::task::{Context, Poll};

use deadpool_postgres::Object;
use tokio_postgres::NoTls;

use crate::fair_share::Shares;

thread_local! {
    /// How many unfinished request futures this thread is dropping now.
    static ABANDONING: Cell<u32> = const { Cell::new(0) };
}

fn abandoning() -> bool {
    ABANDONING.with(Cell::get) > 0
}

/// Counts one abandoned future for as long as it lives (panic-safe).
struct Abandoning;

impl Abandoning {
    fn enter() -> Self {
        ABANDONING.with(|a| a.set(a.get() + 1));
        Abandoning
    }
}

impl Drop for Abandoning {
    fn drop(&mut self) {
        ABANDONING.with(|a| a.set(a.get().saturating_sub(1)));
    }
}

/// A future whose unfinished drop cancels the statements of the sessions
/// it holds.
pub struct AbandonOnDrop<F> {
    inner: Option<Pin<Box<F>>>,
}

/// Wraps a request's future; see the module documentation.
pub fn abandon_on_drop<F: Future>(future: F) -> AbandonOnDrop<F> {
    AbandonOnDrop {
        inner: Some(Box::pin(future)),
    }
}

impl<F: Future> Future for AbandonOnDrop<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let Some(inner) = self.inner.as_mut() else {
            panic!("AbandonOnDrop polled after it finished");
        };
        let out = std::task::ready!(inner.as_mut().poll(cx));
        self.inner = None;
        Poll::Ready(out)
    }
}

impl<F> Drop for AbandonOnDrop<F> {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            let _abandoning = Abandoning::enter();
            drop(inner);
        }
    }
}

/// A pooled session checked out by one request (derefs to the pool's
/// [`Object`]), with its place in the database's share of the pool when
/// the request is on behalf of one database. See the module documentation
/// for what its drop does when the request was abandoned.
pub struct PgConn {
    // Dropped in this order: the session goes back to the pool before the
    // share is given back, so a request given the share finds it there.
    session: Option<Object>,
    share: Option<Shares>,
}

/// Prepared statements a pooled session keeps before its cache is emptied
/// at the next checkout: statement texts are fixed per table, schema
/// version and request shape (values are parameters), and each holds a
/// plan in its PostgreSQL backend, so the cache is bounded per session.
pub const STATEMENTS_PER_SESSION: usize = 256;

impl PgConn {
    pub(crate) fn new(session: Object, share: Option<Shares>) -> Self {
        if session.statement_cache.size() > STATEMENTS_PER_SESSION {
            session.statement_cache.clear();
        }
        Self {
            session: Some(session),
            share,
        }
    }
}

impl Deref for PgConn {
    type Target = Object;
    fn deref(&self) -> &Object {
        self.session
            .as_ref()
            .expect("a PgConn holds its session until dropped")
    }
}

impl DerefMut for PgConn {
    fn deref_mut(&mut self) -> &mut Object {
        self.session
            .as_mut()
            .expect("a PgConn holds its session until dropped")
    }
}

impl Drop for PgConn {
    fn drop(&mut self) {
        if !abandoning() {
            return;
        }
        let Some(object) = self.session.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        // Out of the pool first, so no other request is given this session
        // while its statement (and a dropped transaction's ROLLBACK) runs.
        let client = Object::take(object);
        let token = client.cancel_token();
        let share = self.share.take();
        runtime.spawn(async move {
            match token.cancel_query(NoTls).await {
                Ok(()) => tracing::debug!("abandoned request: statement cancelled"),
                Err(e) => tracing::warn!(error = %e, "abandoned request: cancel not delivered"),
            }
            drop(client);
            drop(share);
        });
    }
}
