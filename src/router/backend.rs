//! What serves a route: the seam between the era bridge and the servers behind
//! it. The bridge asks a [`Backend`] for its era, its handshake result, an
//! admission slot and a session of the kind a request needs; it never sees
//! members, partitions, transports or children.
//!
//! One upstream pool ([`Backend::Pool`]), or a federated set of pools
//! ([`Backend::Federated`]): the bridge serves a federated path through its
//! members (`bridge/federated/`), which are pools themselves; here a
//! federation answers for the set (name, stats, lifecycle) and has no session
//! of its own.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;

use super::federation::Federation;
use super::list_cache::ListCache;
use super::{PartitionKey, UpstreamError, UpstreamSession};
use crate::auth::Principal;
use crate::config::{LegacySessions, UpstreamConfig};
use crate::protocol::{Era, Revision};
use crate::telemetry::UpstreamStats;
use crate::translate::CachePolicy;
use crate::upstream::Upstream;

/// The servers behind one MCP path.
#[derive(Clone)]
pub enum Backend {
    /// One upstream server: its replicas, pooled sessions and health, and the
    /// lists eragate keeps of it.
    Pool(Arc<Upstream>, Arc<ListCache>),
    /// Several upstreams served as one on one path.
    Federated(Arc<Federation>, Arc<ListCache>),
}

/// The session a request needs.
pub enum SessionNeed<F> {
    /// A 2026-07-28 backend's stateless session (any of its pool) for a
    /// request of `principal` (whose own token an exchanged credential needs).
    Stateless {
        /// On whose behalf.
        principal: Principal,
    },
    /// A warm handshake session of `key`'s partition, shared with other requests;
    /// `initialize` builds the handshake params when one has to be opened.
    Shared {
        /// Whose session, with which capabilities.
        key: PartitionKey,
        /// The handshake params, built only when a session must be opened.
        initialize: F,
    },
    /// As [`SessionNeed::Shared`], but with nothing else in flight on it: on
    /// stdio a server→client request names no request, so a request that may
    /// be asked for input must be alone on its session.
    Alone {
        /// Whose session, with which capabilities.
        key: PartitionKey,
        /// The handshake params, built only when a session must be opened.
        initialize: F,
    },
    /// A session of its own for one legacy client, opened with its handshake params.
    Dedicated {
        /// The client's `initialize` params.
        params: Value,
        /// Whose session (its token may be exchanged for the upstream's).
        principal: Principal,
    },
}

impl SessionNeed<fn() -> Value> {
    /// [`SessionNeed::Stateless`], which builds no handshake params.
    pub fn stateless(principal: &Principal) -> SessionNeed<fn() -> Value> {
        SessionNeed::Stateless {
            principal: principal.clone(),
        }
    }
}

/// A slot of the backend's in-flight bound, held until the request ends.
pub struct Admission {
    _slot: OwnedSemaphorePermit,
}

impl Backend {
    /// The configured name (for logs and errors).
    pub fn name(&self) -> &str {
        match self {
            Backend::Pool(pool, _) => pool.name(),
            Backend::Federated(federation, _) => federation.name(),
        }
    }

    /// The federation, when this backend is one.
    pub fn federation(&self) -> Option<&Arc<Federation>> {
        match self {
            Backend::Pool(..) => None,
            Backend::Federated(federation, _) => Some(federation),
        }
    }

    /// The counters operators see (admission refusals, handshakes saved, last success).
    pub fn stats(&self) -> &Arc<UpstreamStats> {
        match self {
            Backend::Pool(pool, _) => pool.stats(),
            Backend::Federated(federation, _) => federation.stats(),
        }
    }

    /// The configuration of every upstream behind it (a reload compares them).
    pub fn configs(&self) -> Vec<&UpstreamConfig> {
        match self {
            Backend::Pool(pool, _) => vec![pool.config()],
            Backend::Federated(federation, _) => federation.members().iter().map(|m| m.backend.config()).collect(),
        }
    }

