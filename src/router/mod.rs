//! Which backend serves a request: the MCP path (or its legacy HTTP+SSE pair)
//! names a [`Backend`], one upstream ([`Pool`]) or a federation of them
//! ([`federation::Federation`]). The router owns the backends and the children
//! they spawn, and is the bridge's only way to the servers: the session and
//! call types re-exported here are the vocabulary a pool's sessions speak.

mod backend;
pub(crate) mod federation;
pub(crate) mod list_cache;
mod pool;
pub(crate) mod read_cache;
pub(crate) mod relist;
mod serves;

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

pub(crate) use crate::upstream::pool::gateway_client_info;
pub(crate) use crate::upstream::probe::discover_params;
pub(crate) use crate::upstream::transport::{buffered_stats, set_max_buffered_bytes, set_max_message_values};
pub(crate) use crate::upstream::{Call, CallEvent, CallStep, OnDrop, PartitionKey, UpstreamError, UpstreamSession};
pub(crate) use backend::Backend;
pub(crate) use pool::{Admission, Pool, SessionNeed};

use crate::config::UpstreamConfig;
use crate::fast_hash::FastMap;
use crate::upstream::Upstream;
use crate::upstream::credentials::Registrations;
use crate::upstream::transport::stdio::ChildSupervisor;
use federation::Federation;
use list_cache::ListCache;

/// The kinds of endpoint a request can address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// The Streamable HTTP MCP endpoint.
    Mcp,
    /// `GET …/sse`: a 2024-11-05 HTTP+SSE stream.
    SseStream,
    /// `POST …/messages?session_id=…`: a message for such a stream.
    SseMessages,
}

/// Backends by the MCP path they are served on. The table is swapped whole on
/// a configuration reload ([`Router::reload`]); a request holds the backend it
/// was routed to (a cheap clone), so a swap never pulls one from under it.
pub(crate) struct Router {
    /// Keyed by the configured paths: [`FastMap`].
    routes: ArcSwap<FastMap<String, Backend>>,
    /// Every stdio child of every backend, for shutdown.
    supervisor: ChildSupervisor,
    /// eragate registers itself once per authorization server, whichever upstreams share it.
    registrations: Arc<Registrations>,
}

/// What a reload changed: the backends that start now, and those that drain.
#[derive(Default)]
pub(crate) struct Reloaded {
    /// Backends new or changed: warm them and start their health checks.
    pub(crate) started: Vec<Backend>,
    /// Backends replaced or removed: they finish what they serve, then close.
    pub(crate) retired: Vec<Backend>,
    /// Upstreams kept as they were, warm sessions and all.
    pub(crate) kept: Vec<String>,
}

impl Router {
    /// One backend per path: one upstream's pool, or a federation of the
    /// upstreams sharing the path. Nothing starts yet. Children never inherit
    /// `protected_env` (variables holding secrets) through a pattern.
    pub(crate) fn new(upstreams: &[UpstreamConfig], protected_env: Vec<String>) -> Router {
        let router = Router {
            routes: ArcSwap::default(),
            supervisor: ChildSupervisor::new(protected_env),
            registrations: Arc::new(Registrations::default()),
        };
        let routes = by_path(upstreams)
            .into_iter()
            .map(|(path, configs)| (path, router.backend(&configs)))
            .collect();
        router.routes.store(Arc::new(routes));
        router
    }

    /// The backend of the upstreams on one path (one or more).
    fn backend(&self, configs: &[&UpstreamConfig]) -> Backend {
        match configs {
            [config] => Backend::Pool(self.pool(config)),
            members => {
                let owned: Vec<UpstreamConfig> = members.iter().map(|c| (*c).clone()).collect();
                Backend::Federated(Arc::new(Federation::new(&owned, |config| self.pool(config))))
            }
        }
    }

    fn pool(&self, config: &UpstreamConfig) -> Pool {
        Pool::new(
            Upstream::new(config.clone(), self.supervisor.clone(), &self.registrations),
            ListCache::new(&config.cache),
        )
    }

