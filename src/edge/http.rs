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
use super::legacy_sse::SseConnections;
use super::respond::{self, Body, StreamTiming};
use crate::auth::{Admitted, Denied, Presented, Principal, WellKnown};
use crate::bridge::{AttachError, Gateway, Inbound, Reply, SessionLookup, Status, batches_allowed, dispatch};
use crate::protocol::Message;
use crate::protocol::errors::Rejection;
use crate::protocol::jsonrpc::{Frame, FrameError};
use crate::protocol::scan::{self, Bounds};
use crate::router::{Backend, Endpoint};
use crate::telemetry::trace;
use crate::translate::RoutingHeaders;

/// The refusal of a batch on a session (or none) whose revision may not batch.
const BATCHES_FOR_2025_03_26: Rejection = Rejection::BatchNotAllowed {
    reason: "invalid request: JSON-RPC batches are only allowed for 2025-03-26 sessions",
};

/// The HTTP front end bound to one listener.
pub struct HttpFrontend {
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
    pub fn new(gateway: Arc<Gateway>, local: SocketAddr, tls: Option<tokio_rustls::TlsAcceptor>) -> Arc<HttpFrontend> {
        let served = hosts::Served::new(local, &gateway.config.listen);
        Arc::new(HttpFrontend {
            gateway,
            served,
            sse_connections: Arc::default(),
            tls,
        })
    }

    /// Accepts connections until `shutdown` resolves, then lets in-flight
    /// requests finish for up to `drain` before returning.
    pub async fn serve(self: Arc<Self>, listener: TcpListener, shutdown: impl Future<Output = ()>, drain: Duration) {
        listener::serve(self, listener, shutdown, drain).await;
    }

