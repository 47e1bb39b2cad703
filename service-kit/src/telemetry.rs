//! Tracing set-up shared by the three binaries: log lines as text or JSON
//! (`LOG_FORMAT`), filtered by `RUST_LOG`, the access-log switch
//! (`ACCESS_LOG`, read by [`crate::metrics::Measured`]), plus OpenTelemetry
//! export over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
//!
//! A JSON line is one object: `timestamp`, `level`, `target`, the event's
//! fields (`message` among them), and inside a span its name (`span`) and
//! the OpenTelemetry `trace_id` and `span_id`. The ids exist whenever spans
//! are exported or the format is JSON (an OpenTelemetry layer without an
//! exporter then gives spans their ids), so a log line can be found from a
//! trace and the other way round.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::TracerProvider as _;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{layer::SubscriberExt, util::SubscriberInitExt, EnvFilter};

use crate::parse;

/// How log lines are written (`LOG_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines (the default).
    #[default]
    Text,
    /// One JSON object a line, with `trace_id` and `span_id` inside a span.
    Json,
}

impl LogFormat {
    /// `text` or `json` (any case): `LOG_FORMAT`'s parser.
    pub fn parse(text: &str) -> anyhow::Result<LogFormat> {
        match text.trim().to_ascii_lowercase().as_str() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => anyhow::bail!("{other:?} is neither text nor json"),
        }
    }
}

/// The logging settings every service has (flattened into its clap
/// `Settings`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args)]
pub struct LogSettings {
    /// Log lines: `text`, or `json` (one object a line, with the trace id).
    #[arg(long, env = "LOG_FORMAT", default_value = "text", value_parser = LogFormat::parse)]
    pub log_format: LogFormat,
    /// One log line per request (method, route template, status,
    /// duration_ms, database_id): `on` or `off`.
    #[arg(long, env = "ACCESS_LOG", default_value = "on", value_parser = parse::on_off, action = clap::ArgAction::Set)]
    pub access_log: bool,
}

impl Default for LogSettings {
    fn default() -> Self {
        Self {
            log_format: LogFormat::Text,
            access_log: true,
        }
    }
}

static ACCESS_LOG: AtomicBool = AtomicBool::new(false);
static TRACED: AtomicBool = AtomicBool::new(false);

/// Whether every request is logged (`ACCESS_LOG=on` and [`init`] ran).
pub fn access_log() -> bool {
    ACCESS_LOG.load(Ordering::Relaxed)
}

/// Whether spans carry OpenTelemetry contexts (an OpenTelemetry layer is
/// installed): spans are exported, or logged with their ids.
pub fn traced() -> bool {
    TRACED.load(Ordering::Relaxed)
}

/// Keeps the exporter alive; flushes spans when dropped.
pub struct TelemetryGuard {
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take() {
            let _ = p.shutdown();
        }
    }
}

/// Installs the process's subscriber; call once, first thing in `main`.
pub fn init(service: &'static str, log: &LogSettings) -> TelemetryGuard {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Plain text when logging to a file (the dev cluster's logs are grepped).
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let json = log.log_format == LogFormat::Json;
    let text_layer = (!json).then(|| {
        tracing_subscriber::fmt::layer()
            .with_target(false)
            .with_ansi(ansi)
    });
    let json_layer = json.then(|| tracing_subscriber::fmt::layer().event_format(JsonLines));
    let exporting = std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_some();
    let (provider, exporter_error) = provider(service, exporting, json);
    let otel = provider
        .as_ref()
        .map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer(service)));
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(text_layer)
        .with(json_layer)
        .with(otel)
        .try_init();
    if let Some(e) = exporter_error {
        tracing::error!(
            error = %e,
            "could not build the OTLP span exporter (OTEL_EXPORTER_OTLP_ENDPOINT): spans are not exported"
        );
    }
    TRACED.store(provider.is_some(), Ordering::Relaxed);
    ACCESS_LOG.store(log.access_log, Ordering::Relaxed);
    TelemetryGuard { provider }
}

/// The tracer provider: exporting over OTLP/HTTP when asked to, else one
/// without an exporter when JSON lines need span ids, else none. An
/// exporter that cannot be built is returned as the error, to be logged.
fn provider(
    service: &'static str,
    exporting: bool,
    json: bool,
) -> (
    Option<opentelemetry_sdk::trace::SdkTracerProvider>,
    Option<opentelemetry_otlp::ExporterBuildError>,
) {
    let resource = || {
        opentelemetry_sdk::Resource::builder()
            .with_service_name(service)
            .with_attribute(opentelemetry::KeyValue::new(
                "service.version",
                env!("CARGO_PKG_VERSION"),
            ))
            .build()
    };
    let mut error = None;
    if exporting {
        match opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .build()
        {
            Ok(exporter) => {
                let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
                    .with_batch_exporter(exporter)
                    .with_resource(resource())
                    .build();
                return (Some(provider), None);
            }
            Err(e) => error = Some(e),
        }
    }
    let provider = json.then(|| {
        opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_resource(resource())
            .build()
    });
    (provider, error)
}

/// The JSON line format (`LOG_FORMAT=json`).
struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let meta = event.metadata();
        let mut line = serde_json::Map::new();
        line.insert(
            "timestamp".into(),
            chrono::Utc::now()
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
                .into(),
        );
        line.insert("level".into(), meta.level().as_str().into());
        line.insert("target".into(), meta.target().into());
        event.record(&mut Fields(&mut line));
        if let Some(span) = ctx.lookup_current() {
            line.insert("span".into(), span.name().into());
            let ids = span.scope().find_map(|s| {
                let ext = s.extensions();
                let otel = ext.get::<tracing_opentelemetry::OtelData>()?;
                Some((otel.trace_id()?, otel.span_id()?))
            });
            if let Some((trace_id, span_id)) = ids {
                line.insert("trace_id".into(), trace_id.to_string().into());
                line.insert("span_id".into(), span_id.to_string().into());
            }
        }
        let text = serde_json::to_string(&line).map_err(|_| std::fmt::Error)?;
        writeln!(writer, "{text}")
    }
}

/// An event's fields as JSON values.
struct Fields<'a>(&'a mut serde_json::Map<String, serde_json::Value>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_settings_default_to_text_with_access_log() {
        let s = parse::try_args_only::<LogSettings, _, _>(["x"]).unwrap();
        assert_eq!(s, LogSettings::default());
        let s = parse::try_args_only::<LogSettings, _, _>([
            "x",
            "--log-format=json",
            "--access-log=off",
        ])
        .unwrap();
        assert_eq!(s.log_format, LogFormat::Json);
        assert!(!s.access_log);
    }

    #[test]
    fn log_formats() {
        assert_eq!(LogFormat::parse(" JSON").unwrap(), LogFormat::Json);
        assert_eq!(LogFormat::parse("text").unwrap(), LogFormat::Text);
        assert!(LogFormat::parse("xml").is_err());
    }
}
