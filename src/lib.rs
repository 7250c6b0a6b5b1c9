//! eragate: a transparent, protocol-translating reverse proxy for the Model
//! Context Protocol, serving clients of every revision in front of upstream
//! servers of any era.
//!
//! # Layout
//!
//! The modules follow one request on its way through the gateway; each stage
//! is a room of its own, and later stages (OAuth, policy, federation, caching,
//! telemetry) enter as rooms on the same path:
//!
//! | stage | what happens | module |
//! |---|---|---|
//! | listen | HTTP/1.1 and h2 (over TLS by ALPN) on one MCP path per backend, HTTP+SSE, stdio | `edge::http`, `edge::tls`, `edge::legacy_sse`, `edge::stdio` |
//! | authenticate | bearer token (static, or an OAuth JWT checked against the issuer's keys) → principal; RFC 9728 metadata | [`auth`], `auth::resource` |
//! | intake | one body from any transport: bounds, batch or single, parse, trace | `bridge::take`, [`protocol::jsonrpc`], `protocol::errors::Rejection` |
//! | classify | era, revision, envelope, headers | [`translate::classify`], via `bridge::dispatch` |
//! | admit | one ordered stage: scopes → per-principal policy → definition pins → rate limits → quotas | `bridge::admission`, `bridge::pins` |
//! | bridge | the era conversation: modern requests, legacy sessions, MRTR, listens; a federated path asks its members | [`bridge`] |
//! | route | which backend serves the path: one upstream (`router::Pool`) or a federation (`router::federation::Federation`), told apart once at dispatch; the session a request needs | `router`, `router::Backend` |
//! | down | client era → upstream era | [`translate::down`] |
//! | session | a warm, initialized upstream session | `upstream::pool`, `upstream::session` |
//! | send | stdio, Streamable HTTP or HTTP+SSE, with eragate's own credential (never the client's) | `upstream::transport`, `upstream::credentials` |
//! | up | results, errors, input requests back in the client's era | [`translate::up`], [`translate::mrtr`], `translate::discover` |
//! | restrict | what this caller may see: `tools/list` without the tools its token may not call | [`policy`], applied by the admission's pass |
//! | respond | `application/json`, or an SSE stream scoped to the request | `bridge::reply`, `edge::respond` |
//! | observe | a per-request record opened at dispatch, closed with the answer: metrics, access log, request and upstream-call spans | [`telemetry`], carried by `bridge::dispatch` |
//!
//! `gateway` is the composition root: it builds every part from one
//! configuration, starts and stops them, and gives the admin listener and
//! reloads narrow views of itself.
//!
//! Beside the path: `fast_hash` is the hasher of the maps on the path whose
//! keys eragate makes itself; `discard` reads a body eragate does not keep (a
//! refused request's rest, an upstream's answered stream or its answer to a
//! notification) within bounds, so its HTTP/1.1 connection is reused; `tls`
//! reads certificate files for the edge and the HTTPS upstreams; [`reload`] swaps the router's upstreams when the
//! configuration changes; [`federate`] holds the pure rules of serving several
//! upstreams as one (exposed names, merged pages under a sealed cursor, one
//! handshake), which the bridge applies to its members' answers, the
//! federation's state being `router::federation`'s; `router::list_cache` keeps the lists a legacy
//! upstream gave, whose caching hints [`translate::cache`] decides;
//! [`authz`] is eragate's own authorization server (`[auth.server]`), mounted
//! by the edge under `/oauth/`, which mints the tokens [`auth`] admits and
//! publishes its keys into it.
//! [`disclosure`] is the pure tool search: an index of a catalogue's tool
//! definitions searched by a free-text task, and the meta-tools a client
//! searches, loads and calls with; the bridge's disclosure step, just before
//! admission, serves them.
//! `pins` holds definition pinning: the pure comparison of a listing with its
//! pins, the pin file shared by replicas, and each pinned upstream's pending
//! drifts, which the admission stage's pinning step (`bridge::pins`) applies to
//! list answers, calls and gets; `eragate pins seed` (`edge::seed`) lists the pinned
//! upstreams through the stdio edge in process, with no listener, to write the pins.
//!
//! Imports point down the table: the edge knows transports and the bridge's
//! API; the bridge knows eras and the router's API; only the router and below
//! know upstreams. [`protocol`] and [`translate`] are pure: no tokio, no hyper,
//! no I/O.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod admin;
pub mod admin_client;
pub mod auth;
pub mod authz;
pub mod bridge;
pub mod config;
mod discard;
pub mod disclosure;
mod edge;
mod fast_hash;
pub mod federate;
mod gateway;
pub mod health;
mod local_http;
mod periodic;
mod pins;
pub mod policy;
pub mod protocol;
pub mod reload;
mod router;
pub mod seal;
mod store;
mod tasks;
pub mod telemetry;
mod tls;
pub mod translate;
mod upstream;

