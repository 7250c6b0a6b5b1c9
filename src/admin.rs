//! The operators' listener (off unless `[admin] address` is set): liveness,
//! readiness, and a JSON view of every pool's members, health, load,
//! restarts and sessions. It never serves MCP.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use http::StatusCode;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::bridge::Gateway;
use crate::edge::respond::{self, Body};

/// Serves the admin endpoints on `listener` until `shutdown` resolves.
pub async fn serve(gateway: Arc<Gateway>, listener: TcpListener, shutdown: impl Future<Output = ()>) {
    let builder = auto::Builder::new(TokioExecutor::new());
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(_) => continue,
            },
            () = &mut shutdown => return,
        };
        let gateway = gateway.clone();
        let service = service_fn(move |request| {
            let gateway = gateway.clone();
            async move { Ok::<_, Infallible>(handle(&gateway, &request)) }
        });
        let connection = builder.serve_connection(TokioIo::new(stream), service).into_owned();
        tokio::spawn(async move {
            let _ = connection.await;
        });
    }
}

/// Answers one admin request.
pub fn handle(gateway: &Gateway, request: &http::Request<Incoming>) -> http::Response<Body> {
    match request.uri().path() {
        "/healthz" => respond::plain(StatusCode::OK, "ok"),
        "/readyz" if gateway.is_ready() => respond::plain(StatusCode::OK, "ready"),
        "/readyz" => respond::plain(StatusCode::SERVICE_UNAVAILABLE, "waiting for upstreams"),
        "/pools" => json_response(&pools(gateway)),
        _ => respond::plain(StatusCode::NOT_FOUND, "try /healthz, /readyz or /pools"),
    }
}

/// Every upstream's pool state.
pub fn pools(gateway: &Gateway) -> Value {
    let upstreams: Vec<Value> = gateway.router.backends().map(|b| b.snapshot()).collect();
    json!({
        "upstreams": upstreams,
        "legacy_sessions": gateway.sessions.len(),
        "suspended_calls": gateway.suspended.len(),
    })
}

fn json_response(value: &Value) -> http::Response<Body> {
    let mut response = http::Response::new(respond::full(serde_json::to_vec_pretty(value).unwrap_or_default()));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}
