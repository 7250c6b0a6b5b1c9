//! Which backend serves a request: the MCP path (or its legacy HTTP+SSE pair)
//! names a [`Backend`]. The router owns the backends and the children they
//! spawn, and is the bridge's only way to the servers: the session and call
//! types re-exported here are the vocabulary a backend's sessions speak.

mod backend;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

pub use crate::upstream::pool::gateway_client_info;
pub use crate::upstream::probe::discover_params;
pub use crate::upstream::transport::set_max_message_values;
pub use crate::upstream::{Call, CallEvent, CallStep, OnDrop, PartitionKey, UpstreamError, UpstreamSession};
pub use backend::{Admission, Backend, SessionNeed};

use crate::config::UpstreamConfig;
use crate::upstream::Upstream;
use crate::upstream::credentials::Registrations;
use crate::upstream::transport::stdio::ChildSupervisor;

/// The kinds of endpoint a request can address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// The Streamable HTTP MCP endpoint.
    Mcp,
    /// `GET …/sse`: a 2024-11-05 HTTP+SSE stream.
    SseStream,
    /// `POST …/messages?session_id=…`: a message for such a stream.
    SseMessages,
}

/// Backends by the MCP path they are served on.
pub struct Router {
    routes: HashMap<String, Backend>,
    /// Every stdio child of every backend, for shutdown.
    supervisor: ChildSupervisor,
}

impl Router {
    /// One backend per configured upstream (paths are unique; configuration
    /// validation ensures it). Nothing starts yet. Children never inherit
    /// `protected_env` (variables holding secrets) through a pattern.
    pub fn new(upstreams: &[UpstreamConfig], protected_env: Vec<String>) -> Router {
        let supervisor = ChildSupervisor::new(protected_env);
        // eragate registers itself once per authorization server, whichever upstreams share it.
        let registrations = Arc::new(Registrations::default());
        let routes = upstreams
            .iter()
            .map(|config| {
                let pool = Upstream::new(config.clone(), supervisor.clone(), &registrations);
                (config.path.clone(), Backend::Pool(pool))
            })
            .collect();
        Router { routes, supervisor }
    }

    /// The backend serving `path`, ignoring one trailing slash.
    pub fn route(&self, path: &str) -> Option<&Backend> {
        self.routes
            .get(path)
            .or_else(|| path.strip_suffix('/').and_then(|p| self.routes.get(p)))
    }

    /// Which endpoint `path` names, and for which backend: the MCP path itself,
    /// or the legacy HTTP+SSE pair `<path>/sse` and `<path>/messages` (also
    /// `/sse` and `/messages` for the backend served at `/mcp`).
    pub fn endpoint(&self, path: &str) -> Option<(Endpoint, &Backend)> {
        if let Some(backend) = self.route(path) {
            return Some((Endpoint::Mcp, backend));
        }
        for (suffix, endpoint) in [("/sse", Endpoint::SseStream), ("/messages", Endpoint::SseMessages)] {
            let path = path.strip_suffix('/').unwrap_or(path);
            if let Some(prefix) = path.strip_suffix(suffix) {
                let base = if prefix.is_empty() { "/mcp" } else { prefix };
                if let Some(backend) = self.routes.get(base) {
                    return Some((endpoint, backend));
                }
            }
        }
        None
    }

    /// The backend named `name`.
    pub fn by_name(&self, name: &str) -> Option<&Backend> {
        self.backends().find(|b| b.name() == name)
    }

    /// Every backend.
    pub fn backends(&self) -> impl Iterator<Item = &Backend> {
        self.routes.values()
    }

    /// Every path with its backend.
    pub fn routes(&self) -> impl Iterator<Item = (&str, &Backend)> {
        self.routes.iter().map(|(path, backend)| (path.as_str(), backend))
    }

    /// Warms every backend in the background.
    pub fn warm(&self) {
        self.backends().for_each(Backend::warm);
    }

    /// Starts every backend's health checks.
    pub fn spawn_health_checks(&self) {
        self.backends().for_each(Backend::spawn_health_checks);
    }

    /// Whether every backend has a live session (readiness).
    pub fn is_ready(&self) -> bool {
        self.backends().all(Backend::is_ready)
    }

    /// Closes every backend's sessions now, then stops every child within `deadline`.
    pub async fn shutdown(&self, deadline: Duration) {
        self.backends().for_each(Backend::close_all);
        // Requests failed by the closing get a moment to be written.
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.supervisor.shutdown(deadline).await;
    }
}