    /// Serves `upstreams` from now on: an upstream whose configuration is
    /// unchanged (same name, path and keys) keeps its backend; every other gets
    /// a new one. Nothing is started or closed here: see [`Reloaded`].
    pub(crate) fn reload(&self, upstreams: &[UpstreamConfig]) -> Reloaded {
        let old = self.routes.load_full();
        let mut reloaded = Reloaded::default();
        let mut routes = FastMap::with_capacity_and_hasher(upstreams.len(), Default::default());
        for (path, configs) in by_path(upstreams) {
            let backend = match old.get(&path) {
                Some(backend) if backend.configs() == configs => {
                    reloaded.kept.extend(configs.iter().map(|c| c.name.clone()));
                    backend.clone()
                }
                _ => {
                    let backend = self.backend(&configs);
                    reloaded.started.push(backend.clone());
                    backend
                }
            };
            routes.insert(path, backend);
        }
        reloaded.retired = old
            .iter()
            .filter(|(path, backend)| routes.get(*path).is_none_or(|new| !new.same(backend)))
            .map(|(_, backend)| backend.clone())
            .collect();
        self.routes.store(Arc::new(routes));
        reloaded
    }

    /// The backend serving `path`, ignoring one trailing slash.
    pub(crate) fn route(&self, path: &str) -> Option<Backend> {
        let routes = self.routes.load();
        routes
            .get(path)
            .or_else(|| path.strip_suffix('/').and_then(|p| routes.get(p)))
            .cloned()
    }

    /// Which endpoint `path` names, and for which backend: the MCP path itself,
    /// or the legacy HTTP+SSE pair `<path>/sse` and `<path>/messages` (also
    /// `/sse` and `/messages` for the backend served at `/mcp`).
    pub(crate) fn endpoint(&self, path: &str) -> Option<(Endpoint, Backend)> {
        if let Some(backend) = self.route(path) {
            return Some((Endpoint::Mcp, backend));
        }
        let routes = self.routes.load();
        for (suffix, endpoint) in [("/sse", Endpoint::SseStream), ("/messages", Endpoint::SseMessages)] {
            let path = path.strip_suffix('/').unwrap_or(path);
            if let Some(prefix) = path.strip_suffix(suffix) {
                let base = if prefix.is_empty() { "/mcp" } else { prefix };
                if let Some(backend) = routes.get(base) {
                    return Some((endpoint, backend.clone()));
                }
            }
        }
        None
    }

    /// The backend named `name`.
    pub(crate) fn by_name(&self, name: &str) -> Option<Backend> {
        self.backends().find(|b| b.name() == name)
    }

    /// Every backend (as routed now).
    pub(crate) fn backends(&self) -> impl Iterator<Item = Backend> + use<> {
        let routes = self.routes.load_full();
        let backends: Vec<Backend> = routes.values().cloned().collect();
        backends.into_iter()
    }

    /// Every path with its backend (as routed now).
    pub(crate) fn routes(&self) -> impl Iterator<Item = (String, Backend)> + use<> {
        let routes = self.routes.load_full();
        let pairs: Vec<(String, Backend)> = routes.iter().map(|(p, b)| (p.clone(), b.clone())).collect();
        pairs.into_iter()
    }

    /// Warms every backend in the background.
    pub(crate) fn warm(&self) {
        self.backends().for_each(|b| b.warm());
    }

    /// Starts every backend's health checks.
    pub(crate) fn spawn_health_checks(&self) {
        self.backends().for_each(|b| b.spawn_health_checks());
    }

    /// Whether every backend has a live session (readiness).
    pub(crate) fn is_ready(&self) -> bool {
        self.backends().all(|b| b.is_ready())
    }

    /// Closes every backend's sessions now, then stops every child within `deadline`.
    pub(crate) async fn shutdown(&self, deadline: Duration) {
        self.backends().for_each(|b| b.close_all());
        // Requests failed by the closing get a moment to be written.
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.supervisor.shutdown(deadline).await;
    }
}

