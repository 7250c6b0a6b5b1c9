//! The HTTP front end: one MCP path per upstream (POST, GET, DELETE), health
//! endpoints, the OAuth well-known documents, origin checks, bounded bodies,
//! and graceful shutdown.

mod body;
mod head;
pub(crate) mod hosts;
pub(crate) mod listener;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::header::{ACCESS_CONTROL_ALLOW_ORIGIN, CACHE_CONTROL, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{HeaderValue, Method, StatusCode};
use hyper::body::Incoming;
use tokio::net::TcpListener;

use self::head::{
    Repeated, RequestHeaders, accepts, accepts_json_and_sse, content_type_is_json, is_modern_or_sessionless,
};
use super::legacy_sse::{SseConnections, StreamBounds};
use super::respond::{self, Body, StreamTiming};
use crate::auth::{Admitted, Denied, Presented, Principal, WellKnown};
use crate::bridge::{AttachError, Batches, Intake, Reply, SessionLookup, Taken, take};
use crate::gateway::Gateway;
use crate::protocol::errors::Rejection;
use crate::router::{Backend, Endpoint};
use crate::translate::RoutingHeaders;

/// The HTTP front end bound to one listener.
pub(crate) struct HttpFrontend {
    gateway: Arc<Gateway>,
    /// The origins and hosts this listener serves.
    served: hosts::Served,
    /// Open 2024-11-05 HTTP+SSE client connections.
    sse_connections: Arc<SseConnections>,
    /// TLS for every connection (`[listen.tls]`), or plain HTTP.
    tls: Option<tokio_rustls::TlsAcceptor>,
}

impl HttpFrontend {
    /// A front end for `gateway`, listening at `local` (its real, bound
    /// address), over TLS when `tls` is given.
    pub(crate) fn new(
        gateway: Arc<Gateway>,
        local: SocketAddr,
        tls: Option<tokio_rustls::TlsAcceptor>,
    ) -> Arc<HttpFrontend> {
        let served = hosts::Served::new(local, gateway.edge().listen());
        Arc::new(HttpFrontend {
            gateway,
            served,
            sse_connections: Arc::default(),
            tls,
        })
    }

    /// Accepts connections until `shutdown` resolves, then lets in-flight
    /// requests finish for up to `drain` before returning.
    pub(crate) async fn serve(
        self: Arc<Self>,
        listener: TcpListener,
        shutdown: impl Future<Output = ()>,
        drain: Duration,
    ) {
        listener::serve(self, listener, shutdown, drain).await;
    }