use std::future::Future;
use std::time::Duration;

/// Runs the gateway for `config` until `shutdown` resolves, then drains
/// in-flight requests for up to `grace` and stops every upstream child;
/// meanwhile reloads the configuration as `reloader` says (see [`reload`]).
pub async fn run_reloading(
    mut config: config::Config,
    reloader: Option<reload::Reloader>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) -> Result<(), std::io::Error> {
    let hangups = reloader.as_ref().and_then(|_| reload::hangups());
    let certificates = match &config.listen.tls {
        Some(tls) => Some(edge::tls::Certificates::load(tls).map_err(invalid_input)?),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(config.listen.address).await?;
    let local = listener.local_addr()?;
    if config.listen.public_url.is_none() {
        // Resources are named by the URL clients use; without `public_url`, the bound address.
        let scheme = if certificates.is_some() { "https" } else { "http" };
        if local.ip().is_unspecified() && config.auth.oauth.is_some() {
            tracing::warn!(address = %local, "listening on every interface without listen.public_url: OAuth resources are named {scheme}://{local}/…; set --public-url");
        }
        config.listen.public_url = Some(format!("{scheme}://{local}"));
    }
    let admin = match config.admin.address {
        Some(address) => Some(tokio::net::TcpListener::bind(address).await?),
        None => None,
    };
    let gateway = gateway::Gateway::new(config).await?;
    gateway.warm();
    let collisions = bridge::never_collisions(&gateway).await;
    if !collisions.is_empty() {
        gateway.shutdown(grace).await;
        let named: Vec<String> = collisions.iter().map(|(path, c)| format!("{path}: {c}")).collect();
        return Err(invalid_input(format!("refusing to start: {}", named.join("; "))));
    }
    gateway.start().await.map_err(invalid_input)?;
    let (stop_admin, admin_stopped) = tokio::sync::oneshot::channel::<()>();
    if let Some(admin) = admin {
        tracing::info!(address = %admin.local_addr()?, "serving the admin endpoints");
        let stopped = async move {
            let _ = admin_stopped.await;
        };
        tokio::spawn(admin::serve(gateway.clone(), admin, stopped));
    }
    let acceptor = match &certificates {
        Some(certificates) => {
            let every = gateway.config().listen.tls.as_ref().map(|t| t.reload_interval.0);
            certificates.spawn_watch(every.unwrap_or_default(), gateway.closing().clone());
            Some(edge::tls::acceptor(certificates.clone()).map_err(invalid_input)?)
        }
        None => None,
    };
    if let Some(reloader) = reloader {
        reload::spawn(gateway.clone(), reloader, hangups, certificates.clone());
    }
    let scheme = if acceptor.is_some() { "https" } else { "http" };
    for (path, backend) in gateway.router().routes() {
        tracing::info!(address = %local, scheme, path, upstream = %backend.name(), "serving MCP");
    }
    let frontend = edge::http::HttpFrontend::new(gateway.clone(), local, acceptor);
    frontend.serve(listener, shutdown, grace).await;
    let _ = stop_admin.send(());
    gateway.shutdown(grace).await;
    tracing::info!("stopped");
    Ok(())
}

/// What `check-config` learns by starting the members of `never` federations:
/// the names two members share, reported on the path's `prefix_mode`.
pub async fn federation_collisions(config: config::Config) -> Result<Vec<config::ConfigIssue>, std::io::Error> {
    let first_on_path = |path: &str| {
        let index = config
            .upstreams
            .iter()
            .position(|u| u.path == path && u.prefix_mode.is_some())
            .unwrap_or_default();
        format!("upstreams[{index}].prefix_mode")
    };
    let paths: Vec<(String, String)> = config
        .upstreams
        .iter()
        .map(|u| (u.path.clone(), first_on_path(&u.path)))
        .collect();
    let gateway = gateway::Gateway::new(config).await?;
    let collisions = bridge::never_collisions(&gateway).await;
    gateway.shutdown(Duration::from_secs(2)).await;
    Ok(collisions
        .into_iter()
        .map(|(path, message)| config::ConfigIssue {
            path: paths
                .iter()
                .find(|(p, _)| *p == path)
                .map_or_else(|| path.clone(), |(_, key)| key.clone()),
            message,
        })
        .collect())
}

fn invalid_input(error: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, error.to_string())
}

