//! One member of an upstream's pool (a stdio command, or one HTTP endpoint of a
//! service) with its health: passive (failed requests, crashed children) and
//! active (periodic probes), taken out of rotation and back in by thresholds.
//! A member never opens sessions itself: the pool does, on the member it chose.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use serde_json::{Value, json};

use super::transport::stdio::StdioSpawner;
use super::transport::streamable_http::Endpoint;
use crate::config::HealthConfig;

/// How a member is reached.
pub(crate) enum Target {
    /// Children of one command.
    Stdio(Arc<StdioSpawner>),
    /// A Streamable HTTP endpoint.
    Http(Arc<Endpoint>),
    /// A 2024-11-05 HTTP+SSE endpoint.
    Sse(Arc<Endpoint>),
}

/// A pool member and its health.
pub(crate) struct Member {
    /// How to reach it.
    pub(crate) target: Target,
    /// For logs and the admin view: the URL, or `stdio`.
    pub(crate) label: String,
    /// Health and counters, shared with the sessions opened on this member.
    pub(crate) health: Arc<MemberHealth>,
}

/// A member's health, updated by its sessions and by probes.
pub(crate) struct MemberHealth {
    healthy: AtomicBool,
    consecutive_failures: AtomicU32,
    consecutive_successes: AtomicU32,
    unhealthy_after: u32,
    healthy_after: u32,
    /// Sessions ever opened on this member.
    pub(crate) sessions_opened: AtomicU64,
    label: String,
}

impl Member {
    /// A healthy member.
    pub(crate) fn new(target: Target, label: String, config: &HealthConfig) -> Arc<Member> {
        let health = Arc::new(MemberHealth {
            healthy: AtomicBool::new(true),
            consecutive_failures: AtomicU32::new(0),
            consecutive_successes: AtomicU32::new(0),
            unhealthy_after: config.unhealthy_after.max(1),
            healthy_after: config.healthy_after.max(1),
            sessions_opened: AtomicU64::new(0),
            label: label.clone(),
        });
        Arc::new(Member { target, label, health })
    }

    /// The admin view of this member.
    pub(crate) fn snapshot(&self, sessions: usize, in_flight: usize) -> Value {
        let (restarts, crash_loop, children) = match &self.target {
            Target::Stdio(spawner) => (spawner.restarts(), spawner.crash_looping(), spawner.live_children()),
            Target::Http(..) | Target::Sse(..) => (0, false, 0),
        };
        json!({
            "member": self.label,
            "healthy": self.health.is_healthy(),
            "consecutive_failures": self.health.consecutive_failures.load(Ordering::Relaxed),
            "sessions": sessions,
            "sessions_opened": self.health.sessions_opened.load(Ordering::Relaxed),
            "in_flight": in_flight,
            "restarts": restarts,
            "crash_loop": crash_loop,
            "children": children,
        })
    }
}

impl MemberHealth {
    /// Whether the member is in rotation.
    pub(crate) fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Acquire)
    }

    /// A request (or probe) succeeded.
    pub(crate) fn record_success(&self) {
        self.consecutive_failures.store(0, Ordering::Relaxed);
        if self.is_healthy() {
            return;
        }
        let successes = self.consecutive_successes.fetch_add(1, Ordering::Relaxed) + 1;
        if successes >= self.healthy_after {
            self.healthy.store(true, Ordering::Release);
            self.consecutive_successes.store(0, Ordering::Relaxed);
            tracing::info!(member = %self.label, "member back in rotation");
        }
    }

    /// A request (or probe) failed for a reason that is the member's.
    pub(crate) fn record_failure(&self, reason: &str) {
        self.consecutive_successes.store(0, Ordering::Relaxed);
        let failures = self.consecutive_failures.fetch_add(1, Ordering::Relaxed) + 1;
        if failures >= self.unhealthy_after && self.healthy.swap(false, Ordering::AcqRel) {
            tracing::warn!(member = %self.label, failures, reason, "member taken out of rotation");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HealthConfig;

    fn health(unhealthy_after: u32, healthy_after: u32) -> MemberHealth {
        MemberHealth {
            healthy: AtomicBool::new(true),
            consecutive_failures: AtomicU32::new(0),
            consecutive_successes: AtomicU32::new(0),
            unhealthy_after,
            healthy_after,
            sessions_opened: AtomicU64::new(0),
            label: "m".into(),
        }
    }

    #[test]
    fn thresholds_take_members_out_and_back() {
        let h = health(3, 2);
        h.record_failure("x");
        h.record_failure("x");
        assert!(h.is_healthy());
        h.record_success(); // resets the streak
        h.record_failure("x");
        h.record_failure("x");
        assert!(h.is_healthy());
        h.record_failure("x");
        assert!(!h.is_healthy());
        h.record_success();
        assert!(!h.is_healthy());
        h.record_success();
        assert!(h.is_healthy());
        let _ = HealthConfig::default();
    }
}
