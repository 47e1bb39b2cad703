//! `REDIS_URL` names one Redis or a Redis Cluster; this module reads it and
//! opens the matching `redis` connection.
//!
//! * `redis://HOST:PORT[/DB]` (or `rediss://`, `redis+unix://`): one Redis.
//! * `redis+cluster://HOST:PORT[,HOST:PORT...]`, or several comma-separated
//!   `redis://` URLs: a Redis Cluster, the addresses being seed nodes (any
//!   live one is enough; the rest of the cluster is discovered from it).
//!   User and password, when given, are taken from the first URL.
//!
//! Every key the services touch in one command carries a hash tag
//! (`cluster_protocol::control::redis_keys`), so the same commands run on
//! either; [`key_slot`] is Redis Cluster's slot of a key.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, MultiplexedConnection};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisFuture, Value};

/// What `REDIS_URL` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Single(String),
    /// Seed node URLs (each `redis://...`).
    Cluster(Vec<String>),
}

impl Target {
    pub fn parse(url: &str) -> Result<Self, String> {
        let parts: Vec<&str> = url
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .collect();
        let Some(first) = parts.first() else {
            return Err("REDIS_URL is empty".into());
        };
        let explicit = first.starts_with("redis+cluster://");
        if parts.len() == 1 && !explicit {
            return Ok(Self::Single(first.to_string()));
        }
        let mut seeds = Vec::with_capacity(parts.len());
        for (i, part) in parts.iter().enumerate() {
            let seed = if let Some(rest) = part.strip_prefix("redis+cluster://") {
                format!("redis://{rest}")
            } else if part.contains("://") {
                part.to_string()
            } else if i > 0 {
                // `redis+cluster://a:1,b:2`: later parts are bare addresses.
                match seeds.first().and_then(|s: &String| userinfo(s)) {
                    Some(auth) => format!("redis://{auth}@{part}"),
                    None => format!("redis://{part}"),
                }
            } else {
                return Err(format!("REDIS_URL part {part:?} is not a URL"));
            };
            seeds.push(seed);
        }
        Ok(Self::Cluster(seeds))
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }

    /// Every URL, one for a single Redis.
    pub fn urls(&self) -> Vec<String> {
        match self {
            Self::Single(u) => vec![u.clone()],
            Self::Cluster(seeds) => seeds.clone(),
        }
    }
}

fn userinfo(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let (auth, _) = rest.split_once('@')?;
    Some(auth)
}

/// Redis Cluster's hash slot of `key`: CRC16 (XMODEM) of the key's hash
/// tag (the text between the first `{` and the next `}`, when not empty)
/// or of the whole key, modulo 16384.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(hashed) % 16384
}

fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= (byte as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// A connection to one Redis (multiplexed) or to a Redis Cluster (routing
/// each command by its key's slot, following failovers).
#[derive(Clone)]
pub enum Conn {
    Single(MultiplexedConnection),
    /// One Redis, reconnecting by itself.
    Managed(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Conn {
    /// Connects to `target`; `timeout` bounds connecting and each reply.
    pub async fn connect(target: &Target, timeout: Duration) -> redis::RedisResult<Self> {
        match target {
            Target::Single(url) => {
                let client = redis::Client::open(url.as_str())?;
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout));
                Ok(Self::Single(
                    client
                        .get_multiplexed_async_connection_with_config(&config)
                        .await?,
                ))
            }
            Target::Cluster(seeds) => {
                let client = cluster_client(seeds, timeout)?;
                Ok(Self::Cluster(client.get_async_connection().await?))
            }
        }
    }
}

/// A cluster client over `seeds` with `timeout` per connection and reply.
pub fn cluster_client(seeds: &[String], timeout: Duration) -> redis::RedisResult<ClusterClient> {
    ClusterClient::builder(seeds.iter().map(String::as_str))
        .connection_timeout(timeout)
        .response_timeout(timeout)
        .retries(2)
        .build()
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(c) => c.req_packed_command(cmd),
            Self::Managed(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Managed(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Managed(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_url_is_one_redis() {
        assert_eq!(
            Target::parse("redis://127.0.0.1:6379/2").unwrap(),
            Target::Single("redis://127.0.0.1:6379/2".into())
        );
    }

    #[test]
    fn cluster_forms() {
        let seeds = vec![
            "redis://127.0.0.1:7000".to_string(),
            "redis://127.0.0.1:7001".to_string(),
        ];
        assert_eq!(
            Target::parse("redis://127.0.0.1:7000, redis://127.0.0.1:7001").unwrap(),
            Target::Cluster(seeds.clone())
        );
        assert_eq!(
            Target::parse("redis+cluster://127.0.0.1:7000,127.0.0.1:7001").unwrap(),
            Target::Cluster(seeds)
        );
        assert_eq!(
            Target::parse("redis+cluster://u:p@h:1,h:2").unwrap(),
            Target::Cluster(vec!["redis://u:p@h:1".into(), "redis://u:p@h:2".into()])
        );
        assert!(Target::parse("redis+cluster://h:1").unwrap().is_cluster());
        assert!(Target::parse("").is_err());
    }

    #[test]
    fn slots_match_redis() {
        // Values from `CLUSTER KEYSLOT` on Redis 7.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"hello"), 866);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_eq!(key_slot(b"{}x"), key_slot(b"{}x"));
        assert_ne!(key_slot(b"{}x"), key_slot(b"x"));
    }
}
