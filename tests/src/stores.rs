//! The test cluster's blob stores. `deploy/test` runs shard-1 on the local
//! store and shard-2 on the S3 test server (deploy/dev-cluster's test-only
//! `SHARD_BLOB_STORES`, recorded in the env file with `BLOB_DIR` and the
//! `S3_*` settings), so an attachment test can run once per store:
//!
//! ```ignore
//! for store in Store::BOTH {
//!     let db = owner.api.new_database_on(store, "uploads").await;
//!     // ... upload, then:
//!     assert!(stores::blob_exists(&db, &att, Variant::Original).await);
//! }
//! ```
//!
//! [`blob_exists`] and [`blob_bytes`] look behind the API, straight into
//! the store of the database's shard, for tests that check bytes were
//! written or deleted (uploads, cell writes dropping an id, purge).

use std::sync::OnceLock;

use blobstore::settings::{S3Settings, SecretString};
use blobstore::{BlobError, BlobStore, Settings};
use futures::StreamExt;

pub use blobstore::Variant;

use crate::{cluster, id, unique, Api};

/// A blob store kind of the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    Local,
    S3,
}

impl Store {
    /// Both stores, for tests that run once per store.
    pub const BOTH: [Store; 2] = [Store::Local, Store::S3];

    pub fn as_str(self) -> &'static str {
        match self {
            Store::Local => "local",
            Store::S3 => "s3",
        }
    }

    fn parse(text: &str) -> Store {
        match text.trim() {
            "s3" => Store::S3,
            "local" | "" => Store::Local,
            other => panic!("unknown blob store {other:?} in the env file's SHARD_BLOB_STORES"),
        }
    }
}

/// The store of every shard, in shard order (`shard-1` first): the env
/// file's `SHARD_BLOB_STORES`, else its `BLOB_STORE` for every shard.
pub fn shard_stores() -> Vec<(String, Store)> {
    let c = cluster();
    let shards = c
        .var("SHARD_URLS")
        .map(|u| u.split_whitespace().count())
        .unwrap_or(0);
    let listed: Vec<Store> = c
        .var("SHARD_BLOB_STORES")
        .map(|l| l.split(',').map(Store::parse).collect())
        .unwrap_or_default();
    let default = Store::parse(c.var("BLOB_STORE").unwrap_or("local"));
    (1..=shards.max(listed.len()))
        .map(|i| {
            let store = listed.get(i - 1).copied().unwrap_or(default);
            (format!("shard-{i}"), store)
        })
        .collect()
}

/// The store of the shard named `shard`.
pub fn store_of_shard(shard: &str) -> Store {
    shard_stores()
        .into_iter()
        .find(|(name, _)| name == shard)
        .map(|(_, store)| store)
        .unwrap_or_else(|| panic!("the env file names no blob store for {shard}"))
}

/// The store of the shard that holds `database_id` now.
pub async fn database_store(database_id: &str) -> Store {
    let placement = cluster()
        .control_plane
        .database(database_id)
        .await
        .expect("placement");
    store_of_shard(&placement.shard)
}

/// `store` opened as the cluster's shard nodes open it (the env file's
/// `BLOB_DIR`; its `S3_*`, else the `TEST_S3_*` of deploy/test).
pub fn open(store: Store) -> &'static BlobStore {
    static LOCAL: OnceLock<BlobStore> = OnceLock::new();
    static S3: OnceLock<BlobStore> = OnceLock::new();
    let c = cluster();
    match store {
        Store::Local => LOCAL.get_or_init(|| {
            let dir = c
                .var("BLOB_DIR")
                .expect("the env file names BLOB_DIR (deploy/dev-cluster writes it)");
            BlobStore::open(&Settings::local(dir)).expect("open the local blob store")
        }),
        Store::S3 => S3.get_or_init(|| {
            let var = |name: &str| {
                c.var(name)
                    .map(str::to_owned)
                    .or_else(|| std::env::var(format!("TEST_{name}")).ok())
                    .filter(|v| !v.is_empty())
                    .unwrap_or_else(|| {
                        panic!("neither the env file's {name} nor TEST_{name} is set: run the suite through deploy/test")
                    })
            };
            let settings = S3Settings {
                endpoint: Some(var("S3_ENDPOINT")),
                region: var("S3_REGION"),
                bucket: var("S3_BUCKET"),
                access_key_id: var("S3_ACCESS_KEY_ID"),
                secret_access_key: SecretString::new(var("S3_SECRET_ACCESS_KEY")),
                force_path_style: true,
                part_size: blobstore::settings::DEFAULT_PART_SIZE,
            };
            BlobStore::open(&Settings::S3(settings)).expect("open the S3 blob store")
        }),
    }
}

/// Whether `variant` of attachment `attachment_id` of `database_id` has
/// bytes in the store of the database's shard.
pub async fn blob_exists(database_id: &str, attachment_id: &str, variant: Variant) -> bool {
    let key = blobstore::key(database_id, attachment_id, variant).expect("a valid blob key");
    open(database_store(database_id).await)
        .exists(&key)
        .await
        .expect("the blob store answers")
}

/// The bytes of `variant` of an attachment, `None` when the store of the
/// database's shard has none.
pub async fn blob_bytes(
    database_id: &str,
    attachment_id: &str,
    variant: Variant,
) -> Option<Vec<u8>> {
    let key = blobstore::key(database_id, attachment_id, variant).expect("a valid blob key");
    let store = open(database_store(database_id).await);
    let blob = match store.get(&key, None).await {
        Ok(blob) => blob,
        Err(BlobError::NotFound) => return None,
        Err(e) => panic!("the blob store answers: {e}"),
    };
    let mut out = Vec::new();
    let mut body = blob.body;
    while let Some(chunk) = body.next().await {
        out.extend_from_slice(&chunk.expect("read the blob"));
    }
    Some(out)
}

/// Databases made before one lands on a shard with the wanted store.
const PLACEMENT_TRIES: usize = 40;

impl Api {
    /// Creates databases named `unique(prefix)` until one is placed on a
    /// shard that uses `store`, and returns its id (the others stay,
    /// empty: a key cannot delete a database). Panics when no shard of the
    /// cluster uses `store`.
    pub async fn new_database_on(&self, store: Store, prefix: &str) -> String {
        let stores = shard_stores();
        assert!(
            stores.iter().any(|(_, s)| *s == store),
            "no shard of the test cluster uses the {} blob store ({stores:?}); deploy/test runs \
             shard-1 on local and shard-2 on s3",
            store.as_str()
        );
        for _ in 0..PLACEMENT_TRIES {
            let db = id(&self.create_database(&unique(prefix)).await);
            if database_store(&db).await == store {
                return db;
            }
        }
        panic!(
            "{PLACEMENT_TRIES} new databases, none placed on a shard with the {} store",
            store.as_str()
        );
    }
}
