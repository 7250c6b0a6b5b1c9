//! What serves a route: one upstream ([`Pool`]) or several served as one
//! ([`Federation`]). The bridge tells the two apart once per request, at its
//! dispatch (and once more where it restores a sealed legacy session);
//! everything after asks the side it was handed. What both answer for (name,
//! counters, configuration, lifecycle) is [`Serves`], reached through one
//! match; what only one of them has (an era, sessions, admission; members,
//! exposed names) exists on that side only.

use std::sync::Arc;

use serde_json::Value;

use super::federation::Federation;
use super::pool::Pool;
use super::serves::Serves;
use crate::config::UpstreamConfig;
use crate::telemetry::UpstreamStats;

/// The servers behind one MCP path.
#[derive(Clone)]
pub(crate) enum Backend {
    /// One upstream server.
    Pool(Pool),
    /// Several upstreams served as one on one path.
    Federated(Arc<Federation>),
}

impl Backend {
    /// The side that serves, for what both sides answer.
    fn serves(&self) -> &dyn Serves {
        match self {
            Backend::Pool(pool) => pool,
            Backend::Federated(federation) => federation,
        }
    }

    /// The upstream, when this backend is a single one.
    pub(crate) fn pool(&self) -> Option<&Pool> {
        match self {
            Backend::Pool(pool) => Some(pool),
            Backend::Federated(_) => None,
        }
    }

    /// The federation, when this backend is one.
    pub(crate) fn federation(&self) -> Option<&Arc<Federation>> {
        match self {
            Backend::Pool(_) => None,
            Backend::Federated(federation) => Some(federation),
        }
    }

    /// The configured name (for logs and errors).
    pub(crate) fn name(&self) -> &str {
        self.serves().name()
    }

    /// The counters operators see (admission refusals, handshakes saved, last success).
    pub(crate) fn stats(&self) -> &Arc<UpstreamStats> {
        self.serves().stats()
    }

    /// The backend's configuration (a federation's stands for its own requests).
    pub(crate) fn config(&self) -> &UpstreamConfig {
        self.serves().config()
    }

    /// The configuration of every upstream behind it (a reload compares them).
    pub(crate) fn configs(&self) -> Vec<&UpstreamConfig> {
        self.serves().configs()
    }

    /// Whether both name the same backend.
    pub(crate) fn same(&self, other: &Backend) -> bool {
        match (self, other) {
            (Backend::Pool(a), Backend::Pool(b)) => a.same(b),
            (Backend::Federated(a), Backend::Federated(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Whether this backend serves the path of the backend configured by
    /// `routed`: the same backend, or the one that replaced it in a reload (a
    /// session keeps the backend it was opened on until it ends, while new
    /// sessions go to the new one).
    pub(crate) fn same_route(&self, routed: &UpstreamConfig) -> bool {
        let mine = self.config();
        std::ptr::eq(mine, routed) || mine.path == routed.path
    }

    /// Whether nothing but the caller holds this backend: no session, request
    /// or stream uses it any more (a retired backend may then close).
    pub(crate) fn is_unused(&self) -> bool {
        self.serves().is_unused()
    }

    /// Learns the era and opens the first session in the background, so the
    /// first client waits for nothing.
    pub(crate) fn warm(&self) {
        self.serves().warm();
    }

    /// Starts the backend's active health checks.
    pub(crate) fn spawn_health_checks(&self) {
        self.serves().spawn_health_checks();
    }

    /// Whether the backend can serve now (readiness).
    pub(crate) fn is_ready(&self) -> bool {
        self.serves().is_ready()
    }

    /// The admin view of every upstream behind the backend.
    pub(crate) fn snapshots(&self) -> Vec<Value> {
        self.serves().snapshots()
    }

    /// Closes every session and stops spares (shutdown).
    pub(crate) fn close_all(&self) {
        self.serves().close_all();
    }
}
