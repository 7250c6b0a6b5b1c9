//! The era conversations: what eragate says to a client of one era while the
//! backend behind the route speaks another. Modern requests (`modern`),
//! legacy client sessions with sealed ids (`legacy`, [`sessions`]), multi
//! round-trip suspensions ([`mrtr`]), listens ([`listen`]), what principals
//! hold open ([`quota`]), `Mcp-Param-*` mirroring (`param_headers`) and
//! batches meet here, with the lists kept of a legacy upstream (`lists`); `pump` turns a call in
//! flight into what the client sees, handing its messages over through `handoff`.
//!
//! The rules live in [`crate::translate`]; servers are reached only through
//! [`crate::router`]. Nothing here knows a client's transport: the edge hands
//! in a message and renders the [`Reply`] that comes back.

mod admission;
mod client_session;
mod dispatch;
mod federated;
pub(crate) mod handoff;
mod intake;
mod legacy;
pub mod listen;
mod lists;
pub mod live;
mod live_narrowing;
mod modern;
mod modern_side;
pub mod mrtr;
mod param_headers;
mod pooled;
mod pump;
pub mod quota;
pub mod rate;
mod reads;
pub mod reply;
mod restrict;
pub mod sessions;

use std::sync::Arc;

pub use dispatch::{Inbound, dispatch};
pub use federated::{never_collisions, spawn_watcher, spawn_watchers};
pub use intake::{Batches, Intake, Taken, take};
pub use legacy::SessionLookup;
pub use reply::{Reply, Status};
pub use sessions::{AttachError, ClientSession};

use crate::auth::Authenticator;
use crate::config::Config;
use crate::router::Router;
use crate::telemetry::Telemetry;
use sessions::SessionStore;

/// Everything a request handler needs, shared by every connection.
pub struct Gateway {
    /// The configuration loaded at start: what is read at start only comes from here.
    pub config: Arc<Config>,
    /// The configuration applied last (the start's, then each accepted reload's): the
    /// keys read per request or per connection (`[limits]`, `listen.max_body_bytes`)
    /// come from here, so a reload applies them to the next one. See [`Gateway::limits`].
    pub applied: Arc<arc_swap::ArcSwap<Config>>,
    /// Backends by path.
    pub router: Router,
    /// Legacy client sessions.
    pub sessions: SessionStore,
    /// Upstream calls waiting for a modern client's input.
    pub suspended: Arc<mrtr::SuspendedCalls>,
    /// Cancelled when shutdown begins: standing streams end then.
    pub closing: tokio_util::sync::CancellationToken,
    /// Who may use the MCP endpoints, and as whom.
    pub auth: Authenticator,
    /// The built-in authorization server (`[auth.server]`), when on.
    pub authz: Option<Arc<crate::authz::AuthServer>>,
    /// Modern HTTP upstreams' `x-mcp-header` annotations, for legacy clients' calls.
    pub tool_headers: param_headers::ToolHeaderCache,
    /// `[rate_limits]`; a reload swaps in a new gate.
    pub rate: arc_swap::ArcSwap<rate::RateGate>,
    /// Open listens per principal.
    pub listens: Arc<listen::ListenQuota>,
    /// Requests in flight per principal (`limits.max_in_flight_per_principal`).
    pub in_flight: Arc<quota::HeldQuota>,
    /// Metrics, access log and the live discover summary.
    pub telemetry: Arc<Telemetry>,
    /// This gateway, for work a request starts that outlives it (a federated
    /// listen reopening a member's share): it ends with the gateway.
    me: std::sync::Weak<Gateway>,
}

impl Gateway {
    /// Builds the gateway for `config`. Nothing is started yet. Fails when a
    /// configured token's environment variable is unset.
    pub fn new(config: Config) -> std::io::Result<Arc<Gateway>> {
        let auth = Authenticator::from_config(&config)
            .map_err(|message| std::io::Error::new(std::io::ErrorKind::InvalidInput, message))?;
        let authz = crate::authz::AuthServer::from_config(&config, auth.oauth().as_deref())
            .map_err(|message| std::io::Error::new(std::io::ErrorKind::InvalidInput, message))?;
        crate::router::set_max_message_values(config.limits.max_upstream_values);
        let router = Router::new(&config.upstreams, config.secret_env_names());
        let sessions = SessionStore::new(config.sessions.clone(), config.limits.max_ended_sessions);
        let suspended = Arc::new(mrtr::SuspendedCalls::new(&config.sessions));
        let rate = arc_swap::ArcSwap::from_pointee(rate::RateGate::new(&config.rate_limits));
        let limits = &config.limits;
        let listens = listen::ListenQuota::new("listens", limits.max_listens_per_principal, limits.max_listens);
        let in_flight = quota::HeldQuota::new("requests in flight", limits.in_flight_per_principal(), usize::MAX);
        in_flight.set_binds_anonymous(limits.in_flight_binds_anonymous());
        let telemetry = Telemetry::new(&config)
            .map_err(|message| std::io::Error::new(std::io::ErrorKind::InvalidInput, message))?;
        let telemetry = Arc::new(telemetry);
        let config = Arc::new(config);
        Ok(Arc::new_cyclic(|me| Gateway {
            me: me.clone(),
            applied: Arc::new(arc_swap::ArcSwap::new(config.clone())),
            config,
            router,
            sessions,
            suspended,
            closing: tokio_util::sync::CancellationToken::new(),
            auth,
            authz,
            tool_headers: param_headers::ToolHeaderCache::default(),
            rate,
            listens,
            in_flight,
            telemetry,
        }))
    }

    /// A handle on this gateway that does not keep it alive.
    pub fn weak(&self) -> std::sync::Weak<Gateway> {
        self.me.clone()
    }

    /// `[limits]` as applied now (a reload swaps them; a request reads them once).
    pub fn limits(&self) -> arc_swap::Guard<Arc<Config>> {
        self.applied.load()
    }

    /// Warms every backend in the background: spares started, the first session initialized.
    pub fn warm(&self) {
        self.router.warm();
    }

    /// Whether every backend has a live session (readiness).
    pub fn is_ready(&self) -> bool {
        self.router.is_ready()
    }

    /// Starts the active health checks of every backend, and the expiry of
    /// calls suspended for client input.
    pub fn spawn_health_checks(&self) {
        self.suspended.spawn_expiry();
        self.rate.load_full().spawn_forgetting();
        self.router.spawn_health_checks();
    }

    /// Ends idle legacy sessions every `every` for as long as the gateway lives.
    pub fn spawn_session_reaper(self: &Arc<Self>, every: std::time::Duration) {
        let gateway = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(every);
            loop {
                ticker.tick().await;
                let Some(gateway) = gateway.upgrade() else { return };
                gateway.sessions.expire_idle();
            }
        });
    }

    /// Ends every session and stops every child within `deadline`.
    ///
    /// Requests still in flight are answered with an error first (closing a
    /// session fails what is pending on it), and get a moment to be written.
    pub async fn shutdown(&self, deadline: std::time::Duration) {
        self.sessions.close_all();
        self.router.shutdown(deadline).await;
        self.telemetry.shutdown().await;
    }
}
