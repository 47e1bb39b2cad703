//! Dedicated Redis connections for the limiter's one round trip per request.
//!
//! The request's own task checks a connection out, writes `EVALSHA` and reads
//! the reply itself: one write and one read, no hand-off to a driver task and
//! back (which is what a multiplexed connection costs: two extra task wake-ups,
//! often across worker threads). Idle connections wait in a small pool. A
//! connection that failed, or whose command was abandoned half-way (the
//! caller's timeout dropped the future), is closed, never reused.
//!
//! [`Redis`] is either one such pool or a Redis Cluster: a pool per master
//! and the cluster's slot map (`CLUSTER SLOTS`), each script sent to the
//! master of its first key's slot (every key of one call shares a hash
//! tag). A `MOVED` reply re-points the slot and retries once; a connection
//! failure or `CLUSTERDOWN` makes the next call re-read the slot map
//! first, so after a failover the calls follow the promoted replica.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use redis::{ConnectionAddr, IntoConnectionInfo};
use service_kit::redis_target::{key_slot, Target};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::gate::resp::{self, Reply, ScriptCall};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("redis i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("redis closed the connection")]
    Closed,
    #[error("malformed reply from redis")]
    Protocol,
    #[error("redis: {0}")]
    Server(String),
    #[error("redis url: {0}")]
    Config(String),
}

/// A Lua script and its SHA1, computed once.
pub struct Script {
    body: String,
    sha: String,
}

impl Script {
    pub fn new(body: &str) -> Self {
        Self {
            body: body.to_string(),
            sha: redis::Script::new(body).get_hash().to_string(),
        }
    }
}

trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

struct Conn {
    io: Box<dyn Io>,
    read: BytesMut,
    write: Vec<u8>,
    /// The second command of a pipelined pair, before it joins `write`.
    second: Vec<u8>,
}

/// The replies of two scripts sent together ([`Redis::eval_pair`]).
pub type PairReplies = (Result<Reply, Error>, Result<Reply, Error>);

impl Conn {
    /// Sends the command in `self.write` and reads one reply.
    async fn round_trip(&mut self) -> Result<Reply, Error> {
        self.io.write_all(&self.write).await?;
        self.read_reply().await
    }

    async fn read_reply(&mut self) -> Result<Reply, Error> {
        loop {
            if let Some((reply, used)) = resp::decode(&self.read).map_err(|_| Error::Protocol)? {
                self.read.advance(used);
                return Ok(reply);
            }
            self.read.reserve(512);
            if self.io.read_buf(&mut self.read).await? == 0 {
                return Err(Error::Closed);
            }
        }
    }

    async fn command(&mut self, args: &[&[u8]]) -> Result<Reply, Error> {
        self.write.clear();
        resp::encode(&mut self.write, args.iter().copied());
        self.round_trip().await
    }