    /// Answers one HTTP request from `peer` (the connection's TCP peer: given, not
    /// put in the request's extensions, which would allocate them on every request).
    pub(crate) async fn handle(&self, request: http::Request<Incoming>, peer: SocketAddr) -> http::Response<Body> {
        let path = request.uri().path();
        match path {
            "/healthz" => return respond::plain(StatusCode::OK, "ok"),
            "/readyz" => return self.readiness(),
            _ if self.gateway.edge().authz().as_ref().is_some_and(|a| a.owns(path)) => {
                return Box::pin(self.authorization_server(request, peer)).await;
            }
            _ if path.starts_with("/.well-known/") => return self.well_known(request.method(), path),
            _ => {}
        }
        let Some((endpoint, backend)) = self.gateway.edge().endpoint(path) else {
            return reject(Rejection::NoEndpoint);
        };
        let (parts, body) = request.into_parts();
        let path = parts.uri.path();
        let headers = RequestHeaders::read(&parts.headers);
        if !self.served.origin_allowed(headers.origin) {
            return reject(Rejection::OriginNotAllowed);
        }
        if !self.served.host_allowed(headers.origin, headers.host, &parts.uri) {
            return reject(Rejection::HostNotAllowed);
        }
        let admitted = match self.admit(&parts, headers.authorization, &backend).await {
            Ok(admitted) => admitted,
            Err(refusal) => return refusal,
        };
        let principal = admitted.principal.clone();
        match endpoint {
            Endpoint::Mcp => {}
            Endpoint::SseStream if parts.method == Method::GET => {
                let messages_path = format!("{}/messages", path.trim_end_matches('/').trim_end_matches("/sse"));
                // As applied now: a reload's bounds reach the next stream opened.
                let applied = self.gateway.edge().applied();
                let bounds = StreamBounds {
                    keep_alive: applied.listen.sse_keep_alive.0,
                    first_post: applied.limits.sse_first_post_timeout.0,
                    idle: applied.sessions.idle_timeout.0,
                    per_principal: applied.limits.sse_streams_per_principal(),
                    binds_anonymous: applied.limits.sse_streams_bind_anonymous(),
                    max: applied.listen.max_connections,
                };
                let closing = self.gateway.edge().closing().clone();
                return match self
                    .sse_connections
                    .open(backend, principal, &messages_path, bounds, closing)
                {
                    Ok(stream) => stream,
                    Err(refusal) => reject(refusal),
                };
            }
            Endpoint::SseMessages if parts.method == Method::POST => {
                return Box::pin(self.sse_message(&parts, body, headers.traceparent, &admitted)).await;
            }
            Endpoint::SseStream | Endpoint::SseMessages => return reject(Rejection::MethodNotAllowed),
        }
        // A POST reads its session id from its own head (no copy of the ~300-byte id).
        if parts.method == Method::POST {
            return self.post(&parts, body, headers, &backend, &admitted).await;
        }
        let session_id = headers.session_id;
        match parts.method {
            Method::GET | Method::DELETE if is_modern_or_sessionless(&headers.routing, session_id) => {
                reject(Rejection::MethodNotAllowed)
            }
            Method::GET if !accepts(&parts.headers, "text/event-stream") => reject(Rejection::StreamNotAcceptable),
            Method::GET => Box::pin(self.open_stream(&backend, session_id.unwrap_or_default(), &principal)).await,
            Method::DELETE => Box::pin(self.end_session(&backend, session_id.unwrap_or_default(), &principal)).await,
            _ => reject(Rejection::MethodNotAllowed),
        }
    }

    /// The admit stage: the credential of `request` checked for `backend`'s resource.
    async fn admit(
        &self,
        request: &http::request::Parts,
        authorization: Repeated<'_>,
        backend: &Backend,
    ) -> Result<Admitted, http::Response<Body>> {
        let resource_path = backend.config().path.as_str();
        let authorization = match authorization {
            Repeated::Absent => None,
            Repeated::One(value) => Some(value.as_bytes()),
            // Two credentials are no credential: refuse rather than pick one.
            Repeated::Several => Some(&b"ambiguous"[..]),
        };
        let presented = Presented {
            resource_path,
            authorization,
            query: request.uri.query(),
        };
        self.gateway
            .edge()
            .auth()
            .authenticate(presented)
            .await
            .map_err(|denied| self.refused(denied, resource_path))
    }

    async fn post(
        &self,
        parts: &http::request::Parts,
        body: Incoming,
        headers: RequestHeaders<'_>,
        backend: &Backend,
        admitted: &Admitted,
    ) -> http::Response<Body> {
        let RequestHeaders {
            accept,
            content_type,
            traceparent,
            session_id,
            routing,
            forwarded,
            ..
        } = headers;
        if !accepts_json_and_sse(accept, &parts.headers) {
            return reject(Rejection::NotAcceptable);
        }
        if !content_type_is_json(content_type) {
            return reject(Rejection::UnsupportedMediaType);
        }
        let bytes = match self.read_body(parts, body).await {
            Ok(bytes) => bytes,
            Err(response) => return response,
        };
        let intake = Intake {
            backend,
            caller: admitted,
            session: self.lookup(backend, session_id, &admitted.principal).await,
            routing,
            forwarded: &forwarded,
            traceparent: traceparent.and_then(|t| t.to_str().ok()),
            batches: Batches::OfTheSession,
        };
        match take(&self.gateway, &bytes, intake).await {
            Taken::One(_, reply) => self.render(reply).await,
            Taken::Batch(replies) => respond::render_batch(replies).await,
            Taken::Refused(id, rejection) => respond::rejected(&rejection, id),
        }
    }