/// The upstreams by the path they are served on, in configuration order.
fn by_path(upstreams: &[UpstreamConfig]) -> Vec<(String, Vec<&UpstreamConfig>)> {
    let mut paths: Vec<(String, Vec<&UpstreamConfig>)> = Vec::new();
    for config in upstreams {
        match paths.iter_mut().find(|(path, _)| *path == config.path) {
            Some((_, configs)) => configs.push(config),
            None => paths.push((config.path.clone(), vec![config])),
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StdioConfig;

    fn upstream(name: &str, path: &str, program: &str) -> UpstreamConfig {
        let stdio = StdioConfig::from_command(vec![program.to_owned()]);
        let mut config = UpstreamConfig::with_transport(name, Some(stdio), None, None);
        config.path = path.to_owned();
        config
    }

    fn names(backends: &[Backend]) -> Vec<&str> {
        let mut names: Vec<&str> = backends.iter().map(Backend::name).collect();
        names.sort_unstable();
        names
    }

    #[tokio::test]
    async fn upstreams_sharing_a_path_are_one_federated_backend() {
        let router = Router::new(
            &[
                upstream("a", "/f", "x"),
                upstream("b", "/f", "y"),
                upstream("c", "/c", "z"),
            ],
            Vec::new(),
        );
        let federated = router.route("/f").unwrap();
        let members: Vec<&str> = federated
            .federation()
            .map(|f| f.members().iter().map(|m| m.pool.name()).collect())
            .unwrap_or_default();
        assert_eq!(members, ["a", "b"], "in configuration order");
        assert_eq!(federated.name(), "/f", "a federation is named by its path");
        assert!(router.route("/c").unwrap().federation().is_none());

        // Unchanged members keep the federation; a changed member replaces it whole.
        let same = [
            upstream("a", "/f", "x"),
            upstream("b", "/f", "y"),
            upstream("c", "/c", "z"),
        ];
        let reloaded = router.reload(&same);
        assert!(reloaded.started.is_empty(), "{:?}", reloaded.kept);
        assert!(router.route("/f").unwrap().same(&federated));
        let reloaded = router.reload(&[
            upstream("a", "/f", "x"),
            upstream("b", "/f", "y2"),
            upstream("c", "/c", "z"),
        ]);
        assert_eq!(names(&reloaded.started), ["/f"]);
        assert_eq!(names(&reloaded.retired), ["/f"]);
        assert!(!router.route("/f").unwrap().same(&federated));
    }

    #[tokio::test]
    async fn a_reload_keeps_unchanged_upstreams_and_retires_the_others() {
        let router = Router::new(
            &[
                upstream("a", "/a", "x"),
                upstream("b", "/b", "y"),
                upstream("c", "/c", "z"),
            ],
            Vec::new(),
        );
        let (a, b) = (router.route("/a").unwrap(), router.route("/b").unwrap());
        // a unchanged, b's command changed, c removed, d added.
        let reloaded = router.reload(&[
            upstream("a", "/a", "x"),
            upstream("b", "/b", "y2"),
            upstream("d", "/d", "w"),
        ]);
        assert_eq!(reloaded.kept, ["a"]);
        assert_eq!(names(&reloaded.started), ["b", "d"]);
        assert_eq!(names(&reloaded.retired), ["b", "c"]);
        assert!(
            router.route("/a").unwrap().same(&a),
            "an unchanged upstream keeps its backend"
        );
        let new_b = router.route("/b").unwrap();
        assert!(
            !new_b.same(&b) && new_b.same_route(b.config()),
            "b is replaced on the same path"
        );
        assert!(router.route("/c").is_none() && router.route("/d").is_some());
        // A reload of the same file changes nothing.
        let again = router.reload(&[
            upstream("a", "/a", "x"),
            upstream("b", "/b", "y2"),
            upstream("d", "/d", "w"),
        ]);
        assert!(again.started.is_empty() && again.retired.is_empty(), "{:?}", again.kept);
    }
}
