//! The ground the kill tests stand on: kill -9 of the router, the control
//! plane and every shard node at once, then `deploy/dev-cluster up`,
//! brings the cluster back with its data (no move involved).

use chaos_tests::{record_ids, small_database};
use e2e_tests::cluster_ops::{dev_cluster_up, kill9, pid_of};
use e2e_tests::moves::shard_names;
use e2e_tests::Person;
use serde_json::json;

#[tokio::test]
async fn every_process_killed_comes_back_with_its_data() {
    let owner = Person::new().await;
    let (_, records, mut written) = small_database(&owner, 10).await;
    written.sort();
    let mut victims = vec!["router".to_owned(), "control-plane".to_owned()];
    victims.extend(shard_names().await);
    let before: Vec<u32> = victims.iter().map(|v| pid_of(v)).collect();
    for v in &victims {
        kill9(v);
    }
    dev_cluster_up(None).await;
    for (v, old) in victims.iter().zip(before) {
        assert_ne!(pid_of(v), old, "{v} was started again");
    }
    assert_eq!(record_ids(&owner, &records).await, written);
    owner
        .api
        .post(
            &records,
            json!({"records": [{"fields": {"Name": "after"}}]}),
        )
        .await
        .expect_ok();
}
