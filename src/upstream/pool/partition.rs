//! The partitions of an upstream's pooled sessions: which sessions a request
//! may share ([`PartitionKey`]), each partition's sessions, and the bounded
//! table of partitions: at most `pool.max_partitions_per_principal` each and
//! `pool.max_partitions` in all, room made by [`crate::policy::quota`] (the
//! least recently used idle partition of the principal that fills up). Never
//! opens a session: that is the pool's choice.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use serde_json::Value;

use crate::auth::Principal;
use crate::policy::quota::{self, Held, Room};
use crate::upstream::credentials::Subject;
use crate::upstream::error::UpstreamError;
use crate::upstream::session::UpstreamSession;

/// Which pooled sessions a request may share.
#[derive(Clone, Debug)]
pub(crate) struct PartitionKey {
    /// Who is asking (empty when no authentication is configured).
    pub(crate) principal: String,
    /// The capability profile the partition serves (`protocol::capabilities::partition_profile`: defined members only), as canonical JSON.
    pub(crate) capability_profile: String,
    /// The principal itself, with the access token it presented (for token
    /// exchange toward the upstream); no part of the key's identity.
    asking: Option<Principal>,
}

impl PartialEq for PartitionKey {
    fn eq(&self, other: &PartitionKey) -> bool {
        (&self.principal, &self.capability_profile) == (&other.principal, &other.capability_profile)
    }
}

impl Eq for PartitionKey {}

impl std::hash::Hash for PartitionKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (&self.principal, &self.capability_profile).hash(state);
    }
}

impl PartitionKey {
    /// The partition for `capabilities` (already mapped to the upstream's revision).
    pub(crate) fn new(principal: &str, capabilities: &Value) -> PartitionKey {
        // serde_json's map is ordered, so equal objects serialise equally.
        PartitionKey {
            principal: principal.to_owned(),
            capability_profile: capabilities.to_string(),
            asking: None,
        }
    }

    /// The partition of `principal`'s requests with `capabilities`; its sessions
    /// can present a token exchanged for the principal's own.
    pub(crate) fn of(principal: &Principal, capabilities: &Value) -> PartitionKey {
        PartitionKey {
            asking: Some(principal.clone()),
            ..PartitionKey::new(principal.as_str(), capabilities)
        }
    }

    /// The one partition of a modern upstream: requests carry their own envelope.
    pub(super) fn stateless() -> PartitionKey {
        PartitionKey {
            principal: String::new(),
            capability_profile: STATELESS.into(),
            asking: None,
        }
    }

    /// `principal`'s own stateless partition of a modern upstream, whose credential
    /// is a principal's (token exchange): its connections present that principal's token.
    pub(super) fn stateless_of(principal: &Principal) -> PartitionKey {
        PartitionKey {
            principal: principal.as_str().to_owned(),
            capability_profile: STATELESS.into(),
            asking: Some(principal.clone()),
        }
    }

    /// Whether the key names a stateless partition (of a modern upstream).
    pub(super) fn is_stateless(&self) -> bool {
        self.capability_profile == STATELESS
    }
}

/// The capability profile of stateless partitions: no JSON value serialises to it.
const STATELESS: &str = "(stateless)";

/// The pooled sessions of one partition.
pub(super) struct Partition {
    /// A std lock: held to pick or add a session, never across `.await`.
    sessions: RwLock<Vec<Pooled>>,
    /// Serialises opening so a burst of requests costs one handshake.
    pub(super) opening: tokio::sync::Mutex<()>,
    /// The principal its sessions' credential is exchanged for, with its newest token.
    pub(super) subject: Option<Arc<Subject>>,
    /// Whose share its sessions count against (empty: no one's).
    pub(super) principal: Arc<str>,
    last_used_ms: AtomicU64,
}

/// A pooled session and the member it lives on.
#[derive(Clone)]
pub(super) struct Pooled {
    pub(super) session: Arc<UpstreamSession>,
    /// Index into the upstream's members.
    pub(super) member: usize,
}

/// Every partition of one upstream.
pub(super) struct Partitions {
    /// A std mutex: held to look up or insert a partition, never across `.await`.
    table: Mutex<HashMap<PartitionKey, Arc<Partition>>>,
    /// Most partitions in all.
    max: usize,
    /// Most partitions of one principal.
    per_principal: usize,
}

// === impl Partitions ===

impl Partitions {
    /// A table of at most `max` partitions, `per_principal` of each principal.
    pub(super) fn new(max: usize, per_principal: usize) -> Partitions {
        Partitions {
            table: Mutex::new(HashMap::new()),
            max: max.max(1),
            per_principal: per_principal.max(1),
        }
    }

