//! The composition root: builds every part of the gateway from one
//! configuration, starts and stops them, and hands each consumer the narrow
//! view it needs. The bridge, which is the request path and uses nearly every
//! part, reaches them through crate-internal accessors; the client edge reads an
//! [`EdgeView`] (and hands each request to the bridge's intake), the admin
//! listener an [`Observed`] view, and a reload changes what a [`Reconfigurable`]
//! view lets it change.

use std::sync::{Arc, Weak};

use crate::auth::Authenticator;
use crate::bridge::mrtr::SuspendedCalls;
use crate::bridge::param_headers::UpstreamToolFacts;
use crate::bridge::rate::RateGate;
use crate::bridge::revocations::{Ended, EndedSessions, Revocations};
use crate::bridge::sessions::SessionStore;
use crate::config::{Config, ListenConfig};
use crate::policy::held::HeldQuota;
use crate::router::{Backend, Endpoint, Router};
use crate::tasks::store::TaskStore;
use crate::telemetry::Telemetry;

/// How often the pin files are checked for changes made elsewhere.
const PIN_WATCH_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// How often idle legacy sessions are looked for.
const SESSION_REAPER_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// Everything a request handler needs, shared by every connection.
pub(crate) struct Gateway {
    /// The configuration loaded at start: what is read at start only comes from here.
    config: Arc<Config>,
    /// The configuration applied last (the start's, then each accepted reload's): the
    /// keys read per request or per connection (`[limits]`, `listen.max_body_bytes`)
    /// come from here, so a reload applies them to the next one. See [`Gateway::limits`].
    applied: Arc<arc_swap::ArcSwap<Config>>,
    /// Backends by path.
    router: Router,
    /// Legacy client sessions.
    sessions: SessionStore,
    /// Upstream calls waiting for a modern client's input.
    suspended: Arc<SuspendedCalls>,
    /// The tasks this replica runs for 2026-07-28 clients.
    tasks: Arc<TaskStore>,
    /// Cancelled when shutdown begins: standing streams end then.
    closing: tokio_util::sync::CancellationToken,
    /// Who may use the MCP endpoints, and as whom.
    auth: Authenticator,
    /// The built-in authorization server (`[auth.server]`), when on.
    authz: Option<Arc<crate::authz::AuthServer>>,
    /// Modern HTTP upstreams' `x-mcp-header` annotations, for legacy clients' calls.
    tool_facts: UpstreamToolFacts,
    /// The search indexes of the listings `[[disclosure]]` searched last.
    catalogues: crate::disclosure::Catalogues,
    /// `[rate_limits]`; a reload swaps in a new gate.
    rate: arc_swap::ArcSwap<RateGate>,
    /// Open listens per principal.
    listens: Arc<HeldQuota>,
    /// Requests in flight per principal (`limits.max_in_flight_per_principal`).
    in_flight: Arc<HeldQuota>,
    /// Metrics, access log and the live discover summary.
    telemetry: Arc<Telemetry>,
    /// The pinned upstreams' pins and pending drifts (`[upstreams.pins]`); read at start.
    pins: Arc<crate::pins::book::PinRegistry>,
    /// This gateway, for work a request starts that outlives it (a federated
    /// listen reopening a member's share): it ends with the gateway.
    me: std::sync::Weak<Gateway>,
}

/// Search indexes kept for `[[disclosure]]`: one per listing a caller saw lately.
const CATALOGUES_KEPT: usize = 16;

impl Gateway {
    /// The search indexes of the listings `[[disclosure]]` searched last.
    pub(crate) fn catalogues(&self) -> &crate::disclosure::Catalogues {
        &self.catalogues
    }

