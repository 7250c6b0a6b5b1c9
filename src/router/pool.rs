//! One upstream served on its own path: its replicas, pooled sessions and
//! health ([`Upstream`]) and the lists eragate keeps of it ([`ListCache`]). A
//! [`Pool`] is what the bridge asks for an era, a handshake result, an
//! admission slot and a session of the kind a request needs; it never sees
//! members, partitions, transports or children. A federation's members are
//! pools too.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;

use super::list_cache::ListCache;
use super::serves::Serves;
use super::{PartitionKey, UpstreamError, UpstreamSession};
use crate::auth::Principal;
use crate::config::{LegacySessions, UpstreamConfig};
use crate::protocol::{Era, Revision};
use crate::telemetry::UpstreamStats;
use crate::translate::CachePolicy;
use crate::upstream::Upstream;

/// One upstream server and the lists eragate keeps of it (two cheap clones).
#[derive(Clone)]
pub(crate) struct Pool {
    upstream: Arc<Upstream>,
    lists: Arc<ListCache>,
}

/// The session a request needs.
pub(crate) enum SessionNeed<F> {
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
    pub(crate) fn stateless(principal: &Principal) -> SessionNeed<fn() -> Value> {
        SessionNeed::Stateless {
            principal: principal.clone(),
        }
    }
}

/// A slot of the upstream's in-flight bound, held until the request ends.
pub(crate) struct Admission {
    _slot: OwnedSemaphorePermit,
}

impl Pool {
    /// `upstream`, with the lists kept of it.
    pub(super) fn new(upstream: Arc<Upstream>, lists: ListCache) -> Pool {
        Pool {
            upstream,
            lists: Arc::new(lists),
        }
    }

    /// The configured name (for logs and errors).
    pub(crate) fn name(&self) -> &str {
        self.upstream.name()
    }

    /// The counters operators see (admission refusals, handshakes saved, last success).
    pub(crate) fn stats(&self) -> &Arc<UpstreamStats> {
        self.upstream.stats()
    }

    /// The upstream's configuration.
    pub(crate) fn config(&self) -> &UpstreamConfig {
        self.upstream.config()
    }

    /// The time a request of `method` may take.
    pub(crate) fn timeout_for(&self, method: &str) -> Duration {
        self.config().timeout_for(method)
    }

    /// Whether legacy clients share pooled upstream sessions or get their own.
    pub(crate) fn legacy_sessions(&self) -> LegacySessions {
        self.config().pool.legacy_sessions
    }

    /// The lists kept of the upstream.
    pub(crate) fn lists(&self) -> &Arc<ListCache> {
        &self.lists
    }

    /// Whether the upstream is reached with each principal's own credential:
    /// then what it answers may differ per principal.
    pub(crate) fn per_principal(&self) -> bool {
        self.upstream.per_principal()
    }

    /// The bounds of the cache hints for the upstream's results, for a result
    /// eragate does not keep: per caller when the upstream is reached with each
    /// principal's own credential, unproven otherwise.
    pub(crate) fn cache_policy(&self) -> CachePolicy {
        let policy = self.upstream.cache_policy();
        if self.per_principal() {
            policy.per_caller()
        } else {
            policy
        }
    }

    /// The era the upstream speaks: configured, or learned once by probing (on
    /// behalf of `asking`).
    pub(crate) async fn era(&self, asking: &Principal) -> Result<Era, UpstreamError> {
        self.upstream.era(asking).await
    }

    /// The era, when already known (no probe).
    pub(crate) fn era_if_known(&self) -> Option<Era> {
        self.upstream.era_if_known()
    }

    /// A legacy upstream's `InitializeResult` (its capabilities and identity),
    /// from a warm session (opened on behalf of `asking` if need be).
    pub(crate) async fn initialize_result(&self, asking: &Principal) -> Result<Arc<Value>, UpstreamError> {
        self.upstream.initialize_result(asking).await
    }

    /// A slot to send one request: waits in a bounded queue when the upstream is
    /// at capacity, and is refused past it.
    pub(crate) async fn admit(&self) -> Result<Admission, UpstreamError> {
        self.upstream.admit().await.map(|slot| Admission { _slot: slot })
    }

    /// A live session of the kind `need` names.
    pub(crate) async fn session<F>(&self, need: SessionNeed<F>) -> Result<Arc<UpstreamSession>, UpstreamError>
    where
        F: FnOnce() -> Value + Send,
    {
        let upstream = &self.upstream;
        let pooled = match need {
            SessionNeed::Stateless { principal } => return upstream.modern_session(&principal).await,
            SessionNeed::Dedicated { params, principal } => return upstream.open_dedicated(params, &principal).await,
            SessionNeed::Shared { key, initialize } => upstream.pooled(key, initialize).await?,
            SessionNeed::Alone { key, initialize } => upstream.pooled_exclusive(key, initialize).await?,
        };
        // Whatever a request does on a pooled session, a list change it causes is heard.
        self.lists.watch(&pooled);
        Ok(pooled)
    }

    /// Takes over a dedicated HTTP upstream session another replica opened on
    /// the member `endpoint`; `None` where sessions cannot move between processes (stdio).
    pub(crate) fn resume_dedicated(
        &self,
        endpoint: Option<&str>,
        upstream_session_id: &str,
        revision: Revision,
    ) -> Option<Arc<UpstreamSession>> {
        self.upstream.resume_dedicated(endpoint, upstream_session_id, revision)
    }

    /// Drops a pooled session that turned out dead, so the next request opens a new one.
    pub(crate) fn discard(&self, session: &Arc<UpstreamSession>) {
        self.upstream.discard(session);
    }

    /// The admin view of the upstream.
    pub(crate) fn snapshot(&self) -> Value {
        self.upstream.snapshot()
    }

    /// Whether both are the same upstream.
    pub(crate) fn same(&self, other: &Pool) -> bool {
        Arc::ptr_eq(&self.upstream, &other.upstream)
    }
}

impl Serves for Pool {
    fn name(&self) -> &str {
        Pool::name(self)
    }

    fn stats(&self) -> &Arc<UpstreamStats> {
        Pool::stats(self)
    }

    fn config(&self) -> &UpstreamConfig {
        Pool::config(self)
    }

    fn configs(&self) -> Vec<&UpstreamConfig> {
        vec![self.config()]
    }

    fn is_unused(&self) -> bool {
        Arc::strong_count(&self.upstream) == 1
    }

    fn warm(&self) {
        let upstream = self.upstream.clone();
        tokio::spawn(async move {
            if let Err(error) = upstream.warm().await {
                tracing::warn!(upstream = %upstream.name(), error = %error, "could not warm upstream");
            }
        });
    }

    fn spawn_health_checks(&self) {
        self.upstream.spawn_health_checks();
    }

    fn is_ready(&self) -> bool {
        self.upstream.has_live_session()
    }

    fn snapshots(&self) -> Vec<Value> {
        vec![self.snapshot()]
    }

    fn close_all(&self) {
        self.upstream.close_all();
    }
}
