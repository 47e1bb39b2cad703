//! TLS of the control plane's own PostgreSQL connections: its catalog and
//! the mover's administrator sessions on shard instances
//! (`CONTROL_PLANE_PG_SSLMODE`, libpq's modes; unset, each DSN's own
//! `sslmode=disable|prefer|require` holds, `prefer` when it names none):
//!
//! * `disable`: plain TCP;
//! * `prefer`: TLS when the server offers it, else plain; the server's
//!   certificate is not checked;
//! * `require`: TLS or no connection; the certificate is not checked
//!   (encryption against a passive listener only, as in libpq);
//! * `verify-full`: TLS, the certificate must chain to
//!   `CONTROL_PLANE_PG_SSLROOTCERT` (PEM) and name the DSN's host.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use anyhow::{bail, Context};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

/// libpq's `sslmode` values the control plane supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyFull,
}

impl FromStr for SslMode {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Self> {
        Ok(match s.trim() {
            "disable" => Self::Disable,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-full" => Self::VerifyFull,
            other => bail!(
                "CONTROL_PLANE_PG_SSLMODE must be disable, prefer, require or verify-full, not {other:?}"
            ),
        })
    }
}

/// The connector every control-plane PostgreSQL connection is made with.
#[derive(Clone)]
pub struct PgTls {
    /// `None`: each DSN's own `sslmode`.
    mode: Option<SslMode>,
    connector: tokio_rustls::TlsConnector,
}

impl std::fmt::Debug for PgTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PgTls({:?})", self.mode)
    }
}

impl Default for PgTls {
    /// Each DSN's own `sslmode` (tokio-postgres's default: `prefer`).
    fn default() -> Self {
        Self::new(None, None).expect("no mode needs no certificate")
    }
}

impl PgTls {
    /// `root_cert` (a PEM file) is required by `verify-full` and used only there.
    pub fn new(mode: Option<SslMode>, root_cert: Option<&str>) -> anyhow::Result<Self> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?;
        let config = if mode == Some(SslMode::VerifyFull) {
            let path = root_cert.filter(|p| !p.is_empty()).context(
                "CONTROL_PLANE_PG_SSLMODE=verify-full needs CONTROL_PLANE_PG_SSLROOTCERT (a PEM file)",
            )?;
            builder
                .with_root_certificates(root_store(path)?)
                .with_no_client_auth()
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Unverified(provider)))
                .with_no_client_auth()
        };
        Ok(Self {
            mode,
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
        })
    }

    /// Sets a connection's TLS negotiation to the configured mode, which
    /// wins over the DSN's own `sslmode`; with none, the DSN's holds.
    pub fn apply(&self, cfg: &mut tokio_postgres::Config) {
        let Some(mode) = self.mode else {
            return;
        };
        cfg.ssl_mode(match mode {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyFull => tokio_postgres::config::SslMode::Require,
        });
    }
}

fn root_store(path: &str) -> anyhow::Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path)
        .with_context(|| format!("read CONTROL_PLANE_PG_SSLROOTCERT {path}"))?
    {
        let cert = cert.with_context(|| format!("parse CONTROL_PLANE_PG_SSLROOTCERT {path}"))?;
        roots
            .add(cert)
            .with_context(|| format!("a certificate of {path}"))?;
    }
    if roots.is_empty() {
        bail!("CONTROL_PLANE_PG_SSLROOTCERT {path} holds no certificate");
    }
    Ok(roots)
}

/// `prefer` and `require`: the handshake's signatures are checked, the
/// certificate is not (libpq's semantics of those modes).
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

impl<S> MakeTlsConnect<S> for PgTls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> io::Result<RustlsConnect> {
        let name = match ServerName::try_from(domain.to_owned()) {
            Ok(name) => name,
            // A Unix socket has no name; nothing checks it but verify-full.
            Err(_) if self.mode != Some(SslMode::VerifyFull) => {
                ServerName::try_from("localhost")
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?
            }
            Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidInput, e)),
        };
        Ok(RustlsConnect {
            connector: self.connector.clone(),
            name,
        })
    }
}

pub struct RustlsConnect {
    connector: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
}

impl<S> TlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let tls = self.connector.connect(self.name, stream).await?;
            Ok(RustlsStream(tls))
        })
    }
}

/// A TLS session to PostgreSQL (no channel binding: SCRAM without `-PLUS`).
pub struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for RustlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_as_libpq_spells_them() {
        assert_eq!("disable".parse::<SslMode>().unwrap(), SslMode::Disable);
        assert_eq!("prefer".parse::<SslMode>().unwrap(), SslMode::Prefer);
        assert_eq!("require".parse::<SslMode>().unwrap(), SslMode::Require);
        assert_eq!(
            "verify-full".parse::<SslMode>().unwrap(),
            SslMode::VerifyFull
        );
        assert!("verify-ca".parse::<SslMode>().is_err());
        assert!("on".parse::<SslMode>().is_err());
    }

    #[test]
    fn verify_full_needs_a_root_certificate() {
        assert!(PgTls::new(Some(SslMode::VerifyFull), None).is_err());
        assert!(PgTls::new(Some(SslMode::VerifyFull), Some("/nonexistent/root.pem")).is_err());
        assert!(PgTls::new(Some(SslMode::Require), None).is_ok());
    }

    #[test]
    fn the_mode_overrides_the_dsn() {
        let mut cfg: tokio_postgres::Config = "postgres://u@h/db?sslmode=disable".parse().unwrap();
        PgTls::default().apply(&mut cfg);
        assert_eq!(
            cfg.get_ssl_mode(),
            tokio_postgres::config::SslMode::Disable,
            "unset, the DSN's holds"
        );
        PgTls::new(Some(SslMode::Require), None)
            .unwrap()
            .apply(&mut cfg);
        assert_eq!(cfg.get_ssl_mode(), tokio_postgres::config::SslMode::Require);
        PgTls::new(Some(SslMode::Disable), None)
            .unwrap()
            .apply(&mut cfg);
        assert_eq!(cfg.get_ssl_mode(), tokio_postgres::config::SslMode::Disable);
    }
}