    /// Builds the gateway for `config`, its pins read. Nothing is started yet. Fails when a
    /// configured token's environment variable is unset or a pin store cannot be read.
    pub(crate) async fn new(config: Config) -> std::io::Result<Arc<Gateway>> {
        let auth = Authenticator::from_config(&config)
            .map_err(|message| std::io::Error::new(std::io::ErrorKind::InvalidInput, message))?;
        let authz = crate::authz::AuthServer::from_config(&config, auth.oauth().as_deref())
            .map_err(|message| std::io::Error::new(std::io::ErrorKind::InvalidInput, message))?;
        crate::router::set_max_message_values(config.limits.max_upstream_values);
        crate::router::set_max_buffered_bytes(config.limits.max_upstream_buffered_bytes);
        let router = Router::new(&config.upstreams, config.secret_env_names());
        let sessions = SessionStore::new(config.sessions.clone(), config.limits.max_ended_sessions);
        let suspended = Arc::new(SuspendedCalls::new(&config.sessions));
        let tasks = Arc::new(TaskStore::new(&config.tasks));
        let rate = arc_swap::ArcSwap::from_pointee(RateGate::new(&config));
        let limits = &config.limits;
        let listens = HeldQuota::new("listens", limits.max_listens_per_principal, limits.max_listens);
        let in_flight = HeldQuota::new("requests in flight", limits.in_flight_per_principal(), usize::MAX);
        in_flight.set_binds_anonymous(limits.in_flight_binds_anonymous());
        let telemetry = Telemetry::new(&config)
            .map_err(|message| std::io::Error::new(std::io::ErrorKind::InvalidInput, message))?;
        let telemetry = Arc::new(telemetry);
        let pins = crate::pins::book::PinRegistry::open(&config)
            .await
            .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidInput, error.to_string()))?;
        let pins = Arc::new(pins);
        let config = Arc::new(config);
        Ok(Arc::new_cyclic(|me| Gateway {
            me: me.clone(),
            applied: Arc::new(arc_swap::ArcSwap::new(config.clone())),
            config,
            router,
            sessions,
            suspended,
            tasks,
            closing: tokio_util::sync::CancellationToken::new(),
            auth,
            authz,
            tool_facts: UpstreamToolFacts::default(),
            catalogues: crate::disclosure::Catalogues::new(CATALOGUES_KEPT),
            rate,
            listens,
            in_flight,
            telemetry,
            pins,
        }))
    }

    /// The pinned upstreams.
    pub(crate) fn pins(&self) -> &crate::pins::book::PinRegistry {
        &self.pins
    }

    /// A handle on this gateway that does not keep it alive.
    pub(crate) fn weak(&self) -> std::sync::Weak<Gateway> {
        self.me.clone()
    }

    /// `[limits]` as applied now (a reload swaps them; a request reads them once).
    pub(crate) fn limits(&self) -> arc_swap::Guard<Arc<Config>> {
        self.applied.load()
    }

    /// Warms every backend in the background: spares started, the first session initialized.
    pub(crate) fn warm(&self) {
        self.router.warm();
    }

    /// Whether every backend has a live session (readiness).
    pub(crate) fn is_ready(&self) -> bool {
        self.router.is_ready()
    }

    /// Starts what runs beside requests: federations' watchers, the OAuth key
    /// refresh, the built-in authorization server, the idle-session reaper, the
    /// active health checks and the expiry of suspended calls and rate state.
    pub(crate) async fn start(self: &Arc<Self>) -> Result<(), String> {
        for deprecation in self.config.redis_deprecations() {
            tracing::warn!("{deprecation}");
        }
        crate::bridge::spawn_watchers(self);
        self.auth.start();
        if let Some(authz) = &self.authz {
            authz.start().await?;
            tracing::info!(issuer = %authz.issuer(), "serving the built-in authorization server");
        }
        self.spawn_session_reaper(SESSION_REAPER_EVERY);
        self.share_session_endings();
        self.suspended.spawn_expiry();
        self.tasks.spawn_expiry();
        if let Some(target) = self.config.redis_target(crate::config::RedisUser::Tasks) {
            self.tasks.share(target);
        }
        self.rate.load_full().spawn_forgetting();
        self.router.spawn_health_checks();
        self.spawn_pin_watch();
        Ok(())
    }

    /// Re-reads the pin stores another replica (or an operator) changed, every second, for as
    /// long as the gateway lives; nothing runs when no upstream is pinned.
    fn spawn_pin_watch(self: &Arc<Self>) {
        if self.pins.is_empty() {
            return;
        }
        let pins = Arc::clone(&self.pins);
        let closing = self.closing.clone();
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(PIN_WATCH_EVERY);
            loop {
                tokio::select! {
                    _ = ticker.tick() => pins.refresh().await,
                    () = closing.cancelled() => return,
                }
            }
        });
    }

    /// With `[redis]`, shares the sessions ended here with every replica and
    /// ends here those they end ([`crate::bridge::revocations`]).
    fn share_session_endings(self: &Arc<Self>) {
        let Some(target) = self.config.redis_target(crate::config::RedisUser::Sessions) else {
            return;
        };
        let revocations = Arc::new(Revocations::new(target));
        self.sessions.share_endings(revocations.clone());
        let gateway: Weak<Gateway> = Arc::downgrade(self);
        revocations.spawn(gateway);
    }

    /// Ends idle legacy sessions every `every` for as long as the gateway lives.
    fn spawn_session_reaper(self: &Arc<Self>, every: std::time::Duration) {
        crate::periodic::spawn_every(self, every, |gateway| gateway.sessions.expire_idle());
    }

    /// Ends every session and stops every child within `deadline`.
    ///
    /// Requests still in flight are answered with an error first (closing a
    /// session fails what is pending on it), and get a moment to be written.
    pub(crate) async fn shutdown(&self, deadline: std::time::Duration) {
        self.sessions.close_all();
        self.router.shutdown(deadline).await;
        self.telemetry.shutdown().await;
    }

    // === the parts, for the bridge and the edge ===

    /// The configuration loaded at start: what is read at start only comes from here.
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// The configuration applied last, shared with what follows reloads (a long-lived stream).
    pub(crate) fn applied(&self) -> &Arc<arc_swap::ArcSwap<Config>> {
        &self.applied
    }

    /// Backends by path.
    pub(crate) fn router(&self) -> &Router {
        &self.router
    }

    /// Legacy client sessions.
    pub(crate) fn sessions(&self) -> &SessionStore {
        &self.sessions
    }

    /// Upstream calls waiting for a modern client's input.
    pub(crate) fn suspended(&self) -> &Arc<SuspendedCalls> {
        &self.suspended
    }

    /// The tasks this replica runs.
    pub(crate) fn tasks(&self) -> &Arc<TaskStore> {
        &self.tasks
    }

    /// Cancelled when shutdown begins: standing streams end then.
    pub(crate) fn closing(&self) -> &tokio_util::sync::CancellationToken {
        &self.closing
    }

    /// Who may use the MCP endpoints, and as whom.
    pub(crate) fn auth(&self) -> &Authenticator {
        &self.auth
    }

    /// The built-in authorization server, when on.
    pub(crate) fn authz(&self) -> Option<&Arc<crate::authz::AuthServer>> {
        self.authz.as_ref()
    }

    /// Modern HTTP upstreams' `x-mcp-header` annotations.
    pub(crate) fn tool_facts(&self) -> &UpstreamToolFacts {
        &self.tool_facts
    }

    /// `[rate_limits]` as applied now.
    pub(crate) fn rate(&self) -> &arc_swap::ArcSwap<RateGate> {
        &self.rate
    }

    /// Open listens per principal.
    pub(crate) fn listens(&self) -> &Arc<HeldQuota> {
        &self.listens
    }

    /// Requests in flight per principal.
    pub(crate) fn in_flight(&self) -> &Arc<HeldQuota> {
        &self.in_flight
    }

    /// Metrics, access log and the live discover summary.
    pub(crate) fn telemetry(&self) -> &Arc<Telemetry> {
        &self.telemetry
    }

    // === the views ===

    /// What the client edge reads besides handing requests to the bridge.
    pub(crate) fn edge(&self) -> EdgeView<'_> {
        EdgeView(self)
    }

    /// What the admin listener may read.
    pub(crate) fn observed(&self) -> Observed<'_> {
        Observed(self)
    }

    /// What a reload may change.
    pub(crate) fn reconfigurable(&self) -> Reconfigurable<'_> {
        Reconfigurable(self)
    }
}

