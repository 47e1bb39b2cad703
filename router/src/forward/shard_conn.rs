//! Keep-alive HTTP/1 connections to the shard nodes, one pool per core.
//!
//! A connection's task runs on the core that opened it, and only that core's
//! requests use it. After a response's head arrives the connection goes back
//! to the pool at once; it is taken again only once hyper says it is ready
//! (the previous response body has been read to the end). A connection that
//! closed is dropped when met; one unused for [`IDLE_TIMEOUT`] too. A request
//! that a reused connection refused before writing anything (it had just
//! closed) is sent again on a new connection.
//!
//! This replaces `hyper_util`'s pooled client, which per request locked a
//! shared pool, hashed the URI's authority, and for a response with a body
//! spawned one more task to put the connection back once the body was read.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::{header, HeaderValue, Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpSocket;

use crate::errors::Body;
use crate::forward::stream_body::Progress;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// A connection unused this long is closed instead of reused.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("shard url {0:?} is not http://host[:port]")]
    Url(String),
    #[error("connect to {0}: {1}")]
    Connect(String, std::io::Error),
    #[error("connect to {0}: timed out")]
    ConnectTimeout(String),
    /// No response head within the router's shard timeout.
    #[error("{0} did not answer within {1:?}")]
    Timeout(String, Duration),
    #[error(transparent)]
    Http(#[from] hyper::Error),
}

struct Conn {
    sender: SendRequest<Body>,
    last_used: Instant,
}

/// One shard's connections, by the URL the control plane gave.
struct Shard {
    url: String,
    /// `host:port`, to connect to and to send as `Host`.
    authority: String,
    host: HeaderValue,
    conns: Vec<Conn>,
}

pub struct ShardPool {
    shards: Mutex<Vec<Shard>>,
    max_idle_per_shard: usize,
    /// How long a response head may take, connecting included.
    response_timeout: Duration,
}

impl ShardPool {
    pub fn new(max_idle_per_shard: usize, response_timeout: Duration) -> Self {
        Self {
            shards: Mutex::default(),
            max_idle_per_shard,
            response_timeout,
        }
    }

    /// Sends `req` (origin-form URI, no `Host`) to the shard at `shard_url`.
    /// A shard that has not answered within the response timeout is left
    /// ([`Error::Timeout`]): its connection is dropped, not pooled, so the
    /// shard sees the request abandoned and cancels its work.
    pub async fn send(
        &self,
        shard_url: &str,
        req: Request<Body>,
    ) -> Result<Response<Incoming>, Error> {
        tokio::time::timeout(self.response_timeout, self.send_now(shard_url, req))
            .await
            .unwrap_or_else(|_| Err(Error::Timeout(shard_url.to_string(), self.response_timeout)))
    }

    /// Like [`ShardPool::send`] for a request whose body streams from the
    /// client while it is sent: the response timeout counts from when the
    /// body is over (a long upload at a steady pace is not cut off; the
    /// client's pace is bounded by the body's own idle timeout). A shard
    /// that stops reading the body for the response timeout is left too.
    pub async fn send_streamed(
        &self,
        shard_url: &str,
        req: Request<Body>,
        progress: &Progress,
    ) -> Result<Response<Incoming>, Error> {
        let timeout = || Err(Error::Timeout(shard_url.to_string(), self.response_timeout));
        let send = self.send_now(shard_url, req);
        tokio::pin!(send);
        while !progress.is_over() {
            let stalled = progress.last_activity() + self.response_timeout;
            tokio::select! {
                sent = &mut send => return sent,
                () = progress.over() => break,
                () = tokio::time::sleep_until(stalled) => {
                    if progress.last_activity() + self.response_timeout <= tokio::time::Instant::now() {
                        return timeout();
                    }
                }
            }
        }
        tokio::time::timeout(self.response_timeout, send)
            .await
            .unwrap_or_else(|_| timeout())
    }

