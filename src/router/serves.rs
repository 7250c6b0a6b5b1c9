//! What every backend answers for, one upstream or a federation: the one
//! trait [`super::Backend`] reaches both sides through.

use std::sync::Arc;

use serde_json::Value;

use crate::config::UpstreamConfig;
use crate::telemetry::UpstreamStats;

/// What every backend answers for, one upstream or a federation of them: its
/// name, counters and configuration, and its lifecycle (a federation's is its
/// members').
pub(crate) trait Serves {
    /// The configured name (a federation's is its path).
    fn name(&self) -> &str;
    /// The counters operators see.
    fn stats(&self) -> &Arc<UpstreamStats>;
    /// The configuration standing for the backend (a federation's: its first
    /// member's under the federation's name).
    fn config(&self) -> &UpstreamConfig;
    /// The configuration of every upstream behind it (a reload compares them).
    fn configs(&self) -> Vec<&UpstreamConfig>;
    /// Whether nothing but the caller holds it: no session, request or stream
    /// uses it any more (a retired backend may then close).
    fn is_unused(&self) -> bool;
    /// Learns the era and opens the first session in the background, so the
    /// first client waits for nothing.
    fn warm(&self);
    /// Starts the active health checks.
    fn spawn_health_checks(&self);
    /// Whether it can serve now (readiness).
    fn is_ready(&self) -> bool;
    /// The admin view of every upstream behind it.
    fn snapshots(&self) -> Vec<Value>;
    /// Closes every session and stops spares (shutdown).
    fn close_all(&self);
}
