//! Thread per core: `threads` OS threads, each with a single-threaded tokio
//! runtime, its own `SO_REUSEPORT` listener on the router's address, its own
//! Redis connections and its own pooled shard connections. A request is
//! accepted, charged, forwarded and answered on one thread, so no wake-up
//! crosses threads and no worker is woken to steal work. The caches and the
//! in-flight bound are shared (`AppState::for_another_core`); argon2id runs
//! on each runtime's blocking pool, bounded by the shared key store.
//!
//! Shutdown: every core stops accepting and drains its connections; a core
//! that is done keeps running its runtime until all are, because a pooled
//! control-plane connection lives on the runtime that opened it and another
//! core's request may be using it.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{mpsc, watch};

use crate::config::Config;
use crate::state::AppState;
use crate::{invalidate, server};

const BACKLOG: u32 = 1024;

/// See [`keep_timer_wake_near`].
const TICK: std::time::Duration = std::time::Duration::from_millis(100);

/// Binds `n` listeners to `addr` with `SO_REUSEPORT` (the kernel spreads
/// connections over them). Fails like a plain bind when something already
/// listens there: another router on the port would otherwise silently share
/// it. Port 0 picks one port for all. Must run inside a tokio runtime.
pub fn bind(addr: SocketAddr, n: usize) -> anyhow::Result<Vec<std::net::TcpListener>> {
    let mut addr = addr;
    if addr.port() != 0 {
        drop(std::net::TcpListener::bind(addr).with_context(|| format!("bind {addr}"))?);
    }
    let mut listeners = Vec::with_capacity(n.max(1));
    for _ in 0..n.max(1) {
        let listener = reuseport_listener(addr).with_context(|| format!("bind {addr}"))?;
        addr = listener.local_addr()?;
        listeners.push(listener);
    }
    Ok(listeners)
}

fn reuseport_listener(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)?.into_std()
}

/// Binds `config.threads` listeners and serves on them until `shutdown`.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let listeners = bind(config.listen, config.threads)?;
    tracing::info!(listen = %config.listen, threads = listeners.len(), "router listening");
    let page = match (&config.metrics, &config.metrics_token) {
        (Some(handle), Some(token)) => {
            let listener = tokio::net::TcpListener::bind(config.metrics_listen)
                .await
                .with_context(|| {
                    format!("bind {} (ROUTER_METRICS_LISTEN)", config.metrics_listen)
                })?;
            tracing::info!(listen = %config.metrics_listen, "metrics page listening");
            let page = crate::edge::metrics::Page::new(handle.clone(), token.clone());
            Some(tokio::spawn(page.serve(listener)))
        }
        _ => None,
    };
    let served = serve(listeners, config, shutdown).await;
    if let Some(page) = page {
        page.abort();
    }
    served
}

/// Serves one core per listener until `shutdown` resolves, then drains. An
/// error of any core (its runtime could not start) stops all of them.
pub async fn serve(
    listeners: Vec<std::net::TcpListener>,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let cores = listeners.len();
    let mut states = vec![AppState::new(config)?];
    for _ in 1..cores {
        states.push(states[0].for_another_core()?);
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let drained = Arc::new(watch::channel(0usize).0);
    let (exit_tx, mut exit_rx) = mpsc::unbounded_channel();
    let mut threads = Vec::with_capacity(cores);
    for (core, (listener, state)) in listeners.into_iter().zip(states).enumerate() {
        let (stop, drained, exit) = (stop_rx.clone(), drained.clone(), exit_tx.clone());
        let thread = std::thread::Builder::new()
            .name(format!("router-core-{core}"))
            .spawn(move || {
                let result = serve_core(core, cores, listener, state, stop, drained.clone());
                if result.is_err() {
                    // Never served: do not keep the others waiting for it.
                    drained.send_modify(|n| *n += 1);
                }
                let _ = exit.send((core, result));
            })
            .context("start a core thread")?;
        threads.push(thread);
    }
    drop(exit_tx);
    let early = tokio::select! {
        _ = shutdown => None,
        exited = exit_rx.recv() => exited,
    };
    let _ = stop_tx.send(true);
    let mut failure = None;
    if let Some((core, Err(e))) = early {
        failure = Some(e.context(format!("core {core}")));
    }
    while let Some((core, result)) = exit_rx.recv().await {
        if let (Err(e), None) = (result, &failure) {
            failure = Some(e.context(format!("core {core}")));
        }
    }
    tokio::task::spawn_blocking(move || threads.into_iter().for_each(|t| drop(t.join())))
        .await
        .ok();
    failure.map_or(Ok(()), Err)
}

fn serve_core(
    core: usize,
    cores: usize,
    listener: std::net::TcpListener,
    state: AppState,
    mut stop: watch::Receiver<bool>,
    drained: Arc<watch::Sender<usize>>,
) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("start the core's runtime")?;
    runtime.block_on(async move {
        let listener = TcpListener::from_std(listener).context("register the listener")?;
        let state = Arc::new(state);
        // One subscription and one heartbeat per process: invalidations
        // apply to shared caches, the router id is the process's.
        let subscriber = (core == 0).then(|| tokio::spawn(invalidate::run(state.clone())));
        let heartbeat = (core == 0).then(|| tokio::spawn(state.registry.clone().heartbeat()));
        let ticker = tokio::spawn(keep_timer_wake_near());
        let stopped = async move {
            let _ = stop.wait_for(|stop| *stop).await;
        };
        server::serve(listener, state.clone(), stopped).await;
        if let Some(s) = subscriber {
            s.abort();
        }
        if let Some(h) = heartbeat {
            h.abort();
            state.registry.leave().await;
        }
        ticker.abort();
        drained.send_modify(|n| *n += 1);
        let _ = drained.subscribe().wait_for(|n| *n >= cores).await;
        Ok(())
    })
}

/// Keeps a timer due within [`TICK`] at all times. tokio's timer interrupts
/// the runtime's driver (a write to its eventfd, then an extra `epoll_wait`)
/// whenever a timer is registered that is due before the driver's planned
/// wake-up; every request registers two (the limiter's 250 ms Redis timeout
/// and hyper's 30 s header-read timeout of the next request), and with only
/// 30 s timers pending each would be the earliest. With a timer always due
/// within 100 ms they never are: ten wake-ups a second instead of two
/// syscalls per request.
async fn keep_timer_wake_near() {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
    }
}
