//! One configured upstream: its members, the warm pooled sessions that serve
//! pooled traffic, dedicated sessions for legacy clients, and admission.
//!
//! Pooled sessions are keyed by [`PartitionKey`] (principal and capability
//! profile), so a session is never shared across principals or across clients
//! that declared different capabilities. Within a partition, requests go to
//! the session with the fewest in flight on a healthy member; another session
//! (another stdio child, or a session on another HTTP endpoint) is opened while
//! every session is busy and the partition is below `pool.size`. Requests on
//! one session are multiplexed; the session rewrites ids so they never collide.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::UpstreamError;
use super::call::OnDrop;
use super::member::{Member, Target};
use super::probe;
use super::session::{UnsolicitedRequests, UpstreamSession};
use super::transport::Link;
use super::transport::sse::SseLink;
use super::transport::stdio::{ChildSupervisor, StdioLink, StdioSpawner};
use super::transport::streamable_http::{self, Endpoint, HttpLink};
use crate::config::{EraSetting, StdioConfig, UpstreamConfig};
use crate::protocol::{Era, Id, Revision};
use crate::translate::CachePolicy;
use crate::translate::down;

mod health;

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

    /// The one partition of a modern upstream: requests carry their own envelope.
    fn stateless() -> PartitionKey {
        PartitionKey {
            principal: String::new(),
            capability_profile: "(stateless)".into(),
        }
    }
}

/// One configured upstream server.
pub struct Upstream {
    name: Arc<str>,
    config: UpstreamConfig,
    members: Vec<Arc<Member>>,
    /// Round-robin cursor for dedicated sessions over healthy members.
    next_member: AtomicUsize,
    /// A std mutex: held to look up or insert a partition, never across `.await`.
    partitions: Mutex<HashMap<PartitionKey, Arc<Partition>>>,
    /// The newest `InitializeResult` seen, for `server/discover`.
    latest_initialize: RwLock<Option<Arc<Value>>>,
    admission: Admission,
    epoch: Instant,
    /// The learned (or pinned) era; `None` until the first probe.
    era: RwLock<Option<Era>>,
    /// Serialises probing so a burst of first requests costs one probe.
    probing: tokio::sync::Mutex<()>,
}

struct Partition {
    /// A std lock: held to pick or add a session, never across `.await`.
    sessions: RwLock<Vec<Pooled>>,
    /// Serialises opening so a burst of requests costs one handshake.
    opening: tokio::sync::Mutex<()>,
    last_used_ms: AtomicU64,
}

#[derive(Clone)]
struct Pooled {
    session: Arc<UpstreamSession>,
    member: usize,
}

/// The in-flight bound and the bounded queue in front of it.
struct Admission {
    permits: Arc<Semaphore>,
    waiting: AtomicUsize,
    queue: usize,
    queue_timeout: Duration,
}

