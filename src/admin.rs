//! The operators' listener (off unless `[admin] address` is set): liveness,
//! readiness, a JSON view of every pool's members, health, load, restarts and
//! sessions, Prometheus metrics, a status page that reads the JSON view, and
//! the pins of pinned upstreams with their approval (`pins`, under `/pins`).
//! It never serves MCP. With `[admin] token_env`, everything but the probes
//! needs that token.
//!
//! It is guarded as the MCP listener is, by the same code
//! (`edge::http::listener`): `[limits]`' header read and idle timeouts,
//! a connection cap and a per-IP cap of its own (`[admin] max_connections`,
//! `max_connections_per_ip`), failed accepts paused rather than retried in a
//! tight loop, and the Host and Origin checks of its own address
//! (`edge::http::hosts`) on everything but the probes.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use http::StatusCode;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;

use crate::config::ListenConfig;
use crate::edge::http::hosts::Served;
use crate::edge::http::listener::{self, Activity, Gate, Listening, Refusal, Tracked};
use crate::edge::respond::{self, Body};
use crate::gateway::{Gateway, Observed};

mod pins;

/// The status page: plain HTML, CSS and a little JS, no build step.
const STATUS_PAGE: &str = include_str!("admin/status.html");

/// What every admin request is answered with.
struct Admin {
    gateway: Arc<Gateway>,
    token: Option<Arc<str>>,
    served: Served,
}

/// Serves the admin endpoints on `listener` until `shutdown` resolves.
pub(crate) async fn serve(gateway: Arc<Gateway>, listener: TcpListener, shutdown: impl Future<Output = ()>) {
    let token: Option<Arc<str>> = gateway
        .observed()
        .started()
        .admin
        .token_env
        .as_deref()
        .and_then(|name| std::env::var(name).ok())
        .filter(|token| !token.is_empty())
        .map(Arc::from);
    let local = match listener.local_addr() {
        Ok(local) => local,
        Err(error) => {
            tracing::error!(%error, "the admin listener has no address; not serving it");
            return;
        }
    };
    let observed = gateway.observed();
    let started = observed.started();
    let served = Served::new(local, &served_on_admin(&started.listen));
    let admin_config = started.admin.clone();
    let gate = Gate::new(Listening::Admin, admin_config.max_connections);
    let admin = Arc::new(Admin { gateway, token, served });
    let mut limits = admin.gateway.limits().limits.clone();
    let mut builder = listener::builder(&limits);
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = gate.accept(&listener) => accepted,
            () = &mut shutdown => return,
        };
        {
            let applied = admin.gateway.limits();
            if applied.limits != limits {
                limits = applied.limits.clone();
                builder = listener::builder(&limits);
            }
        }
        let refusal = Refusal {
            limit: admin_config.max_connections_per_ip,
            tls: None,
            within: limits.header_read_timeout.0,
        };
        let Some((stream, peer, held)) = gate.admit(accepted, refusal, |_| false) else {
            continue;
        };
        let (header_read, idle) = (limits.header_read_timeout.0, limits.idle_timeout.0);
        let activity = Arc::new(Activity::new());
        let service = {
            let (admin, activity) = (admin.clone(), activity.clone());
            service_fn(move |request: http::Request<Incoming>| {
                let in_flight = activity.enter(request.version());
                let admin = admin.clone();
                async move {
                    let response = admin.answer(&request, peer).await;
                    Ok::<_, Infallible>(response.map(|body| Tracked::new(body, in_flight)))
                }
            })
        };
        let connection = builder.serve_connection(TokioIo::new(stream), service).into_owned();
        tokio::spawn(async move {
            listener::watched(connection, &activity, header_read, idle, peer).await;
            drop(held);
        });
    }
}

/// The names the admin listener answers besides its own address: the MCP
/// listener's configured host names and `public_url`'s host (the machine's
/// names). Plain HTTP; no other origin (the status page fetches its own).
fn served_on_admin(listen: &ListenConfig) -> ListenConfig {
    ListenConfig {
        allowed_hosts: listen.allowed_hosts.clone(),
        public_url: listen.public_url.clone(),
        ..ListenConfig::default()
    }
}

