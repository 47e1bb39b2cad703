//! `control-plane`: `serve` runs the server; every other subcommand is an
//! operator command against a running control plane.

use control_plane::cli::{self, Cli, Command};
use control_plane::config::{Config, Settings};

fn main() -> std::process::ExitCode {
    let cli: Cli = cli::parse_args();
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
            Command::Serve(settings) => serve(*settings).await,
            command => cli::execute(cli.json, cli.connection, command).await,
        }
    });
    std::process::ExitCode::from(code.clamp(0, 255) as u8)
}

async fn serve(settings: Settings) -> i32 {
    let _telemetry = service_kit::telemetry::init("control-plane", &settings.log);
    let result = async {
        let mut config = Config::from_settings(settings)?;
        config.metrics = Some(service_kit::metrics::install("control-plane")?);
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
