//! TLS material: PEM certificate chains, private keys and CA bundles read from
//! files into rustls types, and the client configurations eragate dials HTTPS
//! upstreams with. Everything uses the ring provider, the only one eragate is
//! built with (two providers in one process make rustls panic), through
//! `builder_with_provider`. No sockets here: the edge and the upstream
//! transports own those.

use std::path::Path;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, RootCertStore};

/// Largest PEM file read (a public CA bundle is about 250 KiB).
const MAX_PEM_BYTES: u64 = 4 * 1024 * 1024;

/// Why TLS material could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TlsError {
    /// The file could not be read.
    #[error("cannot read {path}: {reason}")]
    Unreadable {
        /// The file.
        path: String,
        /// The operating system's or the size check's reason.
        reason: String,
    },
    /// The file holds no PEM item of the expected kind, or a malformed one.
    #[error("{path}: {reason}")]
    Malformed {
        /// The file.
        path: String,
        /// What was expected.
        reason: String,
    },
    /// The key cannot be used with the certificate (another key pair, or an unsupported kind).
    #[error("{reason}")]
    Unusable {
        /// What rustls said, with both files named.
        reason: String,
    },
}

/// The ring provider, the one every TLS configuration in eragate is built with.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    let unreadable = |reason: String| TlsError::Unreadable {
        path: path.display().to_string(),
        reason,
    };
    let length = std::fs::metadata(path).map_err(|e| unreadable(e.to_string()))?.len();
    if length > MAX_PEM_BYTES {
        return Err(unreadable(format!("larger than {MAX_PEM_BYTES} bytes")));
    }
    std::fs::read(path).map_err(|e| unreadable(e.to_string()))
}

/// Every certificate in the PEM file at `path`, in order (leaf first for a chain).
pub(crate) fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let malformed = |reason: String| TlsError::Malformed {
        path: path.display().to_string(),
        reason,
    };
    let certificates = CertificateDer::pem_slice_iter(&read(path)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| malformed(format!("not a PEM certificate file ({e})")))?;
    if certificates.is_empty() {
        return Err(malformed("no CERTIFICATE block found".into()));
    }
    Ok(certificates)
}

/// The private key in the PEM file at `path` (PKCS#8, PKCS#1 or SEC1).
pub(crate) fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(&read(path)?).map_err(|e| TlsError::Malformed {
        path: path.display().to_string(),
        reason: format!("no usable PRIVATE KEY block ({e})"),
    })
}

/// The chain in `cert` with the key in `key`, checked to belong together.
pub(crate) fn certified_key(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let chain = certificates(cert)?;
    let private = private_key(key)?;
    CertifiedKey::from_der(chain, private, &provider()).map_err(|e| TlsError::Unusable {
        reason: format!(
            "the key in {} cannot serve the certificate in {} ({e})",
            key.display(),
            cert.display()
        ),
    })
}

/// The certificates in the PEM file at `ca`, as the only trusted roots.
pub(crate) fn roots(ca: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for certificate in certificates(ca)? {
        roots.add(certificate).map_err(|e| TlsError::Malformed {
            path: ca.display().to_string(),
            reason: format!("not a usable CA certificate ({e})"),
        })?;
    }
    Ok(roots)
}

/// The public web PKI roots compiled into eragate (Mozilla's list).
pub(crate) fn public_roots() -> RootCertStore {
    RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    }
}

/// A client configuration that trusts no server: every handshake fails.
pub(crate) fn trusting_nothing() -> ClientConfig {
    ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        // ring implements TLS 1.2 and 1.3 with the default cipher suites: never fails.
        .expect("ring supports the default protocol versions")
        .with_root_certificates(RootCertStore::empty())
        .with_no_client_auth()
}

/// What an HTTPS client trusts and presents.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ClientTls<'a> {
    /// A PEM bundle trusted instead of the public roots.
    pub(crate) ca: Option<&'a Path>,
    /// A client certificate chain and its key (mutual TLS).
    pub(crate) identity: Option<(&'a Path, &'a Path)>,
}

impl ClientTls<'_> {
    /// The rustls client configuration (ALPN is left to the connector).
    pub(crate) fn config(&self) -> Result<ClientConfig, TlsError> {
        let roots = match self.ca {
            Some(ca) => roots(ca)?,
            None => public_roots(),
        };
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Unusable { reason: e.to_string() })?
            .with_root_certificates(roots);
        match self.identity {
            None => Ok(builder.with_no_client_auth()),
            Some((cert, key)) => {
                // Checked together first, so a mismatch names both files.
                certified_key(cert, key)?;
                builder
                    .with_client_auth_cert(certificates(cert)?, private_key(key)?)
                    .map_err(|e| TlsError::Unusable {
                        reason: format!("client certificate {}: {e}", cert.display()),
                    })
            }
        }
    }
}
