//! Dedicated Redis connections for the limiter's one round trip per request.
//!
//! The request's own task checks a connection out, writes `EVALSHA` and reads
//! the reply itself: one write and one read, no hand-off to a driver task and
//! back (which is what a multiplexed connection costs: two extra task wake-ups,
//! often across worker threads). Idle connections wait in a small pool. A
//! connection that failed, or whose command was abandoned half-way (the
//! caller's timeout dropped the future), is closed, never reused.

use std::sync::Mutex;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use redis::{ConnectionAddr, IntoConnectionInfo};
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
}

impl Conn {
    /// Sends the command in `self.write` and reads one reply.
    async fn round_trip(&mut self) -> Result<Reply, Error> {
        self.io.write_all(&self.write).await?;
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

fn expect_ok(reply: Reply) -> Result<(), Error> {
    match reply {
        Reply::Status(_) => Ok(()),
        Reply::Error(e) => Err(Error::Server(e)),
        _ => Err(Error::Protocol),
    }
}
