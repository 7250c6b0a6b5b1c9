//! One configured upstream: its transport, the warm pooled sessions that serve
//! modern clients, dedicated sessions for legacy clients, and the in-flight bound.
//!
//! Pooled sessions are keyed by [`PartitionKey`] (principal and capability
//! profile), so a session is never shared across principals or across clients
//! that declared different capabilities. Requests on one pooled session are
//! multiplexed; the session rewrites ids so they never collide.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::UpstreamError;
use super::probe::{self, UpstreamEra};
use super::session::{OnDrop, UnsolicitedRequests, UpstreamSession};
use super::transport::Link;
use super::transport::sse::SseLink;
use super::transport::stdio::{ChildSupervisor, StdioLink, StdioSpawner};
use super::transport::streamable_http::{self, HttpClient, HttpLink};
use crate::config::{EraSetting, UpstreamConfig};
use crate::protocol::{Id, Revision};
use crate::translate::CachePolicy;
use crate::translate::down;

/// Most pooled partitions per upstream; past it the least recently used idle one is closed.
const MAX_PARTITIONS: usize = 32;

/// Which pooled sessions a request may share.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PartitionKey {
    /// Who is asking (empty when no authentication is configured).
    pub principal: String,
    /// The legacy capabilities the session was initialized with, as canonical JSON.
    pub capability_profile: String,
}

impl PartitionKey {
    /// The partition for `capabilities` (already mapped to the upstream's revision).
    pub fn new(principal: &str, capabilities: &Value) -> PartitionKey {
        // serde_json's map is ordered, so equal objects serialise equally.
        PartitionKey {
            principal: principal.to_owned(),
            capability_profile: capabilities.to_string(),
        }
    }
}

/// One configured upstream server.
pub struct Upstream {
    name: Arc<str>,
    config: UpstreamConfig,
    connector: Connector,
    /// A std mutex: held to look up or insert a partition, never across `.await`.
    partitions: Mutex<HashMap<PartitionKey, Arc<Partition>>>,
    /// The newest `InitializeResult` seen, for `server/discover`.
    latest_initialize: RwLock<Option<Arc<Value>>>,
    in_flight: Arc<Semaphore>,
    epoch: Instant,
    /// The learned (or pinned) era; `None` until the first probe.
    era: RwLock<Option<UpstreamEra>>,
    /// Serialises probing so a burst of first requests costs one probe.
    probing: tokio::sync::Mutex<()>,
    /// For a modern upstream: the one stateless session every request shares.
    modern: RwLock<Option<Arc<UpstreamSession>>>,
    modern_opening: tokio::sync::Mutex<()>,
}

enum Connector {
    Stdio(Arc<StdioSpawner>),
    Sse(Box<(HttpClient, http::Uri)>),
    Http(Box<(HttpClient, http::Uri)>),
}

struct Partition {
    session: RwLock<Option<Arc<UpstreamSession>>>,
    /// Serialises opening so a burst of requests costs one handshake.
    opening: tokio::sync::Mutex<()>,
    last_used_ms: AtomicU64,
}

impl Upstream {
    /// An upstream from its configuration. Nothing starts until [`Upstream::warm`] or the first request.
    pub fn new(config: UpstreamConfig, supervisor: ChildSupervisor) -> Arc<Upstream> {
        let name: Arc<str> = Arc::from(config.name.as_str());
        let config_era = config.era;
        let speaks_sse = config.sse.is_some();
        let connector = match (&config.stdio, &config.http, &config.sse) {
            (Some(stdio), _, _) => Connector::Stdio(StdioSpawner::new(name.clone(), stdio.clone(), supervisor)),
            (None, Some(http), _) => Connector::Http(Box::new((streamable_http::client(), http.url.clone()))),
            (None, None, Some(sse)) => Connector::Sse(Box::new((streamable_http::client(), sse.url.clone()))),
            // Validation guarantees a transport; an empty command fails at spawn with a clear error.
            (None, None, None) => Connector::Stdio(StdioSpawner::new(
                name.clone(),
                crate::config::StdioConfig::from_command(Vec::new()),
                supervisor,
            )),
        };
        Arc::new(Upstream {
            name,
            in_flight: Arc::new(Semaphore::new(config.max_in_flight)),
            config,
            connector,
            partitions: Mutex::new(HashMap::new()),
            latest_initialize: RwLock::new(None),
            epoch: Instant::now(),
            era: RwLock::new(match config_era {
                // HTTP+SSE predates the stateless era: nothing to probe.
                EraSetting::Auto if speaks_sse => Some(UpstreamEra::Legacy),
                EraSetting::Auto => None,
                EraSetting::Legacy => Some(UpstreamEra::Legacy),
                EraSetting::Modern => Some(UpstreamEra::Modern),
            }),
            probing: tokio::sync::Mutex::new(()),
            modern: RwLock::new(None),
            modern_opening: tokio::sync::Mutex::new(()),
        })
    }