    /// The backend's configuration (a federation's stands for its own requests).
    pub fn config(&self) -> &UpstreamConfig {
        match self {
            Backend::Pool(pool, _) => pool.config(),
            Backend::Federated(federation, _) => federation.config(),
        }
    }

    /// The time a request of `method` may take.
    pub fn timeout_for(&self, method: &str) -> Duration {
        self.config().timeout_for(method)
    }

    /// Whether legacy clients share pooled upstream sessions or get their own.
    pub fn legacy_sessions(&self) -> LegacySessions {
        self.config().pool.legacy_sessions
    }

    /// The lists kept of the backend.
    pub fn lists(&self) -> &Arc<ListCache> {
        match self {
            Backend::Pool(_, lists) | Backend::Federated(_, lists) => lists,
        }
    }

    /// Whether the upstream is reached with each principal's own credential:
    /// then what it answers may differ per principal.
    pub fn per_principal(&self) -> bool {
        match self {
            Backend::Pool(pool, _) => pool.per_principal(),
            Backend::Federated(federation, _) => federation.per_principal(),
        }
    }

    /// The bounds of the cache hints for the backend's results, for a result
    /// eragate does not keep: per caller when the upstream is reached with each
    /// principal's own credential, unproven otherwise.
    pub fn cache_policy(&self) -> CachePolicy {
        let policy = match self {
            Backend::Pool(pool, _) => pool.cache_policy(),
            Backend::Federated(federation, _) => federation.cache_policy(),
        };
        if self.per_principal() {
            policy.per_caller()
        } else {
            policy
        }
    }

    /// The era the backend speaks: configured, or learned once by probing (on
    /// behalf of `asking`).
    pub async fn era(&self, asking: &Principal) -> Result<Era, UpstreamError> {
        match self {
            Backend::Pool(pool, _) => pool.era(asking).await,
            // The bridge serves a federation through its members, each in its own era.
            Backend::Federated(..) => Ok(Era::Modern),
        }
    }

    /// The era, when already known (no probe); `None` for a federation.
    pub fn era_if_known(&self) -> Option<Era> {
        match self {
            Backend::Pool(pool, _) => pool.era_if_known(),
            Backend::Federated(..) => None,
        }
    }

    /// A legacy backend's `InitializeResult` (its capabilities and identity),
    /// from a warm session (opened on behalf of `asking` if need be).
    pub async fn initialize_result(&self, asking: &Principal) -> Result<Arc<Value>, UpstreamError> {
        match self {
            Backend::Pool(pool, _) => pool.initialize_result(asking).await,
            Backend::Federated(federation, _) => Err(no_session(federation)),
        }
    }

    /// A slot to send one request: waits in a bounded queue when the backend is
    /// at capacity, and is refused past it.
    pub async fn admit(&self) -> Result<Admission, UpstreamError> {
        match self {
            Backend::Pool(pool, _) => pool.admit().await.map(|slot| Admission { _slot: slot }),
            Backend::Federated(federation, _) => match federation.admission().clone().try_acquire_owned() {
                Ok(slot) => Ok(Admission { _slot: slot }),
                Err(_) => {
                    federation.stats().admission_rejected();
                    Err(UpstreamError::Overloaded {
                        upstream: federation.name().to_owned(),
                    })
                }
            },
        }
    }

    /// A live session of the kind `need` names.
    pub async fn session<F>(&self, need: SessionNeed<F>) -> Result<Arc<UpstreamSession>, UpstreamError>
    where
        F: FnOnce() -> Value + Send,
    {
        let (pool, lists) = match self {
            Backend::Pool(pool, lists) => (pool, lists),
            Backend::Federated(federation, _) => return Err(no_session(federation)),
        };
        let pooled = match need {
            SessionNeed::Stateless { principal } => return pool.modern_session(&principal).await,
            SessionNeed::Dedicated { params, principal } => return pool.open_dedicated(params, &principal).await,
            SessionNeed::Shared { key, initialize } => pool.pooled(key, initialize).await?,
            SessionNeed::Alone { key, initialize } => pool.pooled_exclusive(key, initialize).await?,
        };
        // Whatever a request does on a pooled session, a list change it causes is heard.
        lists.watch(&pooled);
        Ok(pooled)
    }