impl Upstream {
    /// An upstream from its configuration. Nothing starts until [`Upstream::warm`] or the first request.
    pub fn new(config: UpstreamConfig, supervisor: ChildSupervisor) -> Arc<Upstream> {
        let name: Arc<str> = Arc::from(config.name.as_str());
        let members = members(&name, &config, supervisor);
        let era = match config.era {
            // HTTP+SSE predates the stateless era: nothing to probe.
            EraSetting::Auto if config.sse.is_some() => Some(Era::Legacy),
            EraSetting::Auto => None,
            EraSetting::Legacy => Some(Era::Legacy),
            EraSetting::Modern => Some(Era::Modern),
        };
        let admission = Admission {
            permits: Arc::new(Semaphore::new(config.max_in_flight)),
            waiting: AtomicUsize::new(0),
            queue: config.pool.queue,
            queue_timeout: config.pool.queue_timeout.0,
        };
        Arc::new(Upstream {
            name,
            members,
            next_member: AtomicUsize::new(0),
            partitions: Mutex::new(HashMap::new()),
            latest_initialize: RwLock::new(None),
            admission,
            epoch: Instant::now(),
            era: RwLock::new(era),
            probing: tokio::sync::Mutex::new(()),
            config,
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
        for member in &self.members {
            if let Target::Stdio(spawner) = &member.target {
                spawner.refill();
            }
        }
        match self.era().await? {
            Era::Legacy => self.initialize_result().await.map(|_| ()),
            Era::Modern => self.modern_session().await.map(|_| ()),
        }
    }

    // === era ===

    /// The upstream's era: pinned by configuration, or learned once by probing.
    pub async fn era(self: &Arc<Self>) -> Result<Era, UpstreamError> {
        if let Some(era) = self.era_if_known() {
            return Ok(era);
        }
        let _probing = self.probing.lock().await;
        if let Some(era) = self.era_if_known() {
            return Ok(era);
        }
        let era = self.probe().await?;
        tracing::info!(upstream = %self.name, ?era, "learned the upstream's era");
        *self.era.write().unwrap_or_else(|e| e.into_inner()) = Some(era);
        Ok(era)
    }

    /// The era, when already known (no probe).
    pub fn era_if_known(&self) -> Option<Era> {
        *self.era.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets a learned era (the upstream answered in a way that contradicts
    /// it: restarted or upgraded); the next request probes again.
    pub fn forget_era(&self) {
        if self.config.era == EraSetting::Auto && self.config.sse.is_none() {
            *self.era.write().unwrap_or_else(|e| e.into_inner()) = None;
            self.close_partition(&PartitionKey::stateless(), "era changed");
        }
    }

    /// Sends `server/discover` on a fresh connection and judges the answer.
    async fn probe(self: &Arc<Self>) -> Result<Era, UpstreamError> {
        let member = self.choose_member();
        let session = self.connect(member, UnsolicitedRequests::AnswerLocally).await?;
        session.start_modern();
        let params = probe::discover_params(&gateway_client_info());
        let timeout = self.config.handshake_timeout.0;
        let outcome = match session
            .call("server/discover", Some(params), Id::number(0), OnDrop::Detach)
            .await
        {
            Ok(call) => tokio::time::timeout(timeout, call.response())
                .await
                .unwrap_or_else(|_| Err(self.timeout_error(timeout))),
            Err(error) => Err(error),
        };
        // Not reaching the upstream at all says nothing about its era: report it, learn nothing.
        if let Err(error @ (UpstreamError::Unavailable { .. } | UpstreamError::Overloaded { .. })) = &outcome {
            session.close("probe failed");
            return Err(error.clone());
        }
        let era = probe::verdict(&outcome);
        match era {
            Era::Modern => {
                let partition = self.partition(PartitionKey::stateless())?;
                partition.add(Pooled { session, member });
            }
            // The connection saw a request before `initialize`; start legacy sessions afresh.
            Era::Legacy => session.close("probe done"),
        }
        Ok(era)
    }

    // === admission ===

    /// A permit to send one request. Past `max_in_flight` a request waits in a
    /// bounded queue for up to `pool.queue_timeout`; past the queue it is refused.
    pub async fn admit(&self) -> Result<OwnedSemaphorePermit, UpstreamError> {
        let overloaded = || UpstreamError::Overloaded {
            upstream: self.name.to_string(),
        };
        if let Ok(permit) = self.admission.permits.clone().try_acquire_owned() {
            return Ok(permit);
        }
        let waiting = self.admission.waiting.fetch_add(1, Ordering::AcqRel);
        let _leave = DecrementOnDrop(&self.admission.waiting);
        if waiting >= self.admission.queue {
            return Err(overloaded());
        }
        match tokio::time::timeout(
            self.admission.queue_timeout,
            self.admission.permits.clone().acquire_owned(),
        )
        .await
        {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) | Err(_) => Err(overloaded()),
        }
    }

    // === sessions ===

    /// The upstream's `InitializeResult` from a warm session (a handshake only when none exists yet).
    pub async fn initialize_result(self: &Arc<Self>) -> Result<Arc<Value>, UpstreamError> {
        if let Some(result) = self.latest_initialize.read().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(result);
        }
        let key = PartitionKey::new("", &json!({}));
        let params = down::initialize_params(Revision::LATEST_LEGACY, json!({}), gateway_client_info());
        let session = self.pooled(key, move || params).await?;
        session
            .initialize_result()
            .cloned()
            .ok_or_else(|| session.protocol_error("session has no InitializeResult".into()))
    }

    /// A warm pooled session for `key`, opened with `initialize_params()` when
    /// every session of the partition is busy (and it has room) or none is alive
    /// (the params are built only then: a warm session needs none).
    pub async fn pooled(
        self: &Arc<Self>,
        key: PartitionKey,
        initialize_params: impl FnOnce() -> Value + Send,
    ) -> Result<Arc<UpstreamSession>, UpstreamError> {
        let partition = self.partition(key)?;
        self.pick_with(&partition, Some(initialize_params), Sharing::Pooled)
            .await
    }

    /// Like [`Upstream::pooled`], but a session with nothing in flight is
    /// preferred (and opened while the partition has room), so that the request
    /// is alone on it.
    pub async fn pooled_exclusive(
        self: &Arc<Self>,
        key: PartitionKey,
        initialize_params: impl FnOnce() -> Value + Send,
    ) -> Result<Arc<UpstreamSession>, UpstreamError> {
        let partition = self.partition(key)?;
        self.pick_with(&partition, Some(initialize_params), Sharing::Alone)
            .await
    }

    /// The stateless session (one of `pool.size`) of a modern upstream.
    pub async fn modern_session(self: &Arc<Self>) -> Result<Arc<UpstreamSession>, UpstreamError> {
        let partition = self.partition(PartitionKey::stateless())?;
        self.pick_with(&partition, None::<fn() -> Value>, Sharing::Pooled).await
    }

    /// A live stateless session of a modern upstream, without opening one.
    pub fn live_modern(&self) -> Option<Arc<UpstreamSession>> {
        let partition = self.partitions_lock().get(&PartitionKey::stateless()).cloned()?;
        self.choose(&partition, true)
    }

    /// A session of its own for one legacy client, initialized with that client's params.
    pub async fn open_dedicated(
        self: &Arc<Self>,
        initialize_params: Value,
    ) -> Result<Arc<UpstreamSession>, UpstreamError> {
        let member = self.choose_member();
        self.open(member, initialize_params, UnsolicitedRequests::Forward).await
    }

    /// Resumes a dedicated HTTP upstream session that another replica opened on
    /// the member `endpoint`. `None` for stdio upstreams, whose sessions cannot
    /// move between processes.
    pub fn resume_dedicated(
        &self,
        endpoint: Option<&str>,
        upstream_session_id: &str,
        revision: Revision,
    ) -> Option<Arc<UpstreamSession>> {
        let member = self
            .members
            .iter()
            .find(|m| endpoint.is_none_or(|e| m.label == e))
            .or_else(|| self.members.first())?;
        let Target::Http(endpoint) = &member.target else {
            return None;
        };
        let link = HttpLink::resumed(endpoint.clone(), self.name.clone(), upstream_session_id)?;
        let health = Some(member.health.clone());
        let session = UpstreamSession::new(
            self.name.clone(),
            Link::Http(Box::new(link)),
            UnsolicitedRequests::Forward,
            health,
        );
        session.resume(revision);
        Some(session)
    }

    /// Drops a pooled session that turned out dead, so the next request opens a new one.
    pub fn discard(&self, session: &Arc<UpstreamSession>) {
        for partition in self.partitions_lock().values() {
            partition.remove(session);
        }
    }

    /// Closes every pooled session and stops the spares (shutdown).
    pub fn close_all(&self) {
        for member in &self.members {
            if let Target::Stdio(spawner) = &member.target {
                spawner.stop_spares();
            }
        }
        let partitions: Vec<_> = self.partitions_lock().drain().collect();
        for (_, partition) in partitions {
            for pooled in partition.take_all() {
                pooled.session.close("eragate is shutting down");
            }
        }
    }

    /// Whether a live pooled session exists (readiness).
    pub fn has_live_session(&self) -> bool {
        self.partitions_lock()
            .values()
            .any(|p| p.snapshot().iter().any(|s| !s.session.is_closed()))
    }

    /// The admin view: era, members with health and load, partitions.
    pub fn snapshot(&self) -> Value {
        let partitions: Vec<Arc<Partition>> = self.partitions_lock().values().cloned().collect();
        let mut per_member = vec![(0usize, 0usize); self.members.len()];
        for partition in &partitions {
            for pooled in partition.snapshot() {
                if let Some(entry) = per_member.get_mut(pooled.member)
                    && !pooled.session.is_closed()
                {
                    entry.0 += 1;
                    entry.1 += pooled.session.in_flight();
                }
            }
        }
        let members: Vec<Value> = self
            .members
            .iter()
            .zip(per_member)
            .map(|(m, (sessions, in_flight))| m.snapshot(sessions, in_flight))
            .collect();
        json!({
            "upstream": &*self.name,
            "path": self.config.path,
            "era": self.era_if_known().map(|e| format!("{e:?}").to_lowercase()),
            "members": members,
            "partitions": partitions.len(),
            "in_flight": self.config.max_in_flight - self.admission.permits.available_permits(),
            "queued": self.admission.waiting.load(Ordering::Relaxed),
        })
    }

    // === picking and opening ===

    /// A session of `partition`: one with fewer than `busy_at` in flight, else a
    /// new one while the partition has room, else the least loaded.
    async fn pick_with(
        self: &Arc<Self>,
        partition: &Arc<Partition>,
        initialize: Option<impl FnOnce() -> Value + Send>,
        sharing: Sharing,
    ) -> Result<Arc<UpstreamSession>, UpstreamError> {
        partition.last_used_ms.store(self.now_ms(), Ordering::Relaxed);
        self.retire(partition);
        if let Some(session) = self.choose_with(partition, false, sharing) {
            return Ok(session);
        }
        let _opening = partition.opening.lock().await;
        if let Some(session) = self.choose_with(partition, false, sharing) {
            return Ok(session);
        }
        let member = self.choose_member_for(partition);
        let session = match initialize {
            Some(params) => self.open(member, params(), UnsolicitedRequests::AnswerLocally).await?,
            None => {
                let session = self.connect(member, UnsolicitedRequests::AnswerLocally).await?;
                session.start_modern();
                session
            }
        };
        partition.add(Pooled {
            session: session.clone(),
            member,
        });
        Ok(session)
    }

    /// The least loaded usable session on a healthy member, unless every one is
    /// busy and the partition may grow (`force` takes any usable session).
    fn choose(&self, partition: &Partition, force: bool) -> Option<Arc<UpstreamSession>> {
        self.choose_with(partition, force, Sharing::Pooled)
    }

    fn choose_with(&self, partition: &Partition, force: bool, sharing: Sharing) -> Option<Arc<UpstreamSession>> {
        let sessions = partition.snapshot();
        let usable: Vec<&Pooled> = sessions
            .iter()
            .filter(|p| !p.session.is_closed() && !p.session.is_draining())
            .collect();
        let healthy: Vec<&&Pooled> = usable.iter().filter(|p| self.member_healthy(p.member)).collect();
        let any_healthy_member = self.members.iter().any(|m| m.health.is_healthy());
        let candidates: Vec<&Pooled> = if healthy.is_empty() && !any_healthy_member {
            usable.clone() // every member is out: keep trying the sessions we have
        } else {
            healthy.into_iter().copied().collect()
        };
        let best = candidates.iter().min_by_key(|p| p.session.in_flight())?;
        // A request that must be alone on its session never shares one: with no
        // idle session, another is opened, beyond `pool.size` if need be.
        let (busy_at, room) = match sharing {
            Sharing::Pooled => (
                self.config.pool.max_in_flight_per_session,
                self.pool_size() > usable.len(),
            ),
            Sharing::Alone => (1, true),
        };
        let busy = best.session.in_flight() >= busy_at;
        if force || !(busy && room) {
            Some(best.session.clone())
        } else {
            None
        }
    }

    /// Sessions past their request or age limit start draining; drained and dead ones go.
    fn retire(&self, partition: &Partition) {
        let restart = &self.config.restart;
        for pooled in partition.snapshot() {
            let session = &pooled.session;
            let worn = (restart.max_requests > 0 && session.served() >= restart.max_requests)
                || (!restart.max_lifetime.0.is_zero() && session.age() >= restart.max_lifetime.0);
            if worn && !session.is_draining() {
                tracing::info!(upstream = %self.name, served = session.served(), "replacing a worn session (draining)");
                session.drain();
            }
            if session.is_closed() {
                partition.remove(session);
            } else if session.is_draining() && session.in_flight() == 0 {
                partition.remove(session);
                session.close("replaced");
            }
        }
        // Sessions opened beyond `pool.size` for exclusive requests go once idle.
        let live: Vec<Pooled> = partition
            .snapshot()
            .into_iter()
            .filter(|p| !p.session.is_closed())
            .collect();
        let mut extra = live.len().saturating_sub(self.pool_size());
        for pooled in live.iter().rev() {
            if extra == 0 {
                break;
            }
            if pooled.session.in_flight() == 0 {
                partition.remove(&pooled.session);
                pooled.session.close("beyond pool.size");
                extra -= 1;
            }
        }
    }

    /// How many sessions a partition may hold: `pool.size`, and at least one per member.
    fn pool_size(&self) -> usize {
        self.config.pool.size.max(self.members.len())
    }

    fn member_healthy(&self, member: usize) -> bool {
        self.members.get(member).is_some_and(|m| m.health.is_healthy())
    }

    /// For a new pooled session: the healthy member with the fewest sessions in the partition.
    fn choose_member_for(&self, partition: &Partition) -> usize {
        let sessions = partition.snapshot();
        let load = |index: usize| {
            sessions
                .iter()
                .filter(|p| p.member == index && !p.session.is_closed())
                .count()
        };
        let healthy: Vec<usize> = (0..self.members.len()).filter(|i| self.member_healthy(*i)).collect();
        let pool = if healthy.is_empty() {
            (0..self.members.len()).collect()
        } else {
            healthy
        };
        pool.into_iter().min_by_key(|i| load(*i)).unwrap_or(0)
    }

    /// For a dedicated session: round robin over healthy members.
    fn choose_member(&self) -> usize {
        let count = self.members.len().max(1);
        for _ in 0..count {
            let index = self.next_member.fetch_add(1, Ordering::Relaxed) % count;
            if self.member_healthy(index) {
                return index;
            }
        }
        self.next_member.load(Ordering::Relaxed) % count
    }

    /// A connection on `member`, not yet initialized.
    async fn connect(
        &self,
        member: usize,
        unsolicited: UnsolicitedRequests,
    ) -> Result<Arc<UpstreamSession>, UpstreamError> {
        let Some(member) = self.members.get(member) else {
            return Err(UpstreamError::Unavailable {
                upstream: self.name.to_string(),
                reason: "no member".into(),
            });
        };
        member.health.sessions_opened.fetch_add(1, Ordering::Relaxed);
        let health = Some(member.health.clone());
        Ok(match &member.target {
            Target::Stdio(spawner) => {
                let child = spawner.take().await?;
                let (link, reader) = StdioLink::attach(child);
                let session = UpstreamSession::new(self.name.clone(), Link::Stdio(link), unsolicited, health);
                reader.start(Arc::downgrade(&session));
                session
            }
            Target::Http(endpoint) => {
                let link = HttpLink::new(endpoint.clone(), self.name.clone());
                UpstreamSession::new(self.name.clone(), Link::Http(Box::new(link)), unsolicited, health)
            }
            Target::Sse(endpoint) => {
                let timeout = self.config.handshake_timeout.0;
                let (client, url) = (endpoint.client.clone(), endpoint.url.clone());
                let pending = match SseLink::connect(client, url, self.name.clone(), timeout).await {
                    Ok(pending) => pending,
                    Err(error) => {
                        member.health.record_failure(&error.to_string());
                        return Err(error);
                    }
                };
                let (link, reader) = pending.split();
                let session = UpstreamSession::new(self.name.clone(), Link::Sse(Box::new(link)), unsolicited, health);
                let handle = reader.start(Arc::downgrade(&session));
                if let Link::Sse(link) = session.link() {
                    link.set_reader(handle);
                }
                session
            }
        })
    }

    /// A connection on `member`, initialized with `initialize_params`.
    async fn open(
        self: &Arc<Self>,
        member: usize,
        initialize_params: Value,
        unsolicited: UnsolicitedRequests,
    ) -> Result<Arc<UpstreamSession>, UpstreamError> {
        let session = self.connect(member, unsolicited).await?;
        let timeout = self.config.handshake_timeout.0;
        let known = self.latest_initialize.read().unwrap_or_else(|e| e.into_inner()).clone();
        let result = match tokio::time::timeout(timeout, session.initialize(initialize_params, known)).await {
            Ok(Ok(result)) => result,
            Ok(Err(error)) => {
                session.close("handshake failed");
                return Err(error);
            }
            Err(_) => {
                session.close("handshake timed out");
                if let Some(member) = self.members.get(member) {
                    member.health.record_failure("handshake timed out");
                }
                return Err(self.timeout_error(timeout));
            }
        };
        *self.latest_initialize.write().unwrap_or_else(|e| e.into_inner()) = Some(result);
        if unsolicited == UnsolicitedRequests::AnswerLocally {
            // Pooled: its list changes feed listens. A dedicated session opens
            // its stream when its client opens one (`ClientSession::attach_stream`).
            session.open_event_stream();
        }
        tracing::debug!(upstream = %self.name, revision = ?session.revision(), "upstream session initialized");
        Ok(session)
    }

    fn partition(&self, key: PartitionKey) -> Result<Arc<Partition>, UpstreamError> {
        let mut partitions = self.partitions_lock();
        if let Some(partition) = partitions.get(&key) {
            return Ok(partition.clone());
        }
        if partitions.len() >= MAX_PARTITIONS {
            let idle = partitions
                .iter()
                .filter(|(_, p)| p.snapshot().iter().all(|s| s.session.in_flight() == 0))
                .min_by_key(|(_, p)| p.last_used_ms.load(Ordering::Relaxed))
                .map(|(k, _)| k.clone());
            let Some(evict) = idle else {
                return Err(UpstreamError::Overloaded {
                    upstream: self.name.to_string(),
                });
            };
            if let Some(partition) = partitions.remove(&evict) {
                for pooled in partition.take_all() {
                    pooled.session.close("partition evicted");
                }
            }
        }
        let partition = Arc::new(Partition {
            sessions: RwLock::new(Vec::new()),
            opening: tokio::sync::Mutex::new(()),
            last_used_ms: AtomicU64::new(self.now_ms()),
        });
        partitions.insert(key, partition.clone());
        Ok(partition)
    }

    fn close_partition(&self, key: &PartitionKey, reason: &str) {
        if let Some(partition) = self.partitions_lock().remove(key) {
            for pooled in partition.take_all() {
                pooled.session.close(reason);
            }
        }
    }

    fn partitions_lock(&self) -> std::sync::MutexGuard<'_, HashMap<PartitionKey, Arc<Partition>>> {
        self.partitions.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn timeout_error(&self, after: Duration) -> UpstreamError {
        UpstreamError::Timeout {
            upstream: self.name.to_string(),
            after_ms: after.as_millis() as u64,
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}

/// Whether a request may share its pooled session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sharing {
    /// Multiplexed with others, up to `pool.max_in_flight_per_session`.
    Pooled,
    /// Alone: a stdio server's question during it can only be its own.
    Alone,
}

// === impl Partition ===

impl Partition {
    fn snapshot(&self) -> Vec<Pooled> {
        self.sessions.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn add(&self, pooled: Pooled) {
        self.sessions.write().unwrap_or_else(|e| e.into_inner()).push(pooled);
    }

    fn remove(&self, session: &Arc<UpstreamSession>) {
        self.sessions
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|p| !Arc::ptr_eq(&p.session, session));
    }

    fn take_all(&self) -> Vec<Pooled> {
        std::mem::take(&mut *self.sessions.write().unwrap_or_else(|e| e.into_inner()))
    }
}

struct DecrementOnDrop<'a>(&'a AtomicUsize);

impl Drop for DecrementOnDrop<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The members an upstream's configuration names.
fn members(name: &Arc<str>, config: &UpstreamConfig, supervisor: ChildSupervisor) -> Vec<Arc<Member>> {
    let health = &config.health;
    if let Some(stdio) = &config.stdio {
        let spawner = StdioSpawner::new(name.clone(), stdio.clone(), config.restart.clone(), supervisor);
        return vec![Member::new(Target::Stdio(spawner), "stdio".into(), health)];
    }
    if let Some(http) = &config.http {
        let client = streamable_http::client();
        return http
            .members()
            .into_iter()
            .map(|url| {
                let endpoint = Arc::new(Endpoint {
                    client: client.clone(),
                    url: url.clone(),
                });
                Member::new(Target::Http(endpoint), url.to_string(), health)
            })
            .collect();
    }
    if let Some(sse) = &config.sse {
        let target = Target::Sse(Arc::new(Endpoint {
            client: streamable_http::client(),
            url: sse.url.clone(),
        }));
        return vec![Member::new(target, sse.url.to_string(), health)];
    }
    // Validation guarantees a transport; an empty command fails at spawn with a clear error.
    let spawner = StdioSpawner::new(
        name.clone(),
        StdioConfig::from_command(Vec::new()),
        config.restart.clone(),
        supervisor,
    );
    vec![Member::new(Target::Stdio(spawner), "stdio".into(), health)]
}

/// How eragate introduces itself when no client identity is at hand.
pub fn gateway_client_info() -> Value {
    json!({"name": "eragate", "version": env!("CARGO_PKG_VERSION")})
}
