//! kill -9 of the control plane, of the source shard node and of the
//! target shard node while a move sits in each state (`--step-delay-ms`),
//! then `deploy/dev-cluster up` to restart what died. The move ends `done`
//! or `aborted`, the database is where the catalog says, every record
//! written before the kill is there, and nothing is left behind: no
//! replication slot, publication or subscription, no half copy.

use std::time::Duration;

use chaos_tests::{assert_no_replication_objects, record_ids, small_database};
use cluster_protocol::control::MoveState;
use e2e_tests::cluster_ops::{dev_cluster_up, kill9};
use e2e_tests::moves::{
    assert_nothing_left, database, shard_names, start_move, wait_finished_within, wait_state,
};
use e2e_tests::Person;
use serde_json::json;

#[derive(Debug, Clone, Copy)]
enum Victim {
    ControlPlane,
    SourceShard,
    TargetShard,
}

/// Long enough to find the move in a state and kill something there;
/// the pause budget leaves room for the delay after the fence.
const STEP_DELAY: &[&str] = &["--step-delay-ms", "2000", "--pause-budget-ms", "20000"];

async fn kill_during(victim: Victim, state: MoveState) {
    let owner = Person::new().await;
    let (db, records, mut written) = small_database(&owner, 20).await;
    written.sort();
    let from = database(&db).await.shard;
    let to = shard_names()
        .await
        .into_iter()
        .find(|s| *s != from)
        .expect("a second shard");
    let m = start_move(&db, &to, STEP_DELAY).await;
    wait_state(&m.id, state).await;
    let component = match victim {
        Victim::ControlPlane => "control-plane".to_owned(),
        Victim::SourceShard => from.clone(),
        Victim::TargetShard => to.clone(),
    };
    kill9(&component);
    dev_cluster_up(None).await;

    let ended = wait_finished_within(&m.id, Duration::from_secs(180)).await;
    let placed = database(&db).await;
    match ended.state {
        MoveState::Done => assert_eq!(placed.shard, to, "{ended:?}"),
        MoveState::Aborted => assert_eq!(placed.shard, from, "{ended:?}"),
        other => panic!("a finished move is done or aborted, not {other:?}"),
    }
    eprintln!(
        "chaos: {victim:?} killed in {}: the move ended {} ({:?})",
        state.as_str(),
        ended.state.as_str(),
        ended.error
    );
    assert_eq!(
        record_ids(&owner, &records).await,
        written,
        "every record written before the kill is there, nothing more"
    );
    owner
        .api
        .post(
            &records,
            json!({"records": [{"fields": {"Name": "after"}}]}),
        )
        .await
        .expect_ok();
    assert_nothing_left(&ended).await;
    assert_no_replication_objects().await;
}

macro_rules! kill_cases {
    ($($name:ident: $victim:ident in $state:ident;)*) => {$(
        #[tokio::test]
        async fn $name() {
            kill_during(Victim::$victim, MoveState::$state).await;
        }
    )*};
}

kill_cases! {
    control_plane_killed_in_pending: ControlPlane in Pending;
    control_plane_killed_in_copying: ControlPlane in Copying;
    control_plane_killed_in_catching_up: ControlPlane in CatchingUp;
    control_plane_killed_in_cutover: ControlPlane in Cutover;
    control_plane_killed_in_cleanup: ControlPlane in Cleanup;
    source_shard_killed_in_pending: SourceShard in Pending;
    source_shard_killed_in_copying: SourceShard in Copying;
    source_shard_killed_in_catching_up: SourceShard in CatchingUp;
    source_shard_killed_in_cutover: SourceShard in Cutover;
    source_shard_killed_in_cleanup: SourceShard in Cleanup;
    target_shard_killed_in_pending: TargetShard in Pending;
    target_shard_killed_in_copying: TargetShard in Copying;
    target_shard_killed_in_catching_up: TargetShard in CatchingUp;
    target_shard_killed_in_cutover: TargetShard in Cutover;
    target_shard_killed_in_cleanup: TargetShard in Cleanup;
}