impl Admin {
    /// Answers one request from `peer`: the probes as they come, the rest past
    /// the Host and Origin checks.
    async fn answer(&self, request: &http::Request<Incoming>, peer: SocketAddr) -> http::Response<Body> {
        if !matches!(request.uri().path(), "/healthz" | "/readyz")
            && let Some(rejection) = self.served.refusal(request.headers(), request.uri())
        {
            tracing::debug!(%peer, ?rejection, "admin request refused by the browser checks");
            return respond::rejected(&rejection, None);
        }
        handle(&self.gateway, self.token.as_deref(), request).await
    }
}

/// Answers one admin request; `token`, when set, guards all but the probes.
pub(crate) async fn handle(
    gateway: &Gateway,
    token: Option<&str>,
    request: &http::Request<Incoming>,
) -> http::Response<Body> {
    let gateway = gateway.observed();
    let path = request.uri().path();
    match path {
        "/healthz" => return respond::plain(StatusCode::OK, "ok"),
        "/readyz" if gateway.is_ready() => return respond::plain(StatusCode::OK, "ready"),
        "/readyz" => return respond::plain(StatusCode::SERVICE_UNAVAILABLE, "waiting for upstreams"),
        _ => {}
    }
    if let Some(token) = token
        && !presents(request, token)
    {
        let mut response = respond::plain(StatusCode::UNAUTHORIZED, "the admin endpoints need the admin token");
        response.headers_mut().insert(
            WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer realm=\"eragate-admin\""),
        );
        return response;
    }
    match path {
        "/pools" => json_response(&pools(gateway)),
        "/status.json" => json_response(&status(gateway)),
        "/metrics" => with_type(
            respond::plain(StatusCode::OK, &gateway.metrics(&pools(gateway))),
            "text/plain; version=0.0.4; charset=utf-8",
        ),
        "/" | "/status" => with_type(respond::plain(StatusCode::OK, STATUS_PAGE), "text/html; charset=utf-8"),
        _ if path == "/pins" || path.starts_with("/pins/") => {
            let (status, body) = pins::answer(gateway.pins(), request.method(), path, request.uri().query()).await;
            let mut response = json_response(&body);
            *response.status_mut() = status;
            response
        }
        _ => respond::plain(
            StatusCode::NOT_FOUND,
            "try /healthz, /readyz, /pools, /metrics, /status.json, /pins or / (the status page)",
        ),
    }
}

/// Every upstream's pool state, the ended session ids kept, the bytes held for
/// upstream messages being read, and the accepts of both listeners.
pub(crate) fn pools(gateway: Observed<'_>) -> Value {
    json!({
        "upstreams": gateway.upstreams(),
        "legacy_sessions": gateway.legacy_sessions(),
        "ended_sessions": gateway.ended_sessions(),
        "upstream_buffered_bytes": crate::router::buffered_stats(),
        "suspended_calls": gateway.suspended_calls(),
        "tasks": gateway.task_counts(),
        "accepts": {
            "mcp": accepts(Listening::Mcp),
            "admin": accepts(Listening::Admin),
        },
    })
}

/// A listener's accept attempts and failures since start.
fn accepts(listening: Listening) -> Value {
    let (attempts, failures) = listener::accept_counts(listening);
    json!({ "attempts": attempts, "failures": failures })
}

/// What the status page shows: the pools, the client revisions seen, and who answers.
pub(crate) fn status(gateway: Observed<'_>) -> Value {
    let mut view = pools(gateway);
    view["client_revisions"] = gateway.client_revisions();
    view["version"] = env!("CARGO_PKG_VERSION").into();
    view["ready"] = gateway.is_ready().into();
    view["pins"] = gateway.pins().books().map(|b| b.status()).collect();
    view["routes"] = gateway
        .routes()
        .into_iter()
        .map(|(path, upstream)| json!({"path": path, "upstream": upstream}))
        .collect();
    view
}

/// Whether `request` carries `token`: `Authorization: Bearer`, or `?token=` (a
/// browser opening the status page). Compared in constant time.
fn presents(request: &http::Request<Incoming>, token: &str) -> bool {
    let bearer = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let query = request
        .uri()
        .query()
        .and_then(|q| q.split('&').find_map(|pair| pair.strip_prefix("token=")));
    [bearer, query]
        .into_iter()
        .flatten()
        .any(|given| bool::from(given.as_bytes().ct_eq(token.as_bytes())))
}

fn json_response(value: &Value) -> http::Response<Body> {
    let response = http::Response::new(respond::full(serde_json::to_vec_pretty(value).unwrap_or_default()));
    with_type(response, "application/json")
}

fn with_type(mut response: http::Response<Body>, content_type: &'static str) -> http::Response<Body> {
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, http::HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    response
}
