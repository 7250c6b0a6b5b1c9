//! I/O toward clients: the HTTP front end, the legacy client sessions eragate
//! mints, and the shaping of answers as JSON or SSE.
//!
//! Nothing here knows which transport an upstream uses; era decisions are
//! delegated to [`crate::translate`].

mod dispatch;
pub mod http;
mod legacy;
pub mod legacy_sse;
pub mod listen;
mod modern;
pub mod mrtr;
mod param_headers;
pub mod reply;
pub mod respond;
pub mod sessions;
pub mod stdio;

use std::sync::Arc;

use crate::auth::Authenticator;
use crate::config::Config;
use crate::router::Router;
use crate::upstream::Upstream;
use crate::upstream::transport::stdio::ChildSupervisor;
use sessions::SessionStore;

/// Everything a request handler needs, shared by every connection.
pub struct Gateway {
    /// The loaded configuration.
    pub config: Arc<Config>,
    /// Upstreams by path.
    pub router: Router,
    /// Legacy client sessions.
    pub sessions: SessionStore,
    /// Every stdio child, for shutdown.
    pub supervisor: ChildSupervisor,
    /// Open 2024-11-05 HTTP+SSE client connections.
    pub sse_connections: Arc<legacy_sse::SseConnections>,
    /// Upstream calls waiting for a modern client's input.
    pub suspended: Arc<mrtr::SuspendedCalls>,
    /// Cancelled when shutdown begins: standing streams end then.
    pub closing: tokio_util::sync::CancellationToken,
    /// Who may use the MCP endpoints, and as whom.
    pub auth: Authenticator,
    /// Modern HTTP upstreams' `x-mcp-header` annotations, for legacy clients' calls.
    pub tool_headers: param_headers::ToolHeaderCache,
}

impl Gateway {
    /// Builds the gateway for `config`. Nothing is started yet. Fails when a
    /// configured token's environment variable is unset.
    pub fn new(config: Config) -> std::io::Result<Arc<Gateway>> {
        let auth = Authenticator::from_config(&config.auth)
            .map_err(|message| std::io::Error::new(std::io::ErrorKind::InvalidInput, message))?;
        let supervisor = ChildSupervisor::default();
        let upstreams = config
            .upstreams
            .iter()
            .map(|u| Upstream::new(u.clone(), supervisor.clone()))
            .collect();
        let sessions = SessionStore::new(config.sessions.clone());
        let suspended = Arc::new(mrtr::SuspendedCalls::new(config.sessions.input_expiry.0));
        Ok(Arc::new(Gateway {
            config: Arc::new(config),
            router: Router::new(upstreams),
            sessions,
            supervisor,
            sse_connections: Arc::default(),
            suspended,
            closing: tokio_util::sync::CancellationToken::new(),
            auth,
            tool_headers: param_headers::ToolHeaderCache::default(),
        }))
    }

    /// Warms every upstream in the background: spares started, the first session initialized.
    pub fn warm(&self) {
        for upstream in self.router.upstreams() {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                if let Err(error) = upstream.warm().await {
                    tracing::warn!(upstream = %upstream.name(), error = %error, "could not warm upstream");
                }
            });
        }
    }

    /// Whether every upstream has a live session (readiness).
    pub fn is_ready(&self) -> bool {
        self.router.upstreams().all(|u| u.has_live_session())
    }

    /// Starts the active health checks of every upstream, and the expiry of
    /// calls suspended for client input.
    pub fn spawn_health_checks(&self) {
        self.suspended.spawn_expiry();
        for upstream in self.router.upstreams() {
            upstream.spawn_health_checks();
        }
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
        self.sse_connections.close_all();
        self.sessions.close_all();
        for upstream in self.router.upstreams() {
            upstream.close_all();
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        self.supervisor.shutdown(deadline).await;
    }
}
