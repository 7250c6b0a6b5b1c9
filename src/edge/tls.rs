//! TLS on the client listener: the acceptor (HTTP/1.1 and h2 offered by ALPN
//! on the same port) and the certificate it presents, swapped in place when
//! the files change. A connection keeps the certificate it shook hands with;
//! only new handshakes see a new one. A pair that does not load (unreadable,
//! malformed, key and certificate not matching, a half-written rotation) is
//! refused and logged, and the current one stays.
//!
//! The files are polled (modification time and size, every
//! `listen.tls.reload_interval`) rather than watched with inotify: Kubernetes
//! and cert-manager rotate a mounted Secret by swapping a `..data` symlink,
//! which a watch on the file itself misses, and a poll needs no dependency and
//! works on every filesystem. Two `stat` calls every few seconds cost nothing.

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use rustls::ServerConfig;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::config::ListenTlsConfig;
use crate::tls::{self, TlsError};

/// The ALPN protocols offered, most preferred first.
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// What a poll found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Reload {
    /// The files did not change since the last look.
    Unchanged,
    /// A new certificate is served to new connections.
    Loaded,
    /// The files changed but do not load; the current certificate stays.
    Refused(String),
}

/// The certificate new handshakes get, and the files it came from.
pub(crate) struct Certificates {
    current: ArcSwap<CertifiedKey>,
    cert: PathBuf,
    key: PathBuf,
    /// The files' stamp at the last attempt (loaded or refused), so one bad
    /// pair is logged once, not at every poll.
    seen: Mutex<Option<Stamp>>,
}

/// What tells a changed file from an unchanged one without reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    cert: (Option<SystemTime>, u64),
    key: (Option<SystemTime>, u64),
}

impl Certificates {
    /// Loads the pair named by `config`.
    pub(crate) fn load(config: &ListenTlsConfig) -> Result<Arc<Certificates>, TlsError> {
        let seen = Stamp::of(&config.cert, &config.key);
        let current = tls::certified_key(&config.cert, &config.key)?;
        Ok(Arc::new(Certificates {
            current: ArcSwap::from_pointee(current),
            cert: config.cert.clone(),
            key: config.key.clone(),
            seen: Mutex::new(seen),
        }))
    }

    /// Loads the files again when they changed since the last look (`force`: even if not).
    pub(crate) fn reload(&self, force: bool) -> Reload {
        let stamp = Stamp::of(&self.cert, &self.key);
        {
            let mut seen = self.seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if !force && *seen == stamp {
                return Reload::Unchanged;
            }
            *seen = stamp;
        }
        match tls::certified_key(&self.cert, &self.key) {
            Ok(key) => {
                self.current.store(Arc::new(key));
                Reload::Loaded
            }
            Err(error) => Reload::Refused(error.to_string()),
        }
    }

    /// Polls the files every `every` until `stop`, logging what changed.
    pub(crate) fn spawn_watch(self: &Arc<Self>, every: Duration, stop: CancellationToken) {
        if every.is_zero() {
            return;
        }
        let certificates = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(every);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticker.tick() => {}
                    () = stop.cancelled() => return,
                }
                let Some(certificates) = certificates.upgrade() else {
                    return;
                };
                certificates.reload_logged(false);
            }
        });
    }

    /// [`Certificates::reload`], logged.
    pub(crate) fn reload_logged(&self, force: bool) -> Reload {
        let outcome = self.reload(force);
        match &outcome {
            Reload::Unchanged => {}
            Reload::Loaded => {
                tracing::info!(cert = %self.cert.display(), "TLS certificate reloaded; new connections get it")
            }
            Reload::Refused(error) => tracing::error!(
                cert = %self.cert.display(),
                %error,
                "new TLS certificate refused; still serving the current one"
            ),
        }
        outcome
    }
}

impl Stamp {
    fn of(cert: &std::path::Path, key: &std::path::Path) -> Option<Stamp> {
        let one = |path: &std::path::Path| std::fs::metadata(path).ok().map(|m| (m.modified().ok(), m.len()));
        Some(Stamp {
            cert: one(cert)?,
            key: one(key)?,
        })
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

impl fmt::Debug for Certificates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Certificates")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// The acceptor for `certificates`: TLS 1.2 and 1.3, ALPN h2 then http/1.1.
pub(crate) fn acceptor(certificates: Arc<Certificates>) -> Result<TlsAcceptor, TlsError> {
    let mut config = ServerConfig::builder_with_provider(tls::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Unusable { reason: e.to_string() })?
        .with_no_client_auth()
        .with_cert_resolver(certificates);
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(TlsAcceptor::from(Arc::new(config)))
}
