//! Pooled sessions: picking the least loaded session of a partition on a
//! healthy member, opening another while every one is busy and the partition
//! has room, and retiring worn, drained and surplus sessions.

use std::sync::Arc;

use serde_json::{Value, json};

use super::partition::{Partition, PartitionKey, Pooled};
use super::{Upstream, gateway_client_info};
use crate::auth::Principal;
use crate::protocol::Revision;
use crate::translate::down;
use crate::upstream::error::UpstreamError;
use crate::upstream::session::{UnsolicitedRequests, UpstreamSession};

/// Whether a request may share its pooled session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sharing {
    /// Multiplexed with others, up to `pool.max_in_flight_per_session`.
    Pooled,
    /// Alone: a stdio server's question during it can only be its own.
    Alone,
}

impl Upstream {
    /// A warm handshake session served a request: an `initialize` saved by pooling.
    fn reused(&self, handshake: bool) {
        if handshake {
            self.stats.initialize_saved();
        }
    }

    /// The upstream's `InitializeResult` from a warm session (a handshake only
    /// when none exists yet, on behalf of `asking` when the credential is its own).
    pub(crate) async fn initialize_result(self: &Arc<Self>, asking: &Principal) -> Result<Arc<Value>, UpstreamError> {
        if let Some(result) = self.latest_initialize.read().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(result);
        }
        let key = match self.per_principal {
            true => PartitionKey::of(asking, &json!({})),
            false => PartitionKey::new("", &json!({})),
        };
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
    pub(crate) async fn pooled(
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
    pub(crate) async fn pooled_exclusive(
        self: &Arc<Self>,
        key: PartitionKey,
        initialize_params: impl FnOnce() -> Value + Send,
    ) -> Result<Arc<UpstreamSession>, UpstreamError> {
        let partition = self.partition(key)?;
        self.pick_with(&partition, Some(initialize_params), Sharing::Alone)
            .await
    }

    /// A stateless session (one of `pool.size`) of a modern upstream for `asking`'s request.
    pub(crate) async fn modern_session(
        self: &Arc<Self>,
        asking: &Principal,
    ) -> Result<Arc<UpstreamSession>, UpstreamError> {
        let partition = self.partition(self.stateless_key(asking))?;
        self.pick_with(&partition, None::<fn() -> Value>, Sharing::Pooled).await
    }

    /// The stateless partition `asking`'s requests use: the one every principal
    /// shares, unless the upstream is reached with each principal's own token.
    pub(super) fn stateless_key(&self, asking: &Principal) -> PartitionKey {
        match self.per_principal {
            true => PartitionKey::stateless_of(asking),
            false => PartitionKey::stateless(),
        }
    }

    /// Drops a pooled session that turned out dead, so the next request opens a new one.
    pub(crate) fn discard(&self, session: &Arc<UpstreamSession>) {
        self.partitions.discard(session);
    }

    /// Whether a live pooled session exists (readiness).
    pub(crate) fn has_live_session(&self) -> bool {
        self.partitions.any_live()
    }

    /// The partition for `key` (created if need be).
    pub(super) fn partition(&self, key: PartitionKey) -> Result<Arc<Partition>, UpstreamError> {
        self.partitions.get_or_create(key, self.now_ms(), &self.name)
    }

    /// A session of `partition`: one with fewer than `busy_at` in flight, else a
    /// new one while the partition has room, else the least loaded.
    async fn pick_with(
        self: &Arc<Self>,
        partition: &Arc<Partition>,
        initialize: Option<impl FnOnce() -> Value + Send>,
        sharing: Sharing,
    ) -> Result<Arc<UpstreamSession>, UpstreamError> {
        partition.touch(self.now_ms());
        self.retire(partition);
        let handshake = initialize.is_some();
        if let Some(session) = self.choose_with(partition, false, sharing) {
            self.reused(handshake);
            return Ok(session);
        }
        // Boxed: opening a session (a connection, a handshake under its timeout) is
        // rare, and would otherwise size every pooled request's state.
        Box::pin(self.open_for(partition, initialize, sharing)).await
    }

    /// [`Upstream::pick_with`] when no session could be chosen at once: waits for
    /// the partition's turn to open one, and opens one unless another opened meanwhile.
    async fn open_for(
        self: &Arc<Self>,
        partition: &Arc<Partition>,
        initialize: Option<impl FnOnce() -> Value + Send>,
        sharing: Sharing,
    ) -> Result<Arc<UpstreamSession>, UpstreamError> {
        let handshake = initialize.is_some();
        let _opening = partition.opening.lock().await;
        if let Some(session) = self.choose_with(partition, false, sharing) {
            self.reused(handshake);
            return Ok(session);
        }
        let share = self.share_for(&partition.principal)?;
        let member = self.choose_member_for(partition);
        let (pooled, subject) = (UnsolicitedRequests::AnswerLocally, partition.subject.clone());
        let session = match initialize {
            Some(params) => self.open(member, params(), pooled, subject).await?,
            None => {
                let session = self.connect(member, pooled, subject).await?;
                session.start_modern();
                session
            }
        };
        session.hold_share(share);
        if sharing == Sharing::Alone {
            // Before any other chooser can see it.
            session.claim_alone();
        }
        partition.add(Pooled {
            session: session.clone(),
            member,
        });
        Ok(session)
    }

    /// The least loaded usable session on a healthy member, unless every one is
    /// busy and the partition may grow (`force` takes any usable session).
    fn choose_with(&self, partition: &Partition, force: bool, sharing: Sharing) -> Option<Arc<UpstreamSession>> {
        // One pass under the partition's read lock, nothing allocated: this runs on
        // every pooled request. Ties go to the first session, as `min_by_key` would.
        partition.with_sessions(|sessions| {
            let mut usable = 0;
            let mut least_loaded: Option<&Pooled> = None;
            let mut least_loaded_healthy: Option<&Pooled> = None;
            let fewer =
                |best: Option<&Pooled>, p: &Pooled| best.is_none_or(|b| p.session.in_flight() < b.session.in_flight());
            for pooled in sessions {
                if pooled.session.is_closed() || pooled.session.is_draining() {
                    continue;
                }
                usable += 1;
                if fewer(least_loaded, pooled) {
                    least_loaded = Some(pooled);
                }
                if self.member_healthy(pooled.member) && fewer(least_loaded_healthy, pooled) {
                    least_loaded_healthy = Some(pooled);
                }
            }
            let best = match least_loaded_healthy {
                // Every member is out: keep trying the sessions we have.
                None if !self.members.iter().any(|m| m.health.is_healthy()) => least_loaded?,
                best => best?,
            };
            // A request that must be alone on its session never shares one: with no
            // idle session, another is opened, beyond `pool.size` if need be.
            let (busy_at, room) = match sharing {
                Sharing::Pooled => (self.config.pool.max_in_flight_per_session, self.pool_size() > usable),
                Sharing::Alone => (1, true),
            };
            let busy = best.session.in_flight() >= busy_at;
            if force {
                return Some(best.session.clone());
            }
            match sharing {
                Sharing::Pooled => (!(busy && room)).then(|| best.session.clone()),
                // Claimed before it is handed out: a concurrent chooser sees it busy.
                Sharing::Alone => (!busy && best.session.claim_alone()).then(|| best.session.clone()),
            }
        })
    }

    /// Sessions past their request or age limit start draining; drained and dead ones go.
    fn retire(&self, partition: &Partition) {
        let restart = &self.config.restart;
        let worn = |session: &UpstreamSession| {
            (restart.max_requests > 0 && session.served() >= restart.max_requests)
                || (!restart.max_lifetime.0.is_zero() && session.age() >= restart.max_lifetime.0)
        };
        // Most requests find nothing to retire: look first under the read lock, allocating
        // nothing, for what the loops below act on (a session to drain, to remove, or surplus).
        let nothing_to_do = partition.with_sessions(|sessions| {
            let mut live = 0;
            let mut idle = false;
            for pooled in sessions {
                let session = &pooled.session;
                let draining = session.is_draining();
                if session.is_closed() || (worn(session) && !draining) || (draining && session.in_flight() == 0) {
                    return false;
                }
                live += 1;
                idle |= session.in_flight() == 0;
            }
            live <= self.pool_size() || !idle
        });
        if nothing_to_do {
            return;
        }
        for pooled in partition.snapshot() {
            let session = &pooled.session;
            if worn(session) && !session.is_draining() {
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
}