    /// Takes over a dedicated HTTP upstream session another replica opened on
    /// the member `endpoint`; `None` where sessions cannot move between processes (stdio).
    pub fn resume_dedicated(
        &self,
        endpoint: Option<&str>,
        upstream_session_id: &str,
        revision: Revision,
    ) -> Option<Arc<UpstreamSession>> {
        match self {
            Backend::Pool(pool, _) => pool.resume_dedicated(endpoint, upstream_session_id, revision),
            Backend::Federated(..) => None,
        }
    }

    /// Drops a pooled session that turned out dead, so the next request opens a new one.
    pub fn discard(&self, session: &Arc<UpstreamSession>) {
        match self {
            Backend::Pool(pool, _) => pool.discard(session),
            Backend::Federated(..) => {}
        }
    }

    /// Whether both name the same backend.
    pub fn same(&self, other: &Backend) -> bool {
        match (self, other) {
            (Backend::Pool(a, _), Backend::Pool(b, _)) => Arc::ptr_eq(a, b),
            (Backend::Federated(a, _), Backend::Federated(b, _)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Whether `other` serves this backend's path: the same backend, or the one
    /// that replaced it in a reload (a session keeps the backend it was opened
    /// on until it ends, while new sessions go to the new one).
    pub fn same_route(&self, other: &Backend) -> bool {
        self.same(other) || self.config().path == other.config().path
    }

    /// Whether nothing but the caller holds this backend: no session, request
    /// or stream uses it any more (a retired backend may then close).
    pub fn is_unused(&self) -> bool {
        match self {
            Backend::Pool(pool, _) => Arc::strong_count(pool) == 1,
            Backend::Federated(federation, _) => {
                Arc::strong_count(federation) == 1 && federation.members().iter().all(|m| m.backend.is_unused())
            }
        }
    }

    // === lifecycle ===

    /// Learns the era and opens the first session in the background, so the
    /// first client waits for nothing.
    pub fn warm(&self) {
        let pool = match self {
            Backend::Pool(pool, _) => pool.clone(),
            Backend::Federated(federation, _) => {
                federation.members().iter().for_each(|m| m.backend.warm());
                return;
            }
        };
        tokio::spawn(async move {
            if let Err(error) = pool.warm().await {
                tracing::warn!(upstream = %pool.name(), error = %error, "could not warm upstream");
            }
        });
    }

    /// Starts the backend's active health checks.
    pub fn spawn_health_checks(&self) {
        match self {
            Backend::Pool(pool, _) => pool.spawn_health_checks(),
            Backend::Federated(federation, _) => {
                federation
                    .members()
                    .iter()
                    .for_each(|m| m.backend.spawn_health_checks());
            }
        }
    }

    /// Whether the backend has a live session (readiness).
    pub fn is_ready(&self) -> bool {
        match self {
            Backend::Pool(pool, _) => pool.has_live_session(),
            // A federation serves while any member does; lists say who is left out.
            Backend::Federated(federation, _) => federation.members().iter().any(|m| m.backend.is_ready()),
        }
    }

    /// The admin view of the backend's one upstream (a federation: of its first member).
    pub fn snapshot(&self) -> Value {
        self.snapshots().into_iter().next().unwrap_or_default()
    }

    /// The admin view of every upstream behind the backend.
    pub fn snapshots(&self) -> Vec<Value> {
        match self {
            Backend::Pool(pool, _) => vec![pool.snapshot()],
            Backend::Federated(federation, _) => federation.snapshots(),
        }
    }

    /// Closes every session and stops spares (shutdown).
    pub fn close_all(&self) {
        match self {
            Backend::Pool(pool, _) => pool.close_all(),
            Backend::Federated(federation, _) => federation.members().iter().for_each(|m| m.backend.close_all()),
        }
    }
}

/// A federation lends no session: its requests are served by its members.
fn no_session(federation: &Federation) -> UpstreamError {
    UpstreamError::Unavailable {
        upstream: federation.name().to_owned(),
        reason: "a federated path has no session of its own; its members serve it".into(),
    }
}
