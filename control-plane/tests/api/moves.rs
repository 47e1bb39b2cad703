//! `POST /internal/moves` and friends: validation (nothing recorded on a
//! refusal), listing newest first, showing, aborting. The shards here are
//! not real, so the mover never gets past connecting to them.

use cluster_protocol::control::{CreateMove, MoveState};

use crate::helpers::*;

fn req(database_id: &str, to: &str) -> CreateMove {
    CreateMove {
        database_id: database_id.into(),
        to: to.into(),
        pause_budget_ms: None,
        step_delay_ms: None,
        dry_run: false,
    }
}

#[tokio::test]
async fn moves_are_validated_recorded_listed_and_aborted() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    for s in ["a", "b", "c"] {
        app.shard(s, 100).await;
    }
    let owner = app.user().await;
    let first = app.client.allocate_database(&owner).await.unwrap();
    let db = first.database_id.clone();
    let from = first.shard.name.clone();
    let others: Vec<&str> = ["a", "b", "c"].into_iter().filter(|s| *s != from).collect();
    let c = &app.client;

    assert_eq!(
        status(c.create_move(&req(&db, others[0])).await),
        400,
        "still creating"
    );
    c.confirm_database(&db).await.unwrap();
    assert_eq!(
        status(c.create_move(&req("db_000000000000", others[0])).await),
        404
    );
    assert_eq!(
        status(c.create_move(&req("nonsense", others[0])).await),
        404
    );
    assert_eq!(status(c.create_move(&req(&db, "zzz")).await), 404);
    assert_eq!(
        status(c.create_move(&req(&db, &from)).await),
        400,
        "same shard"
    );
    c.drain_shard(others[1]).await.unwrap();
    assert_eq!(
        status(c.create_move(&req(&db, others[1])).await),
        400,
        "draining"
    );
    let bad_budget = CreateMove {
        pause_budget_ms: Some(0),
        ..req(&db, others[0])
    };
    assert_eq!(status(c.create_move(&bad_budget).await), 400);
    assert!(
        c.moves().await.unwrap().moves.is_empty(),
        "refusals record nothing"
    );

    let m = c.create_move(&req(&db, others[0])).await.unwrap();
    assert_eq!(m.state, MoveState::Pending);
    assert!(m.id.starts_with("mov_"));
    assert_eq!(
        (m.database_id.as_str(), m.from.as_str(), m.to.as_str()),
        (db.as_str(), from.as_str(), others[0])
    );
    assert_eq!(m.pause_budget_ms, 400);
    assert_eq!(
        status(c.create_move(&req(&db, others[0])).await),
        409,
        "one unfinished move per database"
    );

    let second = app.client.allocate_database(&owner).await.unwrap();
    c.confirm_database(&second.database_id).await.unwrap();
    let to = if second.shard.name == others[0] {
        from.as_str()
    } else {
        others[0]
    };
    let m2 = c.create_move(&req(&second.database_id, to)).await.unwrap();
    let listed: Vec<String> = c
        .moves()
        .await
        .unwrap()
        .moves
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(listed, vec![m2.id.clone(), m.id.clone()], "newest first");
    assert_eq!(c.get_move(&m.id).await.unwrap().id, m.id);
    assert_eq!(status(c.get_move("mov_000000000000").await), 404);
    assert_eq!(status(c.get_move("nonsense").await), 404);
    assert_eq!(status(c.abort_move("mov_000000000000").await), 404);

    // Pending: aborted at once; started (the mover is quick): abort requested.
    let aborted = c.abort_move(&m.id).await.unwrap();
    assert_eq!(
        aborted.error.as_deref(),
        Some("aborted by the operator (moves abort)")
    );
    match aborted.state {
        MoveState::Aborted => {
            assert_eq!(status(c.abort_move(&m.id).await), 409);
            let again = c.create_move(&req(&db, others[0])).await.unwrap();
            assert_eq!(
                again.state,
                MoveState::Pending,
                "a finished move frees the database"
            );
        }
        MoveState::Copying => {
            let again = c.abort_move(&m.id).await.unwrap();
            assert_eq!(again.state, MoveState::Copying);
        }
        other => panic!("unexpected state after abort: {other:?}"),
    }
    app.finish().await;
}