    /// A POST for a 2024-11-05 HTTP+SSE stream: answered on the stream, acknowledged with 202.
    async fn sse_message(
        &self,
        parts: &http::request::Parts,
        body: Incoming,
        traceparent: Option<&HeaderValue>,
        admitted: &Admitted,
    ) -> http::Response<Body> {
        let connection = parts
            .uri
            .query()
            .and_then(|q| q.split('&').find_map(|pair| pair.strip_prefix("session_id=")));
        let Some(connection) = connection else {
            return reject(Rejection::ConnectionIdRequired);
        };
        let bytes = match self.read_body(parts, body).await {
            Ok(bytes) => bytes,
            Err(response) => return response,
        };
        let Some(connection) = self.sse_connections.find(connection, &admitted.principal) else {
            return reject(Rejection::ConnectionNotFound);
        };
        let intake = Intake {
            backend: connection.backend(),
            caller: admitted,
            session: connection.lookup(),
            routing: RoutingHeaders::None,
            forwarded: &[],
            traceparent: traceparent.and_then(|t| t.to_str().ok()),
            batches: Batches::Never,
        };
        match take(&self.gateway, &bytes, intake).await {
            // The stream carries the answers; the POST itself is only acknowledged.
            Taken::One(_, reply) => {
                connection.deliver(reply);
                respond::empty(StatusCode::ACCEPTED)
            }
            Taken::Batch(replies) => {
                replies.into_iter().for_each(|reply| connection.deliver(reply));
                respond::empty(StatusCode::ACCEPTED)
            }
            Taken::Refused(id, rejection) => respond::rejected(&rejection, id),
        }
    }

    /// The body, bounded by `listen.max_body_bytes` (413 past it) and `limits.body_read_timeout`.
    async fn read_body(
        &self,
        parts: &http::request::Parts,
        body: Incoming,
    ) -> Result<bytes::Bytes, http::Response<Body>> {
        let config = self.gateway.edge().applied();
        let limits = body::BodyLimits {
            max_bytes: config.listen.max_body_bytes,
            deadline: config.limits.body_read_timeout.0,
            linger_bytes: config.limits.linger_bytes,
            linger_for: config.limits.linger_timeout.0,
        };
        body::read(parts.version, &parts.headers, body, limits)
            .await
            .map_err(reject)
    }

    async fn render(&self, reply: Reply) -> http::Response<Body> {
        if let Reply::Initialized(_, session) = &reply {
            self.gateway.edge().sessions().insert(session.clone());
        }
        respond::render(reply, self.timing()).await
    }

    /// The stream settings as applied now (a reload's apply to the next answer).
    fn timing(&self) -> StreamTiming {
        let applied = self.gateway.edge().applied();
        StreamTiming {
            stream_after: applied.listen.stream_after.0,
            keep_alive: applied.listen.sse_keep_alive.0,
        }
    }

    async fn lookup(&self, backend: &Backend, session_id: Option<&str>, principal: &Principal) -> SessionLookup {
        match session_id {
            None => SessionLookup::Absent,
            Some(id) => match self.gateway.edge().sessions().find(id, backend, principal).await {
                Some(session) => SessionLookup::Found(session),
                None => SessionLookup::Unknown,
            },
        }
    }

    /// The client's GET stream: what its upstream session sends outside any request.
    async fn open_stream(&self, backend: &Backend, session_id: &str, principal: &Principal) -> http::Response<Body> {
        let Some(session) = self
            .gateway
            .edge()
            .sessions()
            .find(session_id, backend, principal)
            .await
        else {
            return reject(Rejection::StreamSessionNotFound);
        };
        match session.attach_stream() {
            Ok(messages) => respond::stream(
                None,
                messages.into(),
                self.gateway.edge().applied().listen.sse_keep_alive.0,
                Some(self.gateway.edge().closing().clone()),
            ),
            Err(AttachError::AlreadyOpen) => reject(Rejection::StreamAlreadyOpen),
        }
    }

