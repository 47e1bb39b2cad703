//! `control-plane`: `serve` runs the server; every other subcommand is an
//! operator command against a running control plane.

use clap::Parser;
use control_plane::cli::{self, Cli, Command};
use control_plane::config::Config;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: start runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(async move {
        match cli.command {
            Command::Serve => serve().await,
            command => cli::execute(cli.json, command).await,
        }
    });
    std::process::ExitCode::from(code.clamp(0, 255) as u8)
}

async fn serve() -> i32 {
    let _telemetry = cluster_protocol::telemetry::init("control-plane");
    let result = async {
        let mut config = Config::from_env()?;
        config.metrics = Some(cluster_protocol::metrics::install()?);
        let listener = tokio::net::TcpListener::bind(config.listen).await?;
        control_plane::run(config, listener).await
    }
    .await;
    match result {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "control plane stopped");
            eprintln!("error: {e:#}");
            1
        }
    }
}
