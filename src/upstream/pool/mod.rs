//! One configured upstream: its members, the warm pooled sessions that serve
//! pooled traffic, dedicated sessions for legacy clients, and admission.
//! It never reads the wire and never translates between eras.
//!
//! Pooled sessions are keyed by [`PartitionKey`] (principal and capability
//! profile), so a session is never shared across principals or across clients
//! that declared different capabilities. Within a partition, requests go to
//! the session with the fewest in flight on a healthy member; another session
//! (another stdio child, or a session on another HTTP endpoint) is opened while
//! every session is busy and the partition is below `pool.size`. Requests on
//! one session are multiplexed; the session rewrites ids so they never collide.
//!
//! | file | what of an upstream it holds |
//! |---|---|
//! | `era.rs` | its era: pinned, or learned by probing |
//! | `admission.rs` | the in-flight bound and its queue |
//! | `partition.rs` | the partitions of pooled sessions |
//! | `pooled.rs` | picking, opening and retiring pooled sessions |
//! | `dedicated.rs` | sessions of their own for legacy clients |
//! | `members.rs` | members, member choice, connecting to one |
//! | `health.rs` | active health checks |
//! | `snapshot.rs` | the admin view |

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use self::era::EraCell;
pub(crate) use self::partition::PartitionKey;
use self::partition::Partitions;
use self::partition::Pooled;
use self::permits::Admission;
use super::member::{Member, Target};
use super::transport::stdio::ChildSupervisor;
use crate::auth::Principal;
use crate::config::UpstreamConfig;
use crate::policy::held::{HeldQuota, Hold};
use crate::protocol::Era;
use crate::protocol::errors::Rejection;
use crate::telemetry::UpstreamStats;
use crate::translate::CachePolicy;
use crate::upstream::credentials::{Registrations, UpstreamCredentials};
use crate::upstream::error::UpstreamError;

mod dedicated;
mod era;
mod health;
mod members;
mod partition;
mod permits;
mod pooled;
mod snapshot;

/// What a principal's share of an upstream's sessions is called in refusals.
const SHARE: &str = "upstream sessions (pool.max_children_per_principal)";

/// One configured upstream server.
pub(crate) struct Upstream {
    name: Arc<str>,
    config: UpstreamConfig,
    members: Vec<Arc<Member>>,
    /// Round-robin cursor for dedicated sessions over healthy members.
    next_member: AtomicUsize,
    partitions: Partitions,
    /// Each principal's share of its sessions (`pool.max_children_per_principal`):
    /// every session a principal causes holds a place, given back when it closes.
    shares: Arc<HeldQuota>,
    /// The newest `InitializeResult` seen, for `server/discover`.
    latest_initialize: RwLock<Option<Arc<Value>>>,
    admission: Admission,
    epoch: Instant,
    era: EraCell,
    /// Whether the credential toward it is a principal's own (token exchange):
    /// then even its stateless connections belong to one principal each.
    per_principal: bool,
    /// What operators are told about this upstream (shared with the requests it serves).
    stats: Arc<UpstreamStats>,
}

impl Upstream {
    /// An upstream from its configuration, its OAuth client (if any) registered
    /// through `registrations`. Nothing starts until [`Upstream::warm`] or the first request.
    pub(crate) fn new(
        config: UpstreamConfig,
        supervisor: ChildSupervisor,
        registrations: &Arc<Registrations>,
    ) -> Arc<Upstream> {
        let name: Arc<str> = Arc::from(config.name.as_str());
        let credentials = Arc::new(UpstreamCredentials::from_config(&config, registrations));
        let members = members::members(&name, &config, supervisor, &credentials);
        let stats = Arc::new(UpstreamStats::new(name.clone()));
        Arc::new(Upstream {
            name,
            members,
            next_member: AtomicUsize::new(0),
            partitions: Partitions::new(config.pool.max_partitions, config.pool.max_partitions_per_principal),
            shares: HeldQuota::new(SHARE, config.pool.max_children_per_principal, usize::MAX),
            latest_initialize: RwLock::new(None),
            admission: Admission::new(&config),
            epoch: Instant::now(),
            era: EraCell::new(&config),
            per_principal: credentials.per_principal(),
            stats,
            config,
        })
    }

    /// The configured name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Its counters for operators.
    pub(crate) fn stats(&self) -> &Arc<UpstreamStats> {
        &self.stats
    }

    /// The configuration.
    pub(crate) fn config(&self) -> &UpstreamConfig {
        &self.config
    }

    /// Whether it is reached with each principal's own credential (token exchange).
    pub(crate) fn per_principal(&self) -> bool {
        self.per_principal
    }

    /// A place in `principal`'s share for one more session (`None`: it counts for no
    /// one); refused while the principal holds `pool.max_children_per_principal`.
    /// Sessions opened for nobody in particular (the stateless pool every principal
    /// shares, warm sessions, an anonymous caller's) count for no one.
    pub(super) fn share_for(&self, principal: &str) -> Result<Option<Hold>, UpstreamError> {
        if principal.is_empty() {
            return Ok(None);
        }
        match self.shares.hold(principal) {
            Ok(hold) => Ok(Some(hold)),
            Err(Rejection::QuotaExceeded { what, limit }) => Err(UpstreamError::ShareExhausted {
                upstream: self.name.to_string(),
                what,
                limit,
            }),
            Err(_) => Ok(None),
        }
    }

    /// The cache hints for this upstream's results.
    pub(crate) fn cache_policy(&self) -> CachePolicy {
        self.config.cache.policy()
    }

    /// Learns the era, opens the first session and starts spares, so the first
    /// client waits for nothing. An upstream reached with a principal's own
    /// credential has nothing to open before a principal asks.
    pub(crate) async fn warm(self: &Arc<Self>) -> Result<(), UpstreamError> {
        for member in &self.members {
            if let Target::Stdio(spawner) = &member.target {
                spawner.refill();
            }
        }
        if self.per_principal {
            tracing::info!(upstream = %self.name, "reached with each principal's own token: opened on the first request");
            return Ok(());
        }
        let nobody = Principal::anonymous();
        match self.era(&nobody).await? {
            Era::Legacy => self.initialize_result(&nobody).await.map(|_| ()),
            Era::Modern => self.modern_session(&nobody).await.map(|_| ()),
        }
    }

    /// Closes every pooled session and stops the spares (shutdown).
    pub(crate) fn close_all(&self) {
        for member in &self.members {
            if let Target::Stdio(spawner) = &member.target {
                spawner.stop_spares();
            }
        }
        self.partitions.close_all("eragate is shutting down");
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

/// How eragate introduces itself when no client identity is at hand.
pub(crate) fn gateway_client_info() -> Value {
    json!({"name": "eragate", "version": env!("CARGO_PKG_VERSION")})
}