    /// The partition for `key`, created when there is none; to make room, the
    /// least recently used idle partition of the principal at its quota (or
    /// holding the most, when the table is full) is closed. `Overloaded` when
    /// none of those is idle.
    pub(super) fn get_or_create(
        &self,
        key: PartitionKey,
        now_ms: u64,
        upstream: &str,
    ) -> Result<Arc<Partition>, UpstreamError> {
        let mut partitions = self.lock();
        if let Some(partition) = partitions.get(&key) {
            if let (Some(subject), Some(asking)) = (&partition.subject, &key.asking) {
                subject.update(asking);
            }
            return Ok(partition.clone());
        }
        loop {
            let entries: Vec<(&PartitionKey, &Arc<Partition>)> = partitions.iter().collect();
            let held: Vec<Held<'_>> = entries
                .iter()
                .map(|(k, p)| Held {
                    principal: &k.principal,
                    idle: p.snapshot().iter().all(|s| s.session.in_flight() == 0),
                    last_used: p.last_used_ms.load(Ordering::Relaxed),
                })
                .collect();
            let evict = match quota::make_room(&held, &key.principal, self.per_principal, self.max) {
                Room::Free => break,
                Room::Evict(i) => entries[i].0.clone(),
                Room::Full => {
                    return Err(UpstreamError::Overloaded {
                        upstream: upstream.to_owned(),
                    });
                }
            };
            tracing::debug!(upstream, principal = %evict.principal, "partition quota reached; closing the least recently used idle partition");
            if let Some(partition) = partitions.remove(&evict) {
                for pooled in partition.take_all() {
                    pooled.session.close("partition evicted");
                }
            }
        }
        let partition = Arc::new(Partition {
            sessions: RwLock::new(Vec::new()),
            opening: tokio::sync::Mutex::new(()),
            subject: key.asking.as_ref().and_then(Subject::of),
            principal: Arc::from(key.principal.as_str()),
            last_used_ms: AtomicU64::new(now_ms),
        });
        partitions.insert(key, partition.clone());
        Ok(partition)
    }

    /// Every partition, as they are now.
    pub(super) fn all(&self) -> Vec<Arc<Partition>> {
        self.lock().values().cloned().collect()
    }

    /// Closes every stateless partition (the upstream's era changed).
    pub(super) fn close_stateless(&self, reason: &str) {
        let removed: Vec<_> = {
            let mut partitions = self.lock();
            let keys: Vec<_> = partitions.keys().filter(|k| k.is_stateless()).cloned().collect();
            keys.iter().filter_map(|k| partitions.remove(k)).collect()
        };
        for partition in removed {
            for pooled in partition.take_all() {
                pooled.session.close(reason);
            }
        }
    }

    /// Removes every partition and closes their sessions.
    pub(super) fn close_all(&self, reason: &str) {
        let partitions: Vec<_> = self.lock().drain().collect();
        for (_, partition) in partitions {
            for pooled in partition.take_all() {
                pooled.session.close(reason);
            }
        }
    }

    /// Drops `session` from whichever partition holds it.
    pub(super) fn discard(&self, session: &Arc<UpstreamSession>) {
        for partition in self.lock().values() {
            partition.remove(session);
        }
    }

    /// Whether any partition holds a live session.
    pub(super) fn any_live(&self) -> bool {
        self.lock()
            .values()
            .any(|p| p.snapshot().iter().any(|s| !s.session.is_closed()))
    }

    /// A live pooled session on `member`, in any partition.
    pub(super) fn live_on(&self, member: usize) -> Option<Arc<UpstreamSession>> {
        self.lock().values().find_map(|p| {
            p.snapshot()
                .into_iter()
                .find(|s| s.member == member && !s.session.is_closed())
                .map(|s| s.session)
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<PartitionKey, Arc<Partition>>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }
}

// === impl Partition ===

impl Partition {
    pub(super) fn snapshot(&self) -> Vec<Pooled> {
        self.sessions.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// `read` over the sessions, under the read lock (keep it short: no await, no other lock).
    pub(super) fn with_sessions<R>(&self, read: impl FnOnce(&[Pooled]) -> R) -> R {
        read(&self.sessions.read().unwrap_or_else(|e| e.into_inner()))
    }

    pub(super) fn add(&self, pooled: Pooled) {
        self.sessions.write().unwrap_or_else(|e| e.into_inner()).push(pooled);
    }

    pub(super) fn remove(&self, session: &Arc<UpstreamSession>) {
        self.sessions
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|p| !Arc::ptr_eq(&p.session, session));
    }

    /// Records a use, for eviction.
    pub(super) fn touch(&self, now_ms: u64) {
        self.last_used_ms.store(now_ms, Ordering::Relaxed);
    }

    fn take_all(&self) -> Vec<Pooled> {
        std::mem::take(&mut *self.sessions.write().unwrap_or_else(|e| e.into_inner()))
    }
}
