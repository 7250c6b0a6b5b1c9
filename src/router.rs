//! Joins the front end to the upstreams: which upstream serves a request path.

use std::collections::HashMap;
use std::sync::Arc;

use crate::upstream::Upstream;

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

/// Upstreams by the MCP path they are served on.
pub struct Router {
    routes: HashMap<String, Arc<Upstream>>,
}

impl Router {
    /// A router over `upstreams` (paths are unique; configuration validation ensures it).
    pub fn new(upstreams: Vec<Arc<Upstream>>) -> Router {
        let routes = upstreams.into_iter().map(|u| (u.config().path.clone(), u)).collect();
        Router { routes }
    }

    /// The upstream serving `path`, ignoring one trailing slash.
    pub fn route(&self, path: &str) -> Option<&Arc<Upstream>> {
        self.routes
            .get(path)
            .or_else(|| path.strip_suffix('/').and_then(|p| self.routes.get(p)))
    }

    /// Which endpoint `path` names, and for which upstream: the MCP path itself,
    /// or the legacy HTTP+SSE pair `<path>/sse` and `<path>/messages` (also
    /// `/sse` and `/messages` for the upstream served at `/mcp`).
    pub fn endpoint(&self, path: &str) -> Option<(Endpoint, &Arc<Upstream>)> {
        if let Some(upstream) = self.route(path) {
            return Some((Endpoint::Mcp, upstream));
        }
        for (suffix, endpoint) in [("/sse", Endpoint::SseStream), ("/messages", Endpoint::SseMessages)] {
            let path = path.strip_suffix('/').unwrap_or(path);
            if let Some(prefix) = path.strip_suffix(suffix) {
                let base = if prefix.is_empty() { "/mcp" } else { prefix };
                if let Some(upstream) = self.routes.get(base) {
                    return Some((endpoint, upstream));
                }
            }
        }
        None
    }

    /// Every upstream.
    pub fn upstreams(&self) -> impl Iterator<Item = &Arc<Upstream>> {
        self.routes.values()
    }
}
