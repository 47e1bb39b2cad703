use anyhow::Context;
use shard_node::config::Config;

/// mimalloc instead of glibc malloc: a records page allocates and frees
/// thousands of small strings and JSON nodes, and glibc's malloc/free
/// (`malloc_consolidate`, `_int_free`) was a quarter of the node's CPU
/// profile under load (loadtest/README.md, records).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _telemetry = cluster_protocol::telemetry::init("shard-node");
    let mut config = Config::from_env()?;
    config.metrics =
        Some(cluster_protocol::metrics::install().context("install the metrics recorder")?);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("bind {}", config.listen))?;
    if let Err(e) = shard_node::run(config, listener).await {
        tracing::error!(error = format!("{e:#}"), "shard node failed");
        return Err(e);
    }
    Ok(())
}