    /// `EVALSHA`, falling back to `EVAL` (which caches the script) once when
    /// Redis does not know the script (after a restart or `SCRIPT FLUSH`).
    async fn eval<F>(&mut self, script: &Script, call: &F) -> Result<Reply, Error>
    where
        F: Fn(&mut ScriptCall<'_>),
    {
        let mut reply = self.eval_as("EVALSHA", &script.sha, call).await?;
        if matches!(&reply, Reply::Error(e) if e.starts_with("NOSCRIPT")) {
            reply = self.eval_as("EVAL", &script.body, call).await?;
        }
        match reply {
            Reply::Error(e) => Err(Error::Server(e)),
            other => Ok(other),
        }
    }

    /// Two scripts in one write, both replies read (each retried alone
    /// with `EVAL` when Redis did not know it). `Err` when the connection
    /// failed; a script's own error is its reply's `Err`.
    async fn eval_pair<F, G>(
        &mut self,
        first: (&Script, &F),
        second: (&Script, &G),
    ) -> Result<PairReplies, Error>
    where
        F: Fn(&mut ScriptCall<'_>),
        G: Fn(&mut ScriptCall<'_>),
    {
        let mut writer = ScriptCall::new(&mut self.write);
        (first.1)(&mut writer);
        writer.finish("EVALSHA", &first.0.sha);
        let mut writer = ScriptCall::new(&mut self.second);
        (second.1)(&mut writer);
        writer.finish("EVALSHA", &second.0.sha);
        self.write.extend_from_slice(&self.second);
        let a = self.round_trip().await?;
        let b = self.read_reply().await?;
        let a = match a {
            Reply::Error(e) if e.starts_with("NOSCRIPT") => {
                self.eval_as("EVAL", &first.0.body, first.1).await?
            }
            other => other,
        };
        let b = match b {
            Reply::Error(e) if e.starts_with("NOSCRIPT") => {
                self.eval_as("EVAL", &second.0.body, second.1).await?
            }
            other => other,
        };
        let own = |r: Reply| match r {
            Reply::Error(e) => Err(Error::Server(e)),
            other => Ok(other),
        };
        Ok((own(a), own(b)))
    }

    async fn eval_as<F>(&mut self, verb: &str, script: &str, call: &F) -> Result<Reply, Error>
    where
        F: Fn(&mut ScriptCall<'_>),
    {
        let mut writer = ScriptCall::new(&mut self.write);
        call(&mut writer);
        writer.finish(verb, script);
        self.round_trip().await
    }
}

/// Connections to one Redis server, opened on demand and kept when idle.
pub struct RedisPool {
    addr: ConnectionAddr,
    username: Option<String>,
    password: Option<String>,
    db: i64,
    idle: Mutex<Vec<Conn>>,
    max_idle: usize,
    connect_timeout: Duration,
}

impl RedisPool {
    /// Parses `url`; connects nothing yet (the router starts without Redis).
    pub fn new(url: &str, max_idle: usize, connect_timeout: Duration) -> Result<Self, Error> {
        let info = url
            .into_connection_info()
            .map_err(|e| Error::Config(e.to_string()))?;
        let settings = info.redis_settings();
        Ok(Self {
            addr: info.addr().clone(),
            username: settings.username().map(String::from),
            password: settings.password().map(String::from),
            db: settings.db(),
            idle: Mutex::new(Vec::new()),
            max_idle,
            connect_timeout,
        })
    }

    /// Runs `script` with `keys` and `args` on a pooled connection. A reused
    /// connection that turns out to be closed (Redis restarted) is retried
    /// once on a fresh one: Redis never read a command sent on it.
    /// `call` writes the keys and arguments (it may run twice).
    pub async fn eval<F>(&self, script: &Script, call: F) -> Result<Reply, Error>
    where
        F: Fn(&mut ScriptCall<'_>),
    {
        let (mut conn, reused) = match self.checkout() {
            Some(c) => (c, true),
            None => (self.connect().await?, false),
        };
        let reply = match conn.eval(script, &call).await {
            Err(Error::Closed) if reused => {
                self.idle.lock().unwrap_or_else(|p| p.into_inner()).clear();
                conn = self.connect().await?;
                conn.eval(script, &call).await
            }
            other => other,
        };
        match reply {
            Ok(r) => {
                self.checkin(conn);
                Ok(r)
            }
            Err(Error::Server(e)) => {
                self.checkin(conn);
                Err(Error::Server(e))
            }
            Err(e) => Err(e),
        }
    }

    /// Runs two scripts pipelined on one connection (see [`Conn::eval_pair`]),
    /// with [`RedisPool::eval`]'s retry of a reused connection found closed.
    pub async fn eval_pair<F, G>(
        &self,
        first: (&Script, &F),
        second: (&Script, &G),
    ) -> Result<PairReplies, Error>
    where
        F: Fn(&mut ScriptCall<'_>),
        G: Fn(&mut ScriptCall<'_>),
    {
        let (mut conn, reused) = match self.checkout() {
            Some(c) => (c, true),
            None => (self.connect().await?, false),
        };
        let replies = match conn.eval_pair(first, second).await {
            Err(Error::Closed) if reused => {
                self.idle.lock().unwrap_or_else(|p| p.into_inner()).clear();
                conn = self.connect().await?;
                conn.eval_pair(first, second).await
            }
            other => other,
        }?;
        self.checkin(conn);
        Ok(replies)
    }

    /// Runs one plain command on a pooled connection.
    async fn command(&self, args: &[&[u8]]) -> Result<Reply, Error> {
        let mut conn = match self.checkout() {
            Some(c) => c,
            None => self.connect().await?,
        };
        let reply = conn.command(args).await?;
        self.checkin(conn);
        Ok(reply)
    }

    /// A pool with this one's credentials and limits to another server.
    fn to_node(&self, host: &str, port: u16) -> Self {
        Self {
            addr: ConnectionAddr::Tcp(host.to_string(), port),
            username: self.username.clone(),
            password: self.password.clone(),
            db: 0,
            idle: Mutex::new(Vec::new()),
            max_idle: self.max_idle,
            connect_timeout: self.connect_timeout,
        }
    }

    fn address(&self) -> String {
        match &self.addr {
            ConnectionAddr::Tcp(host, port) => format!("{host}:{port}"),
            other => format!("{other:?}"),
        }
    }

    fn checkout(&self) -> Option<Conn> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop()
    }

    fn checkin(&self, conn: Conn) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < self.max_idle {
            idle.push(conn);
        }
    }

    async fn connect(&self) -> Result<Conn, Error> {
        let io = tokio::time::timeout(self.connect_timeout, self.open())
            .await
            .map_err(|_| Error::Io(std::io::ErrorKind::TimedOut.into()))??;
        let mut conn = Conn {
            io,
            read: BytesMut::with_capacity(512),
            write: Vec::with_capacity(512),
            second: Vec::with_capacity(256),
        };
        if let Some(password) = &self.password {
            let mut auth: Vec<&[u8]> = vec![b"AUTH"];
            auth.extend(self.username.as_deref().map(str::as_bytes));
            auth.push(password.as_bytes());
            expect_ok(conn.command(&auth).await?)?;
        }
        if self.db != 0 {
            let db = self.db.to_string();
            expect_ok(conn.command(&[b"SELECT", db.as_bytes()]).await?)?;
        }
        Ok(conn)
    }

    async fn open(&self) -> Result<Box<dyn Io>, Error> {
        match &self.addr {
            ConnectionAddr::Tcp(host, port) => {
                let stream = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
                stream.set_nodelay(true)?;
                Ok(Box::new(stream))
            }
            #[cfg(unix)]
            ConnectionAddr::Unix(path) => {
                Ok(Box::new(tokio::net::UnixStream::connect(path).await?))
            }
            other => Err(Error::Config(format!("unsupported address {other:?}"))),
        }
    }
}

/// One Redis or a Redis Cluster (see the module's documentation).
///
/// [`Redis::eval_pair`] sends two scripts at once: pipelined on one
/// connection when they go to the same server, else concurrently.
pub enum Redis {
    Single(RedisPool),
    Cluster(ClusterPool),
}

impl Redis {
    /// Parses `url` (`REDIS_URL`: one URL, or a cluster's seeds, see
    /// `service_kit::redis_target`); connects nothing yet.
    pub fn new(url: &str, max_idle: usize, connect_timeout: Duration) -> Result<Self, Error> {
        match Target::parse(url).map_err(Error::Config)? {
            Target::Single(url) => Ok(Self::Single(RedisPool::new(
                &url,
                max_idle,
                connect_timeout,
            )?)),
            Target::Cluster(seeds) => {
                let seeds = seeds
                    .iter()
                    .map(|u| RedisPool::new(u, max_idle, connect_timeout).map(Arc::new))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Self::Cluster(ClusterPool::new(seeds)))
            }
        }
    }

    /// Runs `script` (see [`RedisPool::eval`]); on a cluster, on the master
    /// of the slot of the call's first key.
    pub async fn eval<F>(&self, script: &Script, call: F) -> Result<Reply, Error>
    where
        F: Fn(&mut ScriptCall<'_>),
    {
        match self {
            Self::Single(pool) => pool.eval(script, call).await,
            Self::Cluster(cluster) => cluster.eval(script, call).await,
        }
    }

    /// Runs two scripts at once (each on its first key's slot); the
    /// replies in order. `Err` only when the connection failed.
    pub async fn eval_pair<F, G>(
        &self,
        first: (&Script, F),
        second: (&Script, G),
    ) -> Result<PairReplies, Error>
    where
        F: Fn(&mut ScriptCall<'_>),
        G: Fn(&mut ScriptCall<'_>),
    {
        match self {
            Self::Single(pool) => {
                pool.eval_pair((first.0, &first.1), (second.0, &second.1))
                    .await
            }
            Self::Cluster(cluster) => {
                let a = first_key_slot(&first.1);
                let b = first_key_slot(&second.1);
                if !cluster.stale.load(Ordering::Relaxed) {
                    if let (Some(x), Some(y)) = (cluster.node(a), cluster.node(b)) {
                        if Arc::ptr_eq(&x, &y) {
                            let replies = x
                                .eval_pair((first.0, &first.1), (second.0, &second.1))
                                .await;
                            // A MOVED reply: the slot map is old; the next call refreshes it.
                            if let Ok((Err(Error::Server(e)), _) | (_, Err(Error::Server(e)))) =
                                &replies
                            {
                                if e.starts_with("MOVED ") {
                                    cluster.stale.store(true, Ordering::Relaxed);
                                }
                            }
                            if replies.is_err() {
                                cluster.stale.store(true, Ordering::Relaxed);
                            }
                            return replies;
                        }
                    }
                }
                let (x, y) = tokio::join!(
                    cluster.eval(first.0, &first.1),
                    cluster.eval(second.0, &second.1)
                );
                Ok((x, y))
            }
        }
    }
}

const SLOTS: usize = 16_384;
const NO_NODE: u16 = u16::MAX;

/// Which pool serves each slot.
struct SlotMap {
    nodes: Vec<Arc<RedisPool>>,
    /// Per slot, an index into `nodes` or [`NO_NODE`].
    slots: Vec<u16>,
}

impl SlotMap {
    fn node(&self, slot: u16) -> Option<Arc<RedisPool>> {
        let i = *self.slots.get(slot as usize)?;
        self.nodes.get(i as usize).cloned()
    }

    /// The pool for `address` (`host:port`), added when new.
    fn node_index(&mut self, host: &str, port: u16, template: &RedisPool) -> u16 {
        let address = format!("{host}:{port}");
        if let Some(i) = self.nodes.iter().position(|n| n.address() == address) {
            return i as u16;
        }
        self.nodes.push(Arc::new(template.to_node(host, port)));
        (self.nodes.len() - 1) as u16
    }
}

/// A Redis Cluster: a [`RedisPool`] per master and the slot map.
pub struct ClusterPool {
    seeds: Vec<Arc<RedisPool>>,
    map: RwLock<SlotMap>,
    /// Set after a failure: the next call re-reads the slot map first.
    stale: AtomicBool,
    refreshing: tokio::sync::Mutex<()>,
}

impl ClusterPool {
    fn new(seeds: Vec<Arc<RedisPool>>) -> Self {
        Self {
            seeds,
            map: RwLock::new(SlotMap {
                nodes: Vec::new(),
                slots: vec![NO_NODE; SLOTS],
            }),
            stale: AtomicBool::new(true),
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    fn node(&self, slot: u16) -> Option<Arc<RedisPool>> {
        self.map
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .node(slot)
    }

    async fn eval<F>(&self, script: &Script, call: F) -> Result<Reply, Error>
    where
        F: Fn(&mut ScriptCall<'_>),
    {
        let slot = first_key_slot(&call);
        if self.stale.load(Ordering::Relaxed) {
            self.refresh().await;
        }
        let node = self.node(slot).ok_or_else(|| {
            self.stale.store(true, Ordering::Relaxed);
            Error::Server(format!("CLUSTERDOWN no known master for slot {slot}"))
        })?;
        match node.eval(script, &call).await {
            Err(Error::Server(e)) if e.starts_with("MOVED ") => {
                self.stale.store(true, Ordering::Relaxed);
                let (host, port) = moved_to(&e).ok_or(Error::Protocol)?;
                let node = {
                    let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
                    let template = node.as_ref();
                    let i = map.node_index(&host, port, template);
                    map.slots[slot as usize] = i;
                    map.nodes[i as usize].clone()
                };
                node.eval(script, &call).await
            }
            Err(e) => {
                self.stale.store(true, Ordering::Relaxed);
                Err(e)
            }
            ok => ok,
        }
    }

    /// Re-reads the slot map from the first node that answers (known
    /// masters, then the seeds). One call refreshes at a time; the others
    /// go on with the map they have.
    async fn refresh(&self) {
        let Ok(_guard) = self.refreshing.try_lock() else {
            return;
        };
        let mut candidates: Vec<Arc<RedisPool>> = self
            .map
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .nodes
            .clone();
        candidates.extend(self.seeds.iter().cloned());
        for node in candidates {
            let Ok(Reply::Array(ranges)) = node.command(&[b"CLUSTER", b"SLOTS"]).await else {
                continue;
            };
            let Some(ranges) = parse_slots(&ranges) else {
                continue;
            };
            let template = self.seeds[0].clone();
            let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
            let mut fresh = SlotMap {
                nodes: map.nodes.clone(),
                slots: vec![NO_NODE; SLOTS],
            };
            for (start, end, host, port) in ranges {
                let i = fresh.node_index(&host, port, &template);
                for slot in start..=end.min(SLOTS as u16 - 1) {
                    fresh.slots[slot as usize] = i;
                }
            }
            *map = fresh;
            self.stale.store(false, Ordering::Relaxed);
            return;
        }
    }
}

/// The slot of the first key `call` writes.
fn first_key_slot<F>(call: &F) -> u16
where
    F: Fn(&mut ScriptCall<'_>),
{
    let mut scratch = Vec::with_capacity(128);
    call(&mut ScriptCall::new(&mut scratch));
    match resp::decode(&scratch) {
        Ok(Some((Reply::Bulk(Some(key)), _))) => key_slot(&key),
        _ => 0,
    }
}

/// `MOVED 3999 127.0.0.1:6381` -> ("127.0.0.1", 6381).
fn moved_to(error: &str) -> Option<(String, u16)> {
    let address = error.split_whitespace().nth(2)?;
    let (host, port) = address.rsplit_once(':')?;
    Some((host.to_string(), port.parse().ok()?))
}

/// `CLUSTER SLOTS` -> (first slot, last slot, master host, master port).
fn parse_slots(ranges: &[Reply]) -> Option<Vec<(u16, u16, String, u16)>> {
    let mut out = Vec::with_capacity(ranges.len());
    for range in ranges {
        let Reply::Array(items) = range else {
            return None;
        };
        let start = items.first()?.as_i64()?;
        let end = items.get(1)?.as_i64()?;
        let Reply::Array(master) = items.get(2)? else {
            return None;
        };
        let host = match master.first()? {
            Reply::Bulk(Some(h)) => String::from_utf8(h.clone()).ok()?,
            _ => return None,
        };
        let port = master.get(1)?.as_i64()?;
        out.push((
            u16::try_from(start).ok()?,
            u16::try_from(end).ok()?,
            host,
            u16::try_from(port).ok()?,
        ));
    }
    Some(out)
}

fn expect_ok(reply: Reply) -> Result<(), Error> {
    match reply {
        Reply::Status(_) => Ok(()),
        Reply::Error(e) => Err(Error::Server(e)),
        _ => Err(Error::Protocol),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_keys_slot_decides() {
        let call = |c: &mut ScriptCall<'_>| {
            c.key(&["router:rl:key:{", "u_1", "}:k_1:"], Some(7));
            c.key(&["other"], None);
            c.arg(3);
        };
        assert_eq!(first_key_slot(&call), key_slot(b"u_1"));
    }

    #[test]
    fn moved_names_the_new_master() {
        assert_eq!(
            moved_to("MOVED 3999 127.0.0.1:6381"),
            Some(("127.0.0.1".to_string(), 6381))
        );
        assert_eq!(moved_to("MOVED 3999"), None);
    }

    #[test]
    fn cluster_slots_reply_is_read() {
        let node = |h: &str, p: i64| {
            Reply::Array(vec![
                Reply::Bulk(Some(h.as_bytes().to_vec())),
                Reply::Integer(p),
                Reply::Bulk(Some(b"id".to_vec())),
            ])
        };
        let reply = vec![Reply::Array(vec![
            Reply::Integer(0),
            Reply::Integer(5460),
            node("127.0.0.1", 7000),
            node("127.0.0.1", 7003),
        ])];
        assert_eq!(
            parse_slots(&reply),
            Some(vec![(0, 5460, "127.0.0.1".to_string(), 7000)])
        );
    }
}
