//! A PostgreSQL `LISTEN` session that wakes a background worker: every
//! notification on the channel (and each (re)connect, for what was missed
//! while it was down) calls `notify_one` on the worker's [`Notify`]. The
//! session is reopened, after a pause, whenever it fails or closes.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;
use tokio_postgres::{AsyncMessage, Client, Connection};

/// Keeps `LISTEN <channel>` open forever on sessions from `connect`,
/// waking `wake`. `worker` names the worker in the log
/// (`"<worker>: LISTEN session closed; reopening"`); `backoff` is the pause
/// before reopening. `channel` is a fixed identifier, never user input.
pub async fn keep_listening<S, T, F, Fut>(
    worker: &'static str,
    channel: &'static str,
    connect: F,
    wake: Arc<Notify>,
    backoff: Duration,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(Client, Connection<S, T>), tokio_postgres::Error>>,
{
    loop {
        match listen_once(channel, connect().await, &wake).await {
            Ok(()) => tracing::warn!("{worker}: LISTEN session closed; reopening"),
            Err(e) => tracing::warn!(error = %e, "{worker}: LISTEN session failed"),
        }
        tokio::time::sleep(backoff).await;
    }
}

/// One session: listens until the connection ends.
async fn listen_once<S, T>(
    channel: &str,
    session: Result<(Client, Connection<S, T>), tokio_postgres::Error>,
    wake: &Arc<Notify>,
) -> Result<(), tokio_postgres::Error>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (client, mut connection) = session?;
    let notify = wake.clone();
    let driver = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(_))) => notify.notify_one(),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            }
        }
    });
    if let Err(e) = client.batch_execute(&format!("LISTEN {channel}")).await {
        driver.abort();
        return Err(e);
    }
    wake.notify_one();
    let ended = driver.await;
    drop(client);
    match ended {
        Ok(result) => result,
        Err(_) => Ok(()),
    }
}