    /// The configured name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The configuration.
    pub fn config(&self) -> &UpstreamConfig {
        &self.config
    }

    /// The cache hints for this upstream's results.
    pub fn cache_policy(&self) -> CachePolicy {
        self.config.cache.policy()
    }

    /// Learns the era, opens the first session and starts spares, so the first
    /// client waits for nothing.
    pub async fn warm(self: &Arc<Self>) -> Result<(), UpstreamError> {
        if let Connector::Stdio(spawner) = &self.connector {
            spawner.refill();
        }
        match self.era().await? {
            UpstreamEra::Legacy => self.initialize_result().await.map(|_| ()),
            UpstreamEra::Modern => self.modern_session().await.map(|_| ()),
        }
    }

    /// The upstream's era: pinned by configuration, or learned once by probing.
    pub async fn era(self: &Arc<Self>) -> Result<UpstreamEra, UpstreamError> {
        if let Some(era) = *self.era.read().unwrap_or_else(|e| e.into_inner()) {
            return Ok(era);
        }
        let _probing = self.probing.lock().await;
        if let Some(era) = *self.era.read().unwrap_or_else(|e| e.into_inner()) {
            return Ok(era);
        }
        let era = self.probe().await?;
        tracing::info!(upstream = %self.name, ?era, "learned the upstream's era");
        *self.era.write().unwrap_or_else(|e| e.into_inner()) = Some(era);
        Ok(era)
    }

    /// Forgets a learned era (the upstream answered in a way that contradicts
    /// it: restarted or upgraded); the next request probes again.
    pub fn forget_era(&self) {
        if self.config.era == EraSetting::Auto {
            *self.era.write().unwrap_or_else(|e| e.into_inner()) = None;
            if let Some(session) = self.modern.write().unwrap_or_else(|e| e.into_inner()).take() {
                session.close("era changed");
            }
        }
    }

    /// The shared stateless session of a modern upstream.
    pub async fn modern_session(self: &Arc<Self>) -> Result<Arc<UpstreamSession>, UpstreamError> {
        if let Some(session) = self.live_modern() {
            return Ok(session);
        }
        let _opening = self.modern_opening.lock().await;
        if let Some(session) = self.live_modern() {
            return Ok(session);
        }
        let session = self.connect(UnsolicitedRequests::AnswerLocally).await?;
        session.start_modern();
        *self.modern.write().unwrap_or_else(|e| e.into_inner()) = Some(session.clone());
        Ok(session)
    }

    /// The era, when already known (no probe).
    pub fn era_if_known(&self) -> Option<UpstreamEra> {
        *self.era.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The shared stateless session of a modern upstream, when one is open.
    pub fn live_modern(&self) -> Option<Arc<UpstreamSession>> {
        self.modern
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|s| !s.is_closed())
            .cloned()
    }

