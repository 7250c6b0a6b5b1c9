//! Joins the front end to the upstreams: which upstream serves a request path.

use std::collections::HashMap;
use std::sync::Arc;

use crate::upstream::Upstream;

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

    /// Every upstream.
    pub fn upstreams(&self) -> impl Iterator<Item = &Arc<Upstream>> {
        self.routes.values()
    }
}
