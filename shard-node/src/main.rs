use anyhow::Context;
use shard_node::config::Config;

/// mimalloc instead of glibc malloc: a records page allocates and frees
/// thousands of small strings and JSON nodes, and glibc's malloc/free
/// (`malloc_consolidate`, `_int_free`) was a quarter of the node's CPU
/// profile under load (docs/performance.md, "Records").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    // Parsed before the runtime starts: `--help` and `--version` print and
    // exit without starting anything.
    let settings: shard_node::settings::Settings = service_kit::parse::args();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("start the tokio runtime")?
        .block_on(serve(settings))
}

async fn serve(settings: shard_node::settings::Settings) -> anyhow::Result<()> {
    let _telemetry = service_kit::telemetry::init("shard-node", &settings.log);
    let mut config = Config::from_settings(settings)?;
    config.metrics =
        Some(service_kit::metrics::install("shard-node").context("install the metrics recorder")?);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("bind {}", config.listen))?;
    if let Err(e) = shard_node::run(config, listener).await {
        tracing::error!(error = format!("{e:#}"), "shard node failed");
        return Err(e);
    }
    Ok(())
}