    async fn send_now(
        &self,
        shard_url: &str,
        mut req: Request<Body>,
    ) -> Result<Response<Incoming>, Error> {
        let (reused, host) = self.checkout(shard_url)?;
        req.headers_mut().insert(header::HOST, host);
        if let Some(mut sender) = reused {
            match sender.try_send_request(req).await {
                Ok(resp) => {
                    self.checkin(shard_url, sender);
                    return Ok(resp);
                }
                Err(mut e) => match e.take_message() {
                    // Refused before anything was written: it had closed.
                    Some(unsent) => req = unsent,
                    None => return Err(e.into_error().into()),
                },
            }
        }
        let mut sender = connect(&self.authority(shard_url)).await?;
        sender.ready().await?;
        let resp = sender.send_request(req).await?;
        self.checkin(shard_url, sender);
        Ok(resp)
    }

    /// A ready connection to the shard if one is idle, and the shard's
    /// `Host` value.
    fn checkout(&self, shard_url: &str) -> Result<(Option<SendRequest<Body>>, HeaderValue), Error> {
        let mut shards = self.shards.lock().unwrap_or_else(|p| p.into_inner());
        let shard = match shards.iter().position(|s| s.url == shard_url) {
            Some(i) => &mut shards[i],
            None => {
                shards.push(Shard::parse(shard_url)?);
                shards.last_mut().expect("just pushed")
            }
        };
        let now = Instant::now();
        shard.conns.retain(|c| {
            !c.sender.is_closed() && now.saturating_duration_since(c.last_used) < IDLE_TIMEOUT
        });
        let ready = shard.conns.iter().rposition(|c| c.sender.is_ready());
        let sender = ready.map(|i| shard.conns.swap_remove(i).sender);
        Ok((sender, shard.host.clone()))
    }

    /// `host:port` of a shard [`ShardPool::checkout`] has seen.
    fn authority(&self, shard_url: &str) -> String {
        let shards = self.shards.lock().unwrap_or_else(|p| p.into_inner());
        shards
            .iter()
            .find(|s| s.url == shard_url)
            .map(|s| s.authority.clone())
            .unwrap_or_default()
    }

    fn checkin(&self, shard_url: &str, sender: SendRequest<Body>) {
        let mut shards = self.shards.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(shard) = shards.iter_mut().find(|s| s.url == shard_url) {
            if shard.conns.len() < self.max_idle_per_shard {
                shard.conns.push(Conn {
                    sender,
                    last_used: Instant::now(),
                });
            }
        }
    }
}

impl Shard {
    fn parse(url: &str) -> Result<Self, Error> {
        let bad = || Error::Url(url.to_string());
        let uri: Uri = url.parse().map_err(|_| bad())?;
        if uri.scheme_str() != Some("http") {
            return Err(bad());
        }
        let authority = uri.authority().ok_or_else(bad)?;
        let authority = match authority.port_u16() {
            Some(_) => authority.as_str().to_string(),
            None => format!("{}:80", authority.host()),
        };
        Ok(Self {
            url: url.to_string(),
            host: HeaderValue::try_from(authority.as_str()).map_err(|_| bad())?,
            authority,
            conns: Vec::new(),
        })
    }
}

/// Opens a connection and starts its task on this core's runtime.
async fn connect(authority: &str) -> Result<SendRequest<Body>, Error> {
    let failed = |e| Error::Connect(authority.to_string(), e);
    let open = async {
        let mut last = None;
        for addr in tokio::net::lookup_host(authority).await.map_err(failed)? {
            let socket = if addr.is_ipv4() {
                TcpSocket::new_v4()
            } else {
                TcpSocket::new_v6()
            }
            .map_err(failed)?;
            socket.set_keepalive(true).map_err(failed)?;
            match socket.connect(addr).await {
                Ok(stream) => return Ok(stream),
                Err(e) => last = Some(e),
            }
        }
        Err(failed(last.unwrap_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::NotFound, "no address")
        })))
    };
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, open)
        .await
        .map_err(|_| Error::ConnectTimeout(authority.to_string()))??;
    stream.set_nodelay(true).map_err(failed)?;
    let (sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "shard connection ended with an error");
        }
    });
    Ok(sender)
}