    /// DELETE: the client ends its session.
    async fn end_session(&self, backend: &Backend, session_id: &str, principal: &Principal) -> http::Response<Body> {
        if self
            .gateway
            .edge()
            .sessions()
            .find(session_id, backend, principal)
            .await
            .is_some()
            && self.gateway.edge().sessions().revoke(session_id)
        {
            respond::empty(StatusCode::OK)
        } else {
            reject(Rejection::StreamSessionNotFound)
        }
    }

    /// The built-in authorization server's pages and endpoints (`[auth.server]`),
    /// their bodies read within the listener's bounds.
    async fn authorization_server(&self, request: http::Request<Incoming>, peer: SocketAddr) -> http::Response<Body> {
        let Some(authz) = self.gateway.edge().authz().cloned() else {
            return reject(Rejection::NoEndpoint);
        };
        let (mut parts, body) = request.into_parts();
        let bytes = match self.read_body(&parts, body).await {
            Ok(bytes) => bytes,
            Err(response) => return response,
        };
        parts.extensions.insert(crate::authz::ClientIp(peer.ip()));
        parts.extensions.insert(self.served.checks(&parts.headers, &parts.uri));
        let (parts, body) = authz.handle(http::Request::from_parts(parts, bytes)).await.into_parts();
        http::Response::from_parts(parts, respond::full(body))
    }

    /// Protected resource metadata (RFC 9728) and, for 2025-03-26 clients, the
    /// authorization server's metadata; public documents, readable cross-origin.
    fn well_known(&self, method: &Method, path: &str) -> http::Response<Body> {
        let Some(document) = self.gateway.edge().auth().well_known(path) else {
            return reject(Rejection::NoEndpoint);
        };
        if *method != Method::GET {
            return reject(Rejection::MethodNotAllowed);
        }
        let mut response = match document {
            WellKnown::Document(bytes) => {
                let mut response = http::Response::new(respond::full(bytes));
                response
                    .headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                response
                    .headers_mut()
                    .insert(CACHE_CONTROL, HeaderValue::from_static("max-age=300"));
                response
            }
            WellKnown::NotLoaded => reject(Rejection::AuthorizationUnavailable),
        };
        response
            .headers_mut()
            .insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
        response
    }

    /// 401 (or 403, 503) with the RFC 6750 challenge naming the resource's metadata;
    /// the body is an id-less JSON-RPC error.
    fn refused(&self, denied: Denied, resource_path: &str) -> http::Response<Body> {
        let rejection = match denied {
            Denied::InsufficientScope => Rejection::InsufficientScope {
                reason: denied.message(),
                challenge: None,
            },
            Denied::Unavailable => Rejection::AuthorizationUnavailable,
            _ => Rejection::Unauthenticated {
                reason: denied.message(),
            },
        };
        let mut response = reject(rejection);
        let challenge = self.gateway.edge().auth().challenge(denied, resource_path);
        // The challenge is built from configured URLs and fixed texts; a value that is
        // not a valid header still must not lose the status.
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response.headers_mut().insert(WWW_AUTHENTICATE, value);
        }
        if denied == Denied::Unavailable {
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        response
    }

    fn readiness(&self) -> http::Response<Body> {
        if self.gateway.edge().is_ready() {
            respond::plain(StatusCode::OK, "ready")
        } else {
            respond::plain(StatusCode::SERVICE_UNAVAILABLE, "waiting for upstreams")
        }
    }
}

/// A refusal before dispatch, answering no request.
fn reject(rejection: Rejection) -> http::Response<Body> {
    respond::rejected(&rejection, None)
}
