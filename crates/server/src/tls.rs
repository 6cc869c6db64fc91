//! TLS termination with rustls (ring): PEM loading. Handshakes run in each connection's
//! own task under `server.header_read_timeout_ms` (see `conn`), so a slow client never
//! blocks `accept`.

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;

/// Why the TLS material could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The certificate file could not be read or parsed.
    #[error("cannot read the certificate {}", path.display())]
    Certificate {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// The certificate file holds no certificate.
    #[error("{}: no certificate found", path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// The key file could not be read or parsed.
    #[error("cannot read the private key {}", path.display())]
    Key {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// rustls refused the certificate and key (e.g. a key that does not match).
    #[error("invalid certificate or key")]
    Config(#[source] tokio_rustls::rustls::Error),
}

/// Builds the acceptor from PEM files.
pub(crate) fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let cert_err = |source| TlsError::Certificate {
        path: cert.to_path_buf(),
        source,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(cert_err)?
        .collect::<Result<_, _>>()
        .map_err(cert_err)?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: cert.to_path_buf(),
        });
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|source| TlsError::Key {
        path: key.to_path_buf(),
        source,
    })?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(TlsError::Config)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