/// The endings other replicas share reach this gateway's sessions while it lives.
impl EndedSessions for Gateway {
    fn apply_ended(&self, ended: &[Ended]) {
        self.sessions.apply_ended(ended);
    }
}

/// The gateway as the client edge sees it, besides the bridge's intake it hands each
/// request to: its listener's settings, the routes, authentication and the authorization
/// server's pages, the legacy sessions that HTTP+SSE streams and DELETE reach, readiness and
/// the shutdown signal. No upstream, quota, cache or telemetry.
#[derive(Clone, Copy)]
pub(crate) struct EdgeView<'a>(&'a Gateway);

impl<'a> EdgeView<'a> {
    /// `[listen]` as loaded at start (the address, the connection bounds, trusted proxies).
    pub(crate) fn listen(&self) -> &'a ListenConfig {
        &self.0.config.listen
    }

    /// The configuration applied now (limits follow reloads).
    pub(crate) fn applied(&self) -> arc_swap::Guard<Arc<Config>> {
        self.0.limits()
    }

    /// The backend serving `path`, and which of its endpoints it is.
    pub(crate) fn endpoint(&self, path: &str) -> Option<(Endpoint, Backend)> {
        self.0.router.endpoint(path)
    }

    /// Who a request's credential names, and the challenges when it names no one.
    pub(crate) fn auth(&self) -> &'a Authenticator {
        &self.0.auth
    }

    /// The built-in authorization server, when one is configured.
    pub(crate) fn authz(&self) -> Option<&'a Arc<crate::authz::AuthServer>> {
        self.0.authz()
    }

    /// The legacy client sessions (HTTP+SSE streams open one; DELETE ends one).
    pub(crate) fn sessions(&self) -> &'a SessionStore {
        &self.0.sessions
    }

    /// Whether every backend has a live session (readiness).
    pub(crate) fn is_ready(&self) -> bool {
        self.0.is_ready()
    }

    /// Cancelled when eragate stops.
    pub(crate) fn closing(&self) -> &'a tokio_util::sync::CancellationToken {
        self.0.closing()
    }
}

