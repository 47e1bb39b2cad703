use anyhow::Context;
use router::Config;

/// Keeps argon2id's 19 MiB verification buffers out of glibc's arenas.
///
/// glibc raises its mmap threshold after the first large block is freed, so
/// later 19 MiB blocks come from per-thread arenas and stay resident after
/// `free` (measured: six 57 MiB arenas, 362 MiB RSS, after 50 first-time key
/// verifications). A fixed 1 MiB threshold makes every such block a private
/// mapping that is returned to the kernel when the verification ends.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)] // the workspace's one unsafe block (Cargo.toml, [workspace.lints])
fn bound_malloc_retention() {
    const MMAP_THRESHOLD: libc::c_int = 1 << 20;
    // SAFETY: mallopt only sets an allocator tunable; it is called before
    // the runtime starts any other thread.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn bound_malloc_retention() {}

fn main() -> anyhow::Result<()> {
    let settings: router::config::Settings = service_kit::parse::args();
    bound_malloc_retention();
    let log = settings.log;
    let mut config = Config::from_settings(settings)?;
    config.metrics =
        Some(service_kit::metrics::install("router").context("install the metrics recorder")?);
    // This runtime only waits for the shutdown signal (and hosts telemetry);
    // requests are served by `router::cores`, one runtime per thread.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("start the tokio runtime")?
        .block_on(serve(config, log))
}

async fn serve(config: Config, log: service_kit::telemetry::LogSettings) -> anyhow::Result<()> {
    let _telemetry = service_kit::telemetry::init("router", &log);
    router::cores::run(config, service_kit::shutdown::signal()).await
}
