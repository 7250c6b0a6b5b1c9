//! The operators' listener (off unless `[admin] address` is set): liveness,
//! readiness, a JSON view of every pool's members, health, load, restarts and
//! sessions, Prometheus metrics, and a status page that reads the JSON view.
//! It never serves MCP. With `[admin] token_env`, everything but the probes
//! needs that token.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use http::StatusCode;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;

use crate::bridge::Gateway;
use crate::edge::respond::{self, Body};

/// The status page: plain HTML, CSS and a little JS, no build step.
const STATUS_PAGE: &str = include_str!("admin/status.html");

/// Serves the admin endpoints on `listener` until `shutdown` resolves.
pub async fn serve(gateway: Arc<Gateway>, listener: TcpListener, shutdown: impl Future<Output = ()>) {
    let builder = auto::Builder::new(TokioExecutor::new());
    let token: Option<Arc<str>> = gateway
        .config
        .admin
        .token_env
        .as_ref()
        .and_then(|name| std::env::var(name).ok())
        .filter(|token| !token.is_empty())
        .map(Arc::from);
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(_) => continue,
            },
            () = &mut shutdown => return,
        };
        let (gateway, token) = (gateway.clone(), token.clone());
        let service = service_fn(move |request| {
            let (gateway, token) = (gateway.clone(), token.clone());
            async move { Ok::<_, Infallible>(handle(&gateway, token.as_deref(), &request)) }
        });
        let connection = builder.serve_connection(TokioIo::new(stream), service).into_owned();
        tokio::spawn(async move {
            let _ = connection.await;
        });
    }
}

/// Answers one admin request; `token`, when set, guards all but the probes.
pub fn handle(gateway: &Gateway, token: Option<&str>, request: &http::Request<Incoming>) -> http::Response<Body> {
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
            respond::plain(StatusCode::OK, &gateway.telemetry.render(&pools(gateway))),
            "text/plain; version=0.0.4; charset=utf-8",
        ),
        "/" | "/status" => with_type(respond::plain(StatusCode::OK, STATUS_PAGE), "text/html; charset=utf-8"),
        _ => respond::plain(
            StatusCode::NOT_FOUND,
            "try /healthz, /readyz, /pools, /metrics, /status.json or / (the status page)",
        ),
    }
}

/// Every upstream's pool state, and the ended session ids kept.
pub fn pools(gateway: &Gateway) -> Value {
    let upstreams: Vec<Value> = gateway.router.backends().flat_map(|b| b.snapshots()).collect();
    json!({
        "upstreams": upstreams,
        "legacy_sessions": gateway.sessions.len(),
        "ended_sessions": gateway.sessions.ended_stats(),
        "suspended_calls": gateway.suspended.len(),
    })
}

/// What the status page shows: the pools, the client revisions seen, and who answers.
pub fn status(gateway: &Gateway) -> Value {
    let mut view = pools(gateway);
    view["client_revisions"] = gateway.telemetry.revisions();
    view["version"] = env!("CARGO_PKG_VERSION").into();
    view["ready"] = gateway.is_ready().into();
    view["routes"] = gateway
        .router
        .routes()
        .map(|(path, backend)| json!({"path": path, "upstream": backend.name()}))
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
