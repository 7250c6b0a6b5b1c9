//! The issuer's metadata and signing keys, fetched and kept fresh: discovery and
//! the JWKS at start (retried in the background while the issuer is unreachable),
//! kept for as long as the JWKS response's `Cache-Control` allows (clamped),
//! refreshed in the background once stale, and refetched at once for an unknown
//! `kid`, at most once per `jwks_min_refetch`.
//!
//! A request never waits on the network except for the first load and for a
//! rate-limited refetch; both are single-flight behind one async gate.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use jsonwebtoken::Algorithm;
use tokio::time::Instant;

use super::discovery::{self, IssuerMetadata};
use super::fetch::Fetcher;
use super::jwt::KeySet;

/// Keys without cache headers are kept this long.
const DEFAULT_FRESHNESS: Duration = Duration::from_secs(300);
/// Bounds on what a `max-age` can ask for.
const MIN_FRESHNESS: Duration = Duration::from_secs(30);
const MAX_FRESHNESS: Duration = Duration::from_secs(24 * 3600);
/// The longest wait between two start-up attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The keys (and metadata) of one issuer.
pub(crate) struct KeyStore {
    fetcher: Fetcher,
    issuer: String,
    allowed: Vec<Algorithm>,
    min_refetch: Duration,
    /// What was loaded last. A std lock: held only to clone or swap an `Arc`, never across `.await`.
    loaded: RwLock<Option<Arc<Loaded>>>,
    /// Serialises fetches, and remembers when the last one started (the rate limit).
    gate: tokio::sync::Mutex<Option<Instant>>,
    /// The issuer is eragate's own authorization server, which publishes its keys
    /// here ([`KeyStore::publish`]): nothing is ever fetched.
    local: bool,
}

/// One successful load.
pub(crate) struct Loaded {
    /// The issuer's metadata.
    pub(crate) metadata: IssuerMetadata,
    /// Its signing keys.
    pub(crate) keys: Arc<KeySet>,
    fresh_until: Instant,
}