    /// Sends `server/discover` on a fresh connection and judges the answer.
    async fn probe(self: &Arc<Self>) -> Result<UpstreamEra, UpstreamError> {
        let session = self.connect(UnsolicitedRequests::AnswerLocally).await?;
        session.start_modern();
        let params = probe::discover_params(&gateway_client_info());
        let timeout = self.config.handshake_timeout.0;
        let outcome = match session
            .call("server/discover", Some(params), Id::number(0), OnDrop::Detach)
            .await
        {
            Ok(call) => match tokio::time::timeout(timeout, call.response()).await {
                Ok(outcome) => outcome,
                Err(_) => Err(UpstreamError::Timeout {
                    upstream: self.name.to_string(),
                    after_ms: timeout.as_millis() as u64,
                }),
            },
            Err(error) => Err(error),
        };
        // Not reaching the upstream at all says nothing about its era: report it, learn nothing.
        if let Err(error @ (UpstreamError::Unavailable { .. } | UpstreamError::Overloaded { .. })) = &outcome {
            session.close("probe failed");
            return Err(error.clone());
        }
        let era = probe::verdict(&outcome);
        match era {
            UpstreamEra::Modern => *self.modern.write().unwrap_or_else(|e| e.into_inner()) = Some(session),
            // The connection saw a request before `initialize`; start legacy sessions afresh.
            UpstreamEra::Legacy => session.close("probe done"),
        }
        Ok(era)
    }

    /// A permit to send one request; refused (not queued) past `max_in_flight`.
    pub fn admit(&self) -> Result<OwnedSemaphorePermit, UpstreamError> {
        self.in_flight
            .clone()
            .try_acquire_owned()
            .map_err(|_| UpstreamError::Overloaded {
                upstream: self.name.to_string(),
            })
    }

