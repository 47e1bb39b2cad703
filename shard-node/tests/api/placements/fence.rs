//! The write fence at the catalog level: what a transaction behind it may
//! do, and how it meets the control plane's fence (`SELECT ... FOR UPDATE`
//! on the placement, then `state = 'fenced'`) on two sessions.

use shard_node::catalog::databases;
use shard_node::catalog::placements::{self, Need};
use shard_node::db::DbOp;
use shard_node::error::ApiError;
use tokio_postgres::error::SqlState;

use super::*;

/// The control plane's first step, on the test's own session: `FOR UPDATE`
/// on the placement under a short `lock_timeout`, in a transaction left
/// open when the lock is granted (rolled back when it is not).
async fn control_plane_lock(app: &TestApp, database_id: &str) -> Result<(), tokio_postgres::Error> {
    app.pg.batch_execute("BEGIN").await?;
    app.pg
        .batch_execute("SET LOCAL lock_timeout = '200ms'")
        .await?;
    let locked = app
        .pg
        .query_opt(
            "SELECT state FROM placements WHERE database_id = $1 FOR UPDATE",
            &[&database_id],
        )
        .await;
    if locked.is_err() {
        app.pg.batch_execute("ROLLBACK").await?;
    }
    locked.map(|_| ())
}

#[tokio::test]
async fn the_control_plane_s_fence_waits_for_a_writer_in_flight() {
    let app = spawn_app().await;
    let (db, _) = app.owned_database().await;

    // A writer in flight: its transaction passed the fence and is open.
    let mut writer = app.db.client_for(&db).await.unwrap();
    let tx = writer.transaction().await.unwrap();
    placements::fence(&tx, &db, Need::Write).await.unwrap();

    // The control plane cannot lock the placement meanwhile.
    let err = control_plane_lock(&app, &db).await.unwrap_err();
    assert_eq!(err.code(), Some(&SqlState::LOCK_NOT_AVAILABLE), "{err}");

    // Once the writer commits, it can, and fences the database.
    tx.commit().await.unwrap();
    drop(writer);
    control_plane_lock(&app, &db).await.unwrap();
    app.pg
        .execute(
            "UPDATE placements SET state = 'fenced' WHERE database_id = $1",
            &[&db],
        )
        .await
        .unwrap();

    // A writer arriving now waits for the fence's commit, then reads the
    // new state: nothing may be written.
    let late = {
        let (pool, db) = (app.db.clone(), db.clone());
        tokio::spawn(async move {
            pool.in_transaction(&db, DbOp::RenameDatabase, async |tx| {
                databases::set_name(tx, &db, "Late", "usr_AAAAAAAAAAAA").await?;
                Ok(())
            })
            .await
        })
    };
    waits_for_this_session(&app).await;
    app.pg.batch_execute("COMMIT").await.unwrap();
    let late = late.await.unwrap();
    assert!(matches!(late, Err(ApiError::Misplaced)), "{late:?}");
    assert_eq!(name_of(&app, &db).await, "Test");
}

/// Returns once another session waits for a lock the test's own session
/// holds (at most 30 s).
async fn waits_for_this_session(app: &TestApp) {
    for _ in 0..600 {
        let blocked: i64 = app
            .pg
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE pg_backend_pid() = ANY (pg_blocking_pids(pid))",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if blocked > 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no session ever waited for the fence");
}

async fn name_of(app: &TestApp, database_id: &str) -> String {
    app.pg
        .query_one("SELECT name FROM databases WHERE id = $1", &[&database_id])
        .await
        .unwrap()
        .get(0)
}

/// Runs a rename behind the fence of `need`; whether the work ran.
async fn rename(app: &TestApp, database_id: &str, need: Need) -> (Result<(), ApiError>, bool) {
    let mut ran = false;
    let work = async |tx: &deadpool_postgres::Transaction<'_>| {
        ran = true;
        databases::set_name(tx, database_id, "Renamed", "usr_AAAAAAAAAAAA").await?;
        Ok(())
    };
    let out = match need {
        Need::Write => {
            app.db
                .in_transaction(database_id, DbOp::RenameDatabase, work)
                .await
        }
        Need::Structure => {
            app.db
                .in_structural_transaction(database_id, DbOp::RenameDatabase, work)
                .await
        }
    };
    (out, ran)
}

#[tokio::test]
async fn a_transaction_behind_the_fence_runs_only_where_the_database_is_served() {
    let app = spawn_app().await;
    let (db, _) = app.owned_database().await;
    for (state, need) in [
        (None, Need::Write),
        (None, Need::Structure),
        (Some("fenced"), Need::Write),
        (Some("fenced"), Need::Structure),
    ] {
        restore_placement(&app, &db).await;
        set_placement(&app, &db, state).await;
        let (out, ran) = rename(&app, &db, need).await;
        assert!(
            matches!(out, Err(ApiError::Misplaced)),
            "{state:?} {need:?}: {out:?}"
        );
        assert!(!ran, "{state:?} {need:?}: the work ran");
        assert_eq!(name_of(&app, &db).await, "Test");
    }

    restore_placement(&app, &db).await;
    set_placement(&app, &db, Some("moving")).await;
    let (out, ran) = rename(&app, &db, Need::Structure).await;
    assert!(matches!(out, Err(ApiError::Conflict(_))), "{out:?}");
    assert!(!ran);
    let (out, ran) = rename(&app, &db, Need::Write).await;
    assert!(out.is_ok() && ran, "{out:?}");
    assert_eq!(name_of(&app, &db).await, "Renamed");
}
