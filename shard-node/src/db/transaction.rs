//! The transaction runners: one named, timed operation in one transaction
//! on a session of a database's share, behind the placement fence
//! ([`Db::in_transaction`] and its kin); and, for a caller that holds its
//! session already (a background pass, a session used again after the
//! commit), one transaction on that session ([`transaction_on`],
//! [`fenced_transaction_on`]). Every one commits only when its work
//! succeeds; an error rolls everything back.

use std::future::Future;
use std::time::Instant;

use deadpool_postgres::{ClientWrapper, Transaction};

use crate::catalog::placements::{self, Need};
use crate::db::{Db, DbOp};
use crate::error::ApiResult;

impl Db {
    /// Runs `work` in one transaction on a session of `database_id`'s
    /// share ([`Db::client_for`]), timed as `op`: commits only when it
    /// succeeds; an error rolls everything back. The transaction takes the
    /// write fence first ([`placements::fence`], [`Need::Write`]): 421 and
    /// nothing written when this shard does not serve the database now.
    pub async fn in_transaction<T>(
        &self,
        database_id: &str,
        op: DbOp,
        work: impl AsyncFnOnce(&Transaction<'_>) -> ApiResult<T>,
    ) -> ApiResult<T> {
        self.fenced(database_id, op, Need::Write, work).await
    }

    /// [`Db::in_transaction`] for a structural change (views): the fence
    /// also refuses a database being moved (409, [`Need::Structure`]).
    pub async fn in_structural_transaction<T>(
        &self,
        database_id: &str,
        op: DbOp,
        work: impl AsyncFnOnce(&Transaction<'_>) -> ApiResult<T>,
    ) -> ApiResult<T> {
        self.fenced(database_id, op, Need::Structure, work).await
    }

    /// [`Db::in_transaction`] whose write fence is `fence`, the
    /// transaction's first statement in place of [`placements::fence`]: it
    /// must take that fence itself (as `placements::fence_write` does, with
    /// what the write reads under it); `work` gets its result.
    pub async fn in_transaction_fenced_by<P, T>(
        &self,
        database_id: &str,
        op: DbOp,
        fence: impl AsyncFnOnce(&Transaction<'_>) -> ApiResult<P>,
        work: impl AsyncFnOnce(&Transaction<'_>, P) -> ApiResult<T>,
    ) -> ApiResult<T> {
        self.measured(op, async {
            let mut client = self.client_for(database_id).await?;
            transaction_on(&mut client, async |tx| {
                let fenced = fence(tx).await?;
                work(tx, fenced).await
            })
            .await
        })
        .await
    }

    async fn fenced<T>(
        &self,
        database_id: &str,
        op: DbOp,
        need: Need,
        work: impl AsyncFnOnce(&Transaction<'_>) -> ApiResult<T>,
    ) -> ApiResult<T> {
        self.in_transaction_fenced_by(
            database_id,
            op,
            async |tx| placements::fence(tx, database_id, need).await,
            async |tx, ()| work(tx).await,
        )
        .await
    }

    /// Runs one named database operation, timing it (debug level).
    pub async fn measured<T, F>(&self, op: DbOp, work: F) -> ApiResult<T>
    where
        F: Future<Output = ApiResult<T>>,
    {
        let start = Instant::now();
        let result = work.await;
        crate::metrics::db_operation(op, result.is_ok(), start.elapsed());
        tracing::debug!(
            db_op = op.as_str(),
            elapsed_us = start.elapsed().as_micros() as u64,
            ok = result.is_ok(),
            "db operation"
        );
        result
    }
}

/// Runs `work` in one transaction on `client`, a session the caller holds:
/// commits only when it succeeds; an error rolls everything back (the
/// transaction is dropped unfinished). Not timed: the caller's
/// [`Db::measured`] is.
pub async fn transaction_on<T>(
    client: &mut ClientWrapper,
    work: impl AsyncFnOnce(&Transaction<'_>) -> ApiResult<T>,
) -> ApiResult<T> {
    let tx = client.transaction().await?;
    let out = work(&tx).await?;
    tx.commit().await?;
    Ok(out)
}

/// [`transaction_on`] whose first statement is the placement fence
/// ([`placements::fence`]) for `need`: 421 (or 409 for a structural change
/// of a database being moved) and nothing written when this shard may not
/// do it now.
pub async fn fenced_transaction_on<T>(
    client: &mut ClientWrapper,
    database_id: &str,
    need: Need,
    work: impl AsyncFnOnce(&Transaction<'_>) -> ApiResult<T>,
) -> ApiResult<T> {
    transaction_on(client, async |tx| {
        placements::fence(tx, database_id, need).await?;
        work(tx).await
    })
    .await
}