/// The gateway as the admin listener sees it: state to show, nothing to change.
#[derive(Clone, Copy)]
pub(crate) struct Observed<'a>(&'a Gateway);

impl<'a> Observed<'a> {
    /// Whether every backend has a live session (readiness).
    pub(crate) fn is_ready(&self) -> bool {
        self.0.is_ready()
    }

    /// The configuration loaded at start (`[admin]`, `[listen]`: read at start only).
    pub(crate) fn started(&self) -> &Config {
        &self.0.config
    }

    /// Every upstream member's pool state.
    pub(crate) fn upstreams(&self) -> Vec<serde_json::Value> {
        self.0.router.backends().flat_map(|b| b.snapshots()).collect()
    }

    /// Open legacy client sessions.
    pub(crate) fn legacy_sessions(&self) -> usize {
        self.0.sessions.len()
    }

    /// The ended session ids kept (per replica), and what keeping them cost.
    pub(crate) fn ended_sessions(&self) -> crate::bridge::sessions::EndedStats {
        self.0.sessions.ended_stats()
    }

    /// The tasks this replica keeps, and what it has done with them.
    pub(crate) fn task_counts(&self) -> crate::tasks::store::TaskCounts {
        self.0.tasks.counts()
    }

    /// Upstream calls waiting for a modern client's input.
    pub(crate) fn suspended_calls(&self) -> usize {
        self.0.suspended.len()
    }

    /// The client revisions seen, by count.
    pub(crate) fn client_revisions(&self) -> serde_json::Value {
        self.0.telemetry.revisions()
    }

    /// Each MCP path and the upstream (or federation) that serves it.
    pub(crate) fn routes(&self) -> Vec<(String, String)> {
        self.0
            .router
            .routes()
            .map(|(path, backend)| (path.to_owned(), backend.name().to_owned()))
            .collect()
    }

    /// The Prometheus exposition, with `pools` (the pool view) as gauges.
    pub(crate) fn metrics(&self, pools: &serde_json::Value) -> String {
        let mut text = self.0.telemetry.render(pools);
        text.push_str(&self.0.pins.metrics());
        text
    }

    /// The pinned upstreams, for `/pins` and the status page.
    pub(crate) fn pins(&self) -> &'a crate::pins::book::PinRegistry {
        &self.0.pins
    }
}

/// The gateway as a reload sees it: the parts a new configuration may change.
#[derive(Clone, Copy)]
pub(crate) struct Reconfigurable<'a>(&'a Gateway);

impl<'a> Reconfigurable<'a> {
    /// The configuration loaded at start.
    pub(crate) fn started(&self) -> &'a Config {
        &self.0.config
    }

    /// Cancelled when shutdown begins.
    pub(crate) fn closing(&self) -> &'a tokio_util::sync::CancellationToken {
        &self.0.closing
    }

    /// The backends, to start, keep or retire upstreams.
    pub(crate) fn router(&self) -> &'a Router {
        &self.0.router
    }

    /// The telemetry pipeline, to reload.
    pub(crate) fn telemetry(&self) -> &'a Telemetry {
        &self.0.telemetry
    }

    /// The OAuth resource server, to swap.
    pub(crate) fn auth(&self) -> &'a Authenticator {
        &self.0.auth
    }

    /// Swaps in a new `[rate_limits]` gate.
    pub(crate) fn replace_rate_gate(&self, gate: Arc<RateGate>) {
        self.0.rate.store(gate);
    }

    /// Sets the quotas' bounds from `limits`.
    pub(crate) fn set_quotas(&self, limits: &crate::config::LimitsConfig) {
        self.0
            .in_flight
            .set_bounds(limits.in_flight_per_principal(), usize::MAX);
        self.0.in_flight.set_binds_anonymous(limits.in_flight_binds_anonymous());
        self.0
            .listens
            .set_bounds(limits.max_listens_per_principal, limits.max_listens);
    }

    /// Makes `config` the one requests read from now on.
    pub(crate) fn applied(&self, config: Config) {
        self.0.applied.store(Arc::new(config));
    }

    /// Starts a backend a reload added: warmed, health-checked, its federation watched.
    pub(crate) fn start_backend(&self, backend: &crate::router::Backend) {
        backend.warm();
        backend.spawn_health_checks();
        if let Some(gateway) = self.0.me.upgrade() {
            crate::bridge::spawn_watcher(&gateway, backend);
        }
    }
}