    /// Answers one HTTP request from `peer` (the connection's TCP peer: given, not
    /// put in the request's extensions, which would allocate them on every request).
    pub async fn handle(&self, request: http::Request<Incoming>, peer: SocketAddr) -> http::Response<Body> {
        let path = request.uri().path();
        match path {
            "/healthz" => return respond::plain(StatusCode::OK, "ok"),
            "/readyz" => return self.readiness(),
            _ if self.gateway.authz.as_ref().is_some_and(|a| a.owns(path)) => {
                return Box::pin(self.authorization_server(request, peer)).await;
            }
            _ if path.starts_with("/.well-known/") => return self.well_known(request.method(), path),
            _ => {}
        }
        let Some((endpoint, backend)) = self.gateway.router.endpoint(path) else {
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
                // As applied now: a reload's keep-alive reaches the next stream opened.
                let keep_alive = self.gateway.limits().listen.sse_keep_alive.0;
                return self.sse_connections.open(
                    backend,
                    principal,
                    &messages_path,
                    keep_alive,
                    self.gateway.closing.clone(),
                );
            }
            Endpoint::SseMessages if parts.method == Method::POST => {
                return Box::pin(self.sse_message(&parts, body, headers.traceparent, &admitted, &backend)).await;
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
            .auth
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
        let principal = &admitted.principal;
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
        let session = self.lookup(backend, session_id, principal).await;
        // A batch where none is allowed is refused before a byte of it is parsed.
        let bounds = self.bounds();
        if !batches_allowed(&session) && scan::is_batch(&bytes, bounds) {
            return reject(BATCHES_FOR_2025_03_26);
        }
        let reply = match Frame::parse_within(&bytes, bounds) {
            Ok(Frame::Single(message)) => {
                if let Some(refusal) = self.scope_refusal(admitted, backend, &message) {
                    return refusal;
                }
                // The client's trace header matters only to a traced gateway; the
                // future is built where it is awaited (each move of it is a copy).
                let traceparent = self.traceparent(traceparent);
                let inbound = Inbound {
                    message,
                    routing,
                    forwarded: &forwarded,
                    session,
                };
                match traceparent {
                    None => dispatch(&self.gateway, backend, inbound, admitted).await,
                    Some(header) => {
                        let dispatched = dispatch(&self.gateway, backend, inbound, admitted);
                        trace::with_header(header, dispatched).await
                    }
                }
            }
            Ok(Frame::Batch(items)) if batches_allowed(&session) => {
                let refusal = items
                    .iter()
                    .flatten()
                    .find_map(|message| self.scope_refusal(admitted, backend, message));
                if let Some(refusal) = refusal {
                    return refusal;
                }
                // Each item's span takes the request's `traceparent` header as its parent.
                let batch = Box::pin(self.batch(backend, items, routing, session, admitted));
                return match self.traceparent(traceparent) {
                    None => batch.await,
                    Some(header) => trace::with_header(header, batch).await,
                };
            }
            Ok(Frame::Batch(_)) => {
                return reject(BATCHES_FOR_2025_03_26);
            }
            Err(error) => return malformed(error),
        };
        self.render(reply).await
    }

    /// A 2025-03-26 batch: each member served on its own, the responses answered as one array.
    async fn batch(
        &self,
        backend: &Backend,
        items: Vec<Result<Message, FrameError>>,
        routing: RoutingHeaders<'_>,
        session: SessionLookup,
        admitted: &Admitted,
    ) -> http::Response<Body> {
        let SessionLookup::Found(session) = session else {
            return reject(Rejection::SessionRequired);
        };
        let mut replies = Vec::with_capacity(items.len());
        for item in items {
            let reply = match item {
                Ok(Message::Request(r)) if r.method == "initialize" => {
                    Reply::rejected(Some(r.id), Rejection::InitializeInBatch)
                }
                Ok(message) => {
                    let lookup = SessionLookup::Found(session.clone());
                    let inbound = Inbound {
                        message,
                        routing,
                        forwarded: &[],
                        session: lookup,
                    };
                    dispatch(&self.gateway, backend, inbound, admitted).await
                }
                Err(error) => Reply::Message(Status::Ok, error.to_response().into_message()),
            };
            replies.push(reply);
        }
        respond::render_batch(replies).await
    }

    /// A POST for a 2024-11-05 HTTP+SSE stream: answered on the stream, acknowledged with 202.
    async fn sse_message(
        &self,
        parts: &http::request::Parts,
        body: Incoming,
        traceparent: Option<&HeaderValue>,
        admitted: &Admitted,
        backend: &Backend,
    ) -> http::Response<Body> {
        let connection = parts
            .uri
            .query()
            .and_then(|q| q.split('&').find_map(|pair| pair.strip_prefix("session_id=")))
            .map(str::to_owned);
        let Some(connection) = connection else {
            return reject(Rejection::ConnectionIdRequired);
        };
        let bytes = match self.read_body(parts, body).await {
            Ok(bytes) => bytes,
            Err(response) => return response,
        };
        let bounds = self.bounds();
        if scan::is_batch(&bytes, bounds) {
            return reject(Rejection::BatchNotAllowed {
                reason: "invalid request: JSON-RPC batches are not supported on this transport",
            });
        }
        let message = match Frame::parse_within(&bytes, bounds) {
            Ok(Frame::Single(message)) => message,
            Ok(Frame::Batch(_)) => {
                return reject(Rejection::BatchNotAllowed {
                    reason: "invalid request: JSON-RPC batches are not supported on this transport",
                });
            }
            Err(error) => return malformed(error),
        };
        if let Some(refusal) = self.scope_refusal(admitted, backend, &message) {
            return refusal;
        }
        let posted = self.sse_connections.post(&self.gateway, &connection, admitted, message);
        let posted = match self.traceparent(traceparent) {
            None => posted.await,
            Some(header) => trace::with_header(header, posted).await,
        };
        match posted {
            Some(()) => respond::empty(StatusCode::ACCEPTED),
            None => reject(Rejection::ConnectionNotFound),
        }
    }

    /// The body, bounded by `listen.max_body_bytes` (413 past it) and `limits.body_read_timeout`.
    async fn read_body(
        &self,
        parts: &http::request::Parts,
        body: Incoming,
    ) -> Result<bytes::Bytes, http::Response<Body>> {
        let config = self.gateway.limits();
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

    /// The bounds a client's message is scanned within before it is parsed.
    fn bounds(&self) -> Bounds {
        let limits = &self.gateway.limits().limits;
        Bounds {
            values: Some(limits.max_request_values),
            items: Some(limits.max_batch_items),
        }
    }

    async fn render(&self, reply: Reply) -> http::Response<Body> {
        if let Reply::Initialized(_, session) = &reply {
            self.gateway.sessions.insert(session.clone());
        }
        respond::render(reply, self.timing()).await
    }

    /// The stream settings as applied now (a reload's apply to the next answer).
    fn timing(&self) -> StreamTiming {
        let applied = self.gateway.limits();
        StreamTiming {
            stream_after: applied.listen.stream_after.0,
            keep_alive: applied.listen.sse_keep_alive.0,
        }
    }

    async fn lookup(&self, backend: &Backend, session_id: Option<&str>, principal: &Principal) -> SessionLookup {
        match session_id {
            None => SessionLookup::Absent,
            Some(id) => match self.gateway.sessions.find(id, backend, principal).await {
                Some(session) => SessionLookup::Found(session),
                None => SessionLookup::Unknown,
            },
        }
    }

    /// The client's GET stream: what its upstream session sends outside any request.
    async fn open_stream(&self, backend: &Backend, session_id: &str, principal: &Principal) -> http::Response<Body> {
        let Some(session) = self.gateway.sessions.find(session_id, backend, principal).await else {
            return reject(Rejection::StreamSessionNotFound);
        };
        match session.attach_stream() {
            Ok(messages) => respond::stream(
                None,
                messages.into(),
                self.gateway.limits().listen.sse_keep_alive.0,
                Some(self.gateway.closing.clone()),
            ),
            Err(AttachError::AlreadyOpen) => reject(Rejection::StreamAlreadyOpen),
        }
    }

    /// DELETE: the client ends its session.
    async fn end_session(&self, backend: &Backend, session_id: &str, principal: &Principal) -> http::Response<Body> {
        if self
            .gateway
            .sessions
            .find(session_id, backend, principal)
            .await
            .is_some()
            && self.gateway.sessions.remove(session_id)
        {
            respond::empty(StatusCode::OK)
        } else {
            reject(Rejection::StreamSessionNotFound)
        }
    }

    /// The built-in authorization server's pages and endpoints (`[auth.server]`),
    /// their bodies read within the listener's bounds.
    async fn authorization_server(&self, request: http::Request<Incoming>, peer: SocketAddr) -> http::Response<Body> {
        let Some(authz) = self.gateway.authz.clone() else {
            return reject(Rejection::NoEndpoint);
        };
        let (mut parts, body) = request.into_parts();
        let bytes = match self.read_body(&parts, body).await {
            Ok(bytes) => bytes,
            Err(response) => return response,
        };
        parts.extensions.insert(crate::authz::ClientIp(peer.ip()));
        let (parts, body) = authz.handle(http::Request::from_parts(parts, bytes)).await.into_parts();
        http::Response::from_parts(parts, respond::full(body))
    }

    /// Protected resource metadata (RFC 9728) and, for 2025-03-26 clients, the
    /// authorization server's metadata; public documents, readable cross-origin.
    fn well_known(&self, method: &Method, path: &str) -> http::Response<Body> {
        let Some(document) = self.gateway.auth.well_known(path) else {
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

    /// The client's `traceparent` header, when this gateway traces (an untraced one never
    /// reads it, and its requests skip the trace wrappers).
    fn traceparent(&self, header: Option<&HeaderValue>) -> Option<String> {
        if !self.gateway.telemetry.is_tracing() {
            return None;
        }
        header?.to_str().ok().map(str::to_owned)
    }

    /// 403 `insufficient_scope` naming the scopes `message` needs and the token lacks
    /// (`[auth.oauth.scopes_for]`), if any.
    fn scope_refusal(&self, admitted: &Admitted, backend: &Backend, message: &Message) -> Option<http::Response<Body>> {
        // Without granted scopes nothing is missing: params stay unbuilt.
        admitted.scopes.as_ref()?;
        let (method, params) = match message {
            Message::Request(r) => (r.method.as_str(), r.params.as_ref()),
            Message::Notification(n) => (n.method.as_str(), n.params.as_ref()),
            Message::Response(_) => return None,
        };
        let missing = self.gateway.auth.missing_scopes(admitted, method, params);
        if missing.is_empty() {
            return None;
        }
        let path = backend.config().path.as_str();
        let mut response = reject(Rejection::InsufficientScope {
            reason: Denied::InsufficientScope.message(),
        });
        if let Ok(value) = HeaderValue::from_str(&self.gateway.auth.step_up_challenge(path, &missing)) {
            response.headers_mut().insert(WWW_AUTHENTICATE, value);
        }
        Some(response)
    }

    /// 401 (or 403, 503) with the RFC 6750 challenge naming the resource's metadata;
    /// the body is an id-less JSON-RPC error.
    fn refused(&self, denied: Denied, resource_path: &str) -> http::Response<Body> {
        let rejection = match denied {
            Denied::InsufficientScope => Rejection::InsufficientScope {
                reason: denied.message(),
            },
            Denied::Unavailable => Rejection::AuthorizationUnavailable,
            _ => Rejection::Unauthenticated {
                reason: denied.message(),
            },
        };
        let mut response = reject(rejection);
        let challenge = self.gateway.auth.challenge(denied, resource_path);
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
        if self.gateway.is_ready() {
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

/// Not JSON, or not JSON-RPC: answers the message's id when it was readable.
fn malformed(error: FrameError) -> http::Response<Body> {
    let id = error.id();
    respond::rejected(&error.rejection(), id)
}