/// Why loading failed (logged, retried).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// Discovery failed.
    #[error(transparent)]
    Discovery(#[from] discovery::DiscoveryError),
    /// The JWKS could not be fetched.
    #[error("fetching the JWKS: {0}")]
    Fetch(#[from] super::fetch::FetchError),
    /// The JWKS is not one, or holds no usable key.
    #[error("the JWKS at {url}: {reason}")]
    Jwks {
        /// Where it came from.
        url: String,
        /// What is wrong.
        reason: String,
    },
}

impl KeyStore {
    /// A store for `issuer`'s keys usable with `allowed`; nothing is fetched yet.
    pub(crate) fn new(fetcher: Fetcher, issuer: &str, allowed: Vec<Algorithm>, min_refetch: Duration) -> KeyStore {
        KeyStore {
            fetcher,
            issuer: issuer.to_owned(),
            allowed,
            min_refetch,
            loaded: RwLock::new(None),
            gate: tokio::sync::Mutex::new(None),
            local: false,
        }
    }

    /// A store for the keys of eragate's own authorization server, published by it.
    pub(crate) fn local(fetcher: Fetcher, issuer: &str, allowed: Vec<Algorithm>) -> KeyStore {
        KeyStore {
            local: true,
            ..KeyStore::new(fetcher, issuer, allowed, Duration::ZERO)
        }
    }

    /// Publishes the local issuer's metadata and keys (after each rotation).
    pub(crate) fn publish(&self, document: Bytes, jwks_uri: &str, jwks: &[u8]) -> Result<(), String> {
        let keys = KeySet::parse(jwks, &self.allowed)?;
        self.store(Loaded {
            metadata: IssuerMetadata {
                jwks_uri: jwks_uri.to_owned(),
                introspection_endpoint: None,
                document,
            },
            keys: Arc::new(keys),
            fresh_until: Instant::now() + MAX_FRESHNESS,
        });
        Ok(())
    }

    /// Loads in the background until it succeeds, warning after each failure,
    /// with backoff from 1 s to 30 s. Also keeps the keys fresh afterwards.
    pub(crate) fn spawn_loader(self: &Arc<Self>) {
        if self.local {
            return;
        }
        let store = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut backoff = Duration::from_secs(1);
            loop {
                let Some(this) = store.upgrade() else { return };
                let wait = match this.load_now().await {
                    Ok(loaded) => {
                        backoff = Duration::from_secs(1);
                        loaded.fresh_until.saturating_duration_since(Instant::now())
                    }
                    Err(error) => {
                        tracing::warn!(issuer = %this.issuer, error = %error, retry_in = ?backoff, "authorization server not usable yet");
                        let wait = backoff;
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                        wait
                    }
                };
                drop(this);
                tokio::time::sleep(wait.max(Duration::from_secs(1))).await;
            }
        });
    }

    /// The current load, fetching it first if there is none yet (rate-limited;
    /// `None` while the issuer cannot be reached).
    pub(crate) async fn current(&self) -> Option<Arc<Loaded>> {
        if let Some(loaded) = self.snapshot() {
            return Some(loaded);
        }
        if self.local {
            return None;
        }
        self.load_if_allowed().await;
        self.snapshot()
    }

    /// A JWKS refetch because a token names a key not in `seen`: done unless
    /// one ran within `jwks_min_refetch`. The keys afterwards.
    pub(crate) async fn refetch(&self, seen: &Arc<KeySet>) -> Option<Arc<KeySet>> {
        let mut gate = self.gate.lock().await;
        // Someone else may have refetched while this request waited.
        if let Some(loaded) = self.snapshot()
            && !Arc::ptr_eq(&loaded.keys, seen)
        {
            return Some(loaded.keys.clone());
        }
        if self.local {
            return None;
        }
        let now = Instant::now();
        if gate.is_some_and(|last| now.duration_since(last) < self.min_refetch) {
            return None;
        }
        *gate = Some(now);
        let previous = self.snapshot()?;
        match self.fetch_keys(&previous.metadata).await {
            Ok((keys, fresh_until)) => {
                tracing::info!(issuer = %self.issuer, keys = keys.len(), "refetched the JWKS for an unknown key id");
                let keys = Arc::new(keys);
                self.store(Loaded {
                    metadata: previous.metadata.clone(),
                    keys: keys.clone(),
                    fresh_until,
                });
                Some(keys)
            }
            Err(error) => {
                tracing::warn!(issuer = %self.issuer, error = %error, "JWKS refetch failed");
                None
            }
        }
    }

    /// The authorization server's metadata document as fetched, if loaded.
    pub(crate) fn metadata_document(&self) -> Option<Bytes> {
        self.snapshot().map(|l| l.metadata.document.clone())
    }

    /// Discovery and JWKS, now, whatever the rate limit says (start-up and `check-config`).
    pub(crate) async fn load_now(&self) -> Result<Arc<Loaded>, LoadError> {
        if self.local
            && let Some(loaded) = self.snapshot()
        {
            return Ok(loaded);
        }
        let mut gate = self.gate.lock().await;
        *gate = Some(Instant::now());
        self.load_unguarded().await
    }

    fn snapshot(&self) -> Option<Arc<Loaded>> {
        // A poisoned lock still holds a whole `Option<Arc<_>>`: read it anyway.
        self.loaded.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn store(&self, loaded: Loaded) -> Arc<Loaded> {
        let loaded = Arc::new(loaded);
        *self.loaded.write().unwrap_or_else(|e| e.into_inner()) = Some(loaded.clone());
        loaded
    }

    async fn load_if_allowed(&self) {
        let mut gate = self.gate.lock().await;
        if self.snapshot().is_some() {
            return;
        }
        let now = Instant::now();
        if gate.is_some_and(|last| now.duration_since(last) < self.min_refetch.max(Duration::from_secs(1))) {
            return;
        }
        *gate = Some(now);
        if let Err(error) = self.load_unguarded().await {
            tracing::warn!(issuer = %self.issuer, error = %error, "authorization server not usable");
        }
    }

    async fn load_unguarded(&self) -> Result<Arc<Loaded>, LoadError> {
        let metadata = discovery::discover(&self.fetcher, &self.issuer).await?;
        let (keys, fresh_until) = self.fetch_keys(&metadata).await?;
        tracing::debug!(issuer = %self.issuer, keys = keys.len(), "loaded the issuer's keys");
        Ok(self.store(Loaded {
            metadata,
            keys: Arc::new(keys),
            fresh_until,
        }))
    }

    async fn fetch_keys(&self, metadata: &IssuerMetadata) -> Result<(KeySet, Instant), LoadError> {
        let url = &metadata.jwks_uri;
        let fetched = self.fetcher.get(url).await?;
        let keys = KeySet::parse(&fetched.body, &self.allowed).map_err(|reason| LoadError::Jwks {
            url: url.clone(),
            reason,
        })?;
        if keys.is_empty() {
            return Err(LoadError::Jwks {
                url: url.clone(),
                reason: "no signing key for the configured algorithms".into(),
            });
        }
        let freshness = fetched
            .max_age
            .unwrap_or(DEFAULT_FRESHNESS)
            .clamp(MIN_FRESHNESS, MAX_FRESHNESS);
        Ok((keys, Instant::now() + freshness))
    }
}