    /// The upstream's `InitializeResult` from a warm session (a handshake only when none exists yet).
    pub async fn initialize_result(self: &Arc<Self>) -> Result<Arc<Value>, UpstreamError> {
        if let Some(result) = self.latest_initialize.read().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(result);
        }
        let key = PartitionKey::new("", &json!({}));
        let params = down::initialize_params(Revision::LATEST_LEGACY, json!({}), gateway_client_info());
        let session = self.pooled(key, params).await?;
        session
            .initialize_result()
            .cloned()
            .ok_or_else(|| session.protocol_error("session has no InitializeResult".into()))
    }

    /// A warm pooled session for `key`, opened with `initialize_params` if none is alive.
    pub async fn pooled(
        self: &Arc<Self>,
        key: PartitionKey,
        initialize_params: Value,
    ) -> Result<Arc<UpstreamSession>, UpstreamError> {
        let partition = self.partition(key)?;
        partition.last_used_ms.store(self.now_ms(), Ordering::Relaxed);
        if let Some(session) = partition.live_session() {
            return Ok(session);
        }
        let _opening = partition.opening.lock().await;
        if let Some(session) = partition.live_session() {
            return Ok(session);
        }
        let session = self.open(initialize_params, UnsolicitedRequests::AnswerLocally).await?;
        *partition.session.write().unwrap_or_else(|e| e.into_inner()) = Some(session.clone());
        Ok(session)
    }

    /// A session of its own for one legacy client, initialized with that client's params.
    pub async fn open_dedicated(
        self: &Arc<Self>,
        initialize_params: Value,
    ) -> Result<Arc<UpstreamSession>, UpstreamError> {
        self.open(initialize_params, UnsolicitedRequests::Forward).await
    }

    /// Resumes a dedicated HTTP upstream session that another replica opened.
    /// `None` for stdio upstreams, whose sessions cannot move between processes.
    pub fn resume_dedicated(&self, upstream_session_id: &str, revision: Revision) -> Option<Arc<UpstreamSession>> {
        let Connector::Http(target) = &self.connector else {
            return None;
        };
        let (client, url) = &**target;
        let link = HttpLink::resumed(client.clone(), url.clone(), self.name.clone(), upstream_session_id)?;
        let session = UpstreamSession::new(
            self.name.clone(),
            Link::Http(Box::new(link)),
            UnsolicitedRequests::Forward,
        );
        session.resume(revision);
        Some(session)
    }

    /// Drops a pooled session that turned out dead, so the next request opens a new one.
    pub fn discard(&self, session: &Arc<UpstreamSession>) {
        let partitions = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        for partition in partitions.values() {
            let mut slot = partition.session.write().unwrap_or_else(|e| e.into_inner());
            if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, session)) {
                *slot = None;
            }
        }
    }

    /// Closes every pooled session (shutdown).
    pub fn close_all(&self) {
        if let Some(session) = self.modern.write().unwrap_or_else(|e| e.into_inner()).take() {
            session.close("eragate is shutting down");
        }
        let partitions: Vec<_> = self
            .partitions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .collect();
        for (_, partition) in partitions {
            if let Some(session) = partition.session.write().unwrap_or_else(|e| e.into_inner()).take() {
                session.close("eragate is shutting down");
            }
        }
    }

    /// Whether a live pooled session exists (readiness).
    pub fn has_live_session(&self) -> bool {
        self.live_modern().is_some()
            || self
                .partitions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .values()
                .any(|p| p.live_session().is_some())
    }

    /// A connection not yet initialized: a child from the spares, a new HTTP
    /// session, or a new HTTP+SSE stream.
    async fn connect(&self, unsolicited: UnsolicitedRequests) -> Result<Arc<UpstreamSession>, UpstreamError> {
        Ok(match &self.connector {
            Connector::Sse(target) => {
                let (client, url) = &**target;
                let timeout = self.config.handshake_timeout.0;
                let pending = SseLink::connect(client.clone(), url.clone(), self.name.clone(), timeout).await?;
                let (link, reader) = pending.split();
                let session = UpstreamSession::new(self.name.clone(), Link::Sse(Box::new(link)), unsolicited);
                let handle = reader.start(Arc::downgrade(&session));
                if let Link::Sse(link) = session.link() {
                    link.set_reader(handle);
                }
                session
            }
            Connector::Stdio(spawner) => {
                let child = spawner.take()?;
                let (link, reader) = StdioLink::attach(child);
                let session = UpstreamSession::new(self.name.clone(), Link::Stdio(link), unsolicited);
                reader.start(Arc::downgrade(&session));
                session
            }
            Connector::Http(target) => {
                let (client, url) = &**target;
                let link = HttpLink::new(client.clone(), url.clone(), self.name.clone());
                UpstreamSession::new(self.name.clone(), Link::Http(Box::new(link)), unsolicited)
            }
        })
    }

    async fn open(
        self: &Arc<Self>,
        initialize_params: Value,
        unsolicited: UnsolicitedRequests,
    ) -> Result<Arc<UpstreamSession>, UpstreamError> {
        let session = self.connect(unsolicited).await?;
        let timeout = self.config.handshake_timeout.0;
        let result = match tokio::time::timeout(timeout, session.initialize(initialize_params)).await {
            Ok(Ok(result)) => result,
            Ok(Err(error)) => {
                session.close("handshake failed");
                return Err(error);
            }
            Err(_) => {
                session.close("handshake timed out");
                return Err(UpstreamError::Timeout {
                    upstream: self.name.to_string(),
                    after_ms: timeout.as_millis() as u64,
                });
            }
        };
        *self.latest_initialize.write().unwrap_or_else(|e| e.into_inner()) = Some(result);
        tracing::debug!(upstream = %self.name, revision = ?session.revision(), "upstream session initialized");
        Ok(session)
    }

    fn partition(&self, key: PartitionKey) -> Result<Arc<Partition>, UpstreamError> {
        let mut partitions = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(partition) = partitions.get(&key) {
            return Ok(partition.clone());
        }
        if partitions.len() >= MAX_PARTITIONS {
            let idle = partitions
                .iter()
                .filter(|(_, p)| p.live_session().is_none_or(|s| s.in_flight() == 0))
                .min_by_key(|(_, p)| p.last_used_ms.load(Ordering::Relaxed))
                .map(|(k, _)| k.clone());
            let Some(evict) = idle else {
                return Err(UpstreamError::Overloaded {
                    upstream: self.name.to_string(),
                });
            };
            if let Some(partition) = partitions.remove(&evict)
                && let Some(session) = partition.session.write().unwrap_or_else(|e| e.into_inner()).take()
            {
                session.close("partition evicted");
            }
        }
        let partition = Arc::new(Partition {
            session: RwLock::new(None),
            opening: tokio::sync::Mutex::new(()),
            last_used_ms: AtomicU64::new(self.now_ms()),
        });
        partitions.insert(key, partition.clone());
        Ok(partition)
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}

impl Partition {
    fn live_session(&self) -> Option<Arc<UpstreamSession>> {
        self.session
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|s| !s.is_closed())
            .cloned()
    }
}

/// How eragate introduces itself when no client identity is at hand.
pub fn gateway_client_info() -> Value {
    json!({"name": "eragate", "version": env!("CARGO_PKG_VERSION")})
}
