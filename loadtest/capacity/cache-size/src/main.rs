//! RSS of the router's three caches, one shape at a time, with N entries
//! shaped as router/src/forward/placement.rs and
//! router/src/gate/{keys,access}.rs hold them (the same struct layouts as
//! cluster_protocol::control, glibc malloc like the router).
//!   cache-size placement|keys|access N
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Instant;

#[allow(dead_code)] #[derive(Clone, Copy)] enum DatabaseState { Creating, Active }
#[allow(dead_code)] #[derive(Clone, Copy)] enum Access { ReadWrite, ReadOnly }
#[allow(dead_code)] #[derive(Clone, Copy)] enum Role { Viewer, Editor, Owner }
#[allow(dead_code)] struct ShardRef { name: String, url: String }
#[allow(dead_code)] struct Placement { database_id: String, tag: String, shard: ShardRef, epoch: i64,
    state: DatabaseState, hold_until: Option<chrono::DateTime<chrono::Utc>> }
#[allow(dead_code)] struct User { id: String, email: String, name: String, suspended: bool }
#[allow(dead_code)] enum DatabaseScope { All, Only(Vec<String>) }
#[allow(dead_code)] struct KeyRecord { id: String, name: String, user: User, secret_hash: String, access: Access,
    databases: DatabaseScope, created_at: chrono::DateTime<chrono::Utc>, version: i64 }
#[allow(dead_code)] struct RedisNames { key_version: String, user_version: String, last_used: String }
#[allow(dead_code)] struct VerifiedKey { record: KeyRecord, digest: [u8; 32], fetched_at: Instant, redis: RedisNames }
#[allow(dead_code)] struct Membership { database_id: String, role: Role }
#[allow(dead_code)] struct UserAccess { user_id: String, version: i64, memberships: Vec<Membership>, support: Vec<String> }
#[allow(dead_code)] struct Entry { access: Arc<UserAccess>, fetched_at: Instant }

const A: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
fn chars(mut n: u64, len: usize) -> String {
    let mut s = vec![b'0'; len];
    for c in s.iter_mut().rev() { *c = A[(n % 62) as usize]; n = n / 62 ^ 0x5bd1e995; }
    String::from_utf8(s).unwrap()
}
fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines().find(|l| l.starts_with("VmRSS:")).unwrap().split_whitespace().nth(1).unwrap().parse().unwrap()
}
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let what = args.get(1).map(String::as_str).unwrap_or("placement");
    let n: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let before = rss_kib();
    let t = Instant::now();
    let held: usize = match what {
        "placement" => {
            let m: RwLock<HashMap<String, Arc<Placement>>> = RwLock::default();
            for i in 0..n {
                let tag = chars(i * 387_420_489 + 12345, 5);
                let p = Arc::new(Placement { database_id: format!("db_{tag}{}", chars(i, 7)), tag: tag.clone(),
                    shard: ShardRef { name: format!("shard-{}", 1 + i % 1000), url: format!("http://10.1.{}.{}:7100", i % 4, i % 250) },
                    epoch: 1, state: DatabaseState::Active, hold_until: None });
                m.write().unwrap().insert(tag, p);
            }
            let l = m.read().unwrap().len(); std::mem::forget(m); l
        }
        "keys" => {
            let m: RwLock<HashMap<String, Arc<VerifiedKey>>> = RwLock::default();
            for i in 0..n {
                let id = format!("key_{}", chars(i, 12)); let uid = format!("usr_{}", chars(i / 2, 12));
                let k = Arc::new(VerifiedKey {
                    record: KeyRecord { id: id.clone(), name: format!("key {i}"),
                        user: User { id: uid.clone(), email: format!("user{i}@example-company.com"), name: format!("User Number {i}"), suspended: false },
                        secret_hash: format!("$argon2id$v=19$m=19456,t=2,p=1${}${}", chars(i, 22), chars(i + 7, 43)),
                        access: Access::ReadWrite, databases: DatabaseScope::All, created_at: chrono::Utc::now(), version: 1 },
                    digest: [7; 32], fetched_at: Instant::now(),
                    redis: RedisNames { key_version: format!("cluster:key:{id}"), user_version: format!("cluster:user:{uid}"), last_used: format!("cluster:lastused:{id}") } });
                m.write().unwrap().insert(id, k);
            }
            let l = m.read().unwrap().len(); std::mem::forget(m); l
        }
        "access" => {
            // 3 memberships per cached user (the catalog's ratio: 1.5M memberships / 0.5M users)
            let m: RwLock<HashMap<String, Entry>> = RwLock::default();
            for i in 0..n {
                let uid = format!("usr_{}", chars(i, 12));
                let ms = (0..3).map(|j| Membership { database_id: format!("db_{}", chars(i * 3 + j, 12)), role: Role::Owner }).collect();
                let a = Arc::new(UserAccess { user_id: uid.clone(), version: 1, memberships: ms, support: Vec::new() });
                m.write().unwrap().insert(uid, Entry { access: a, fetched_at: Instant::now() });
            }
            let l = m.read().unwrap().len(); std::mem::forget(m); l
        }
        _ => panic!("placement|keys|access"),
    };
    let after = rss_kib();
    println!("{{\"cache\":\"{what}\",\"entries\":{held},\"rss_before_kib\":{before},\"rss_after_kib\":{after},\"bytes_per_entry\":{:.1},\"fill_ms\":{},\"size_of_placement\":{},\"size_of_verified_key\":{},\"size_of_user_access\":{}}}",
        (after - before) as f64 * 1024.0 / held as f64, t.elapsed().as_millis(),
        std::mem::size_of::<Placement>(), std::mem::size_of::<VerifiedKey>(), std::mem::size_of::<UserAccess>());
}