pub use edge::seed::PinSeed;

/// Why `eragate pins seed` seeded nothing.
#[derive(Debug)]
pub enum SeedError {
    /// The configuration pins nothing to seed (or not the upstream named).
    Config(config::ConfigError),
    /// The gateway could not be built (a pin store that cannot be read, …).
    Failed(std::io::Error),
}

/// `eragate pins seed`: builds the gateway for `config` without listeners, lists each pinned
/// upstream (only `upstream`, when named) through the stdio edge in process, so the pinning
/// step trusts on first use what has no pins and writes the store, then stops every upstream
/// child. The summary says, per upstream and kind, what is pinned and any drift.
pub async fn seed_pins(config: config::Config, upstream: Option<&str>) -> Result<PinSeed, SeedError> {
    let pinned = |u: &config::UpstreamConfig| u.pins.mode != config::PinMode::Off && u.pins.store.is_some();
    let message = match upstream {
        Some(name) if !config.upstreams.iter().any(|u| u.name == name && pinned(u)) => Some(format!(
            "no upstream named {name} has [upstreams.pins] mode other than off"
        )),
        None if !config.upstreams.iter().any(pinned) => {
            Some("no upstream has [upstreams.pins] mode other than off: nothing to seed".to_owned())
        }
        _ => None,
    };
    if let Some(message) = message {
        return Err(SeedError::Config(config::ConfigError {
            issues: vec![config::ConfigIssue {
                path: "upstreams.pins".into(),
                message,
            }],
        }));
    }
    let gateway = gateway::Gateway::new(config).await.map_err(SeedError::Failed)?;
    gateway.warm();
    let seeded = edge::seed::seed(&gateway, upstream).await;
    let settled = gateway.pins().settle().await;
    gateway.shutdown(Duration::from_secs(5)).await;
    settled.map_err(|error| SeedError::Failed(std::io::Error::other(error.to_string())))?;
    seeded.map_err(|reason| SeedError::Failed(std::io::Error::other(reason)))
}

/// Serves one client on this process's stdin and stdout in front of the
/// upstream named `upstream` (the first configured one by default), until
/// stdin ends; then stops every upstream child.
pub async fn run_stdio(config: config::Config, upstream: Option<&str>) -> Result<(), std::io::Error> {
    let gateway = gateway::Gateway::new(config).await?;
    let chosen = match upstream {
        Some(name) => gateway.router().by_name(name),
        None => gateway
            .config()
            .upstreams
            .first()
            .and_then(|u| gateway.router().route(&u.path)),
    };
    let Some(chosen) = chosen else {
        return Err(std::io::Error::new(std::io::ErrorKind::NotFound, "no such upstream"));
    };
    gateway.warm();
    edge::stdio::serve(gateway.clone(), chosen, tokio::io::stdin(), tokio::io::stdout()).await;
    gateway.shutdown(Duration::from_secs(5)).await;
    Ok(())
}
