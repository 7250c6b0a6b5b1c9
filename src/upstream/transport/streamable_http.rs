//! Streamable HTTP upstreams: each request is a POST whose answer is JSON or an
//! SSE stream scoped to it; the GET stream carries what belongs to no request.
//! Because a POST's answer belongs to the one request it carried, this link
//! names that request for everything on it (and for a null-id error: see
//! `answering`); it never decides who else a message is for.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, HOST};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnectorBuilder;
use hyper_util::client::legacy::connect::HttpConnector;
use tokio::task::AbortHandle;

pub(crate) use super::http_client::HttpClient;
use super::refusal::{Held, IdFinder, Refused};
use super::{Inbound, send_authorized};
use crate::config::UpstreamTlsConfig;
use crate::discard::{DiscardBounds, discard};
use crate::protocol::headers::{MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION, MCP_SESSION_ID, mirrored_name};
use crate::protocol::jsonrpc::{Frame, Outcome};
use crate::protocol::sse::{SseError, SseParser};
use crate::protocol::{Id, Message, Response, Revision};
use crate::upstream::credentials::{Subject, UpstreamCredentials};
use crate::upstream::error::UpstreamError;

/// Largest JSON body or SSE event accepted from an upstream.
const MAX_UPSTREAM_MESSAGE: usize = 64 * 1024 * 1024;

/// A client for one upstream keeping at most `max_idle_per_endpoint` idle
/// connections to each of its endpoints, for [`super::http_client::IDLE_TIMEOUT`] at
/// most. When its TLS files cannot be loaded (they were checked at start; one
/// vanished since), the client trusts nothing: every `https://` connection fails
/// with the reason logged here, rather than falling back to roots the operator did not choose.
pub(crate) fn client(upstream: &str, tls: &UpstreamTlsConfig, max_idle_per_endpoint: usize) -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(Duration::from_secs(10)));
    connector.enforce_http(false);
    let config = tls.client().config().unwrap_or_else(|error| {
        tracing::error!(upstream, %error, "upstream TLS files unusable: https connections will fail");
        crate::tls::trusting_nothing()
    });
    let connector = HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .wrap_connector(connector);
    HttpClient::new(connector, max_idle_per_endpoint)
}

/// One Streamable HTTP endpoint and the client reaching it, shared by every
/// session on it (a client is a few hundred bytes; a session should not copy it).
pub(crate) struct Endpoint {
    /// The pooled client.
    pub(crate) client: HttpClient,
    /// The endpoint's URL.
    pub(crate) url: Uri,
    /// Its `Host` header, made once (`None`: the client reports the URL has no host).
    host: Option<HeaderValue>,
    /// What eragate presents to it.
    pub(crate) credentials: Arc<UpstreamCredentials>,
    /// Requests POSTed to it and not yet answered, over all its sessions.
    posts_in_flight: AtomicUsize,
}

impl Endpoint {
    /// The endpoint at `url`, reached with `client`, presented `credentials`.
    pub(crate) fn new(client: HttpClient, url: Uri, credentials: Arc<UpstreamCredentials>) -> Endpoint {
        Endpoint {
            client,
            host: super::http_client::host_header(&url),
            url,
            credentials,
            posts_in_flight: AtomicUsize::new(0),
        }
    }
}

/// A request counted in [`Endpoint::posts_in_flight`] until it is dropped.
struct PostCounted(Arc<Endpoint>);

impl PostCounted {
    /// Counts a request; also whether others were in flight already.
    fn start(endpoint: &Arc<Endpoint>) -> (Option<PostCounted>, bool) {
        let others = endpoint.posts_in_flight.fetch_add(1, Ordering::Relaxed) > 0;
        (Some(PostCounted(endpoint.clone())), others)
    }
}

impl Drop for PostCounted {
    fn drop(&mut self) {
        self.0.posts_in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A request's POST in flight, reading its answer into the session: polled by
/// the call that waits for the answer (see [`HttpLink::post_request`]).
pub(crate) type PostInFlight = Pin<Box<dyn Future<Output = ()> + Send>>;

/// One session on a Streamable HTTP endpoint.
pub(crate) struct HttpLink {
    endpoint: Arc<Endpoint>,
    /// The principal's token, when the credential is exchanged for it.
    subject: Option<Arc<Subject>>,
    /// Shared with the tasks reading this link's responses.
    state: Arc<LinkState>,
}

/// What a link's response readers need of it.
struct LinkState {
    upstream: Arc<str>,
    /// Set from the `initialize` response; std locks, never held across `.await`.
    session_id: RwLock<Option<HeaderValue>>,
    protocol_version: RwLock<Option<HeaderValue>>,
    /// The endpoint's `Host`, kept for [`LinkState::post_headers`].
    host: Option<HeaderValue>,
    /// The headers of every POST on this link (`Host`, the session's, the content
    /// types), made again when the session's values change, so that a request
    /// clones them instead of inserting each.
    post_headers: RwLock<Arc<HeaderMap>>,
    /// The POSTs running as tasks of their own (see [`HttpLink::adopt`]).
    in_flight: Mutex<HashMap<u64, AbortHandle>>,
}

impl HttpLink {
    /// A link that has not initialized yet.
    pub(crate) fn new(endpoint: Arc<Endpoint>, upstream: Arc<str>) -> HttpLink {
        let state = Arc::new(LinkState {
            upstream,
            session_id: RwLock::new(None),
            protocol_version: RwLock::new(None),
            host: endpoint.host.clone(),
            post_headers: RwLock::default(),
            in_flight: Mutex::new(HashMap::new()),
        });
        state.make_post_headers();
        HttpLink {
            endpoint,
            subject: None,
            state,
        }
    }

    /// The link of a session opened for the principal whose token is `subject`
    /// (the credential is exchanged for it).
    pub(crate) fn for_subject(mut self, subject: Option<Arc<Subject>>) -> HttpLink {
        self.subject = subject;
        self
    }

    /// A link on a session the upstream already knows by `session_id`.
    pub(crate) fn resumed(endpoint: Arc<Endpoint>, upstream: Arc<str>, session_id: &str) -> Option<HttpLink> {
        let value = HeaderValue::from_str(session_id).ok()?;
        let link = HttpLink::new(endpoint, upstream);
        *link.state.session_id.write().unwrap_or_else(|e| e.into_inner()) = Some(value);
        link.state.make_post_headers();
        Some(link)
    }

    /// The endpoint.
    pub(crate) fn url(&self) -> &Uri {
        &self.endpoint.url
    }

    /// The upstream's `Mcp-Session-Id`, once it gave one.
    pub(crate) fn session_id(&self) -> Option<String> {
        self.state
            .session_id
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }

    pub(crate) fn set_protocol_version(&self, revision: Revision) {
        *self.state.protocol_version.write().unwrap_or_else(|e| e.into_inner()) =
            Some(HeaderValue::from_static(revision.as_str()));
        self.state.make_post_headers();
    }

    /// The POST of a request and the reading of its answer into `session`, as a
    /// future for the call waiting on that answer to drive: a request costs no
    /// task of its own. A call dropped before its answer was read hands it to
    /// [`HttpLink::adopt`].
    pub(crate) fn post_request<S: Inbound>(
        &self,
        session: &Arc<S>,
        upstream_id: u64,
        message: Message,
        extra: &[(String, String)],
    ) -> PostInFlight {
        let body = Bytes::from(message.to_bytes());
        let headers = self.post_headers(&message, extra);
        let link = self.sender();
        let session_weak = Arc::downgrade(session);
        let state = self.state.clone();
        // A listen stays open for as long as its client listens: not a request in flight.
        let counted = !matches!(&message, Message::Request(r) if r.method == "subscriptions/listen");
        Box::pin(async move {
            let (_counted, others) = match counted {
                true => PostCounted::start(&link.endpoint),
                false => (None, false),
            };
            if others {
                // The upstream is busy: this request goes out once the others
                // ready now have been read, their POSTs then leave together and
                // the upstream (often on the same core) wakes once for them,
                // not once each. Alone, it goes at once (no extra turn of the runtime).
                tokio::task::yield_now().await;
            }
            let outcome = link.send(|| link.post(&headers, body.clone())).await;
            let Some(session) = session_weak.upgrade() else { return };
            match outcome {
                Ok(response) => read_response(&session, &state, upstream_id, response).await,
                Err(reason) => session.handle_failure(upstream_id, UpstreamError::unavailable(&state.upstream, reason)),
            }
        })
    }

    /// Runs `post` as a task of its own, until it ends, the request is aborted
    /// or the session deleted: a request whose caller left before its answer
    /// was read (a legacy call left to finish, or the rest of an answered
    /// stream read so its connection is reused).
    pub(crate) fn adopt(&self, upstream_id: u64, post: PostInFlight) {
        let state = self.state.clone();
        // Registered under the lock before the task can end and forget itself.
        let mut in_flight = self.state.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        let task = tokio::spawn(async move {
            post.await;
            state.forget(upstream_id);
        });
        in_flight.insert(upstream_id, task.abort_handle());
    }

    pub(crate) async fn send_other<S: Inbound>(&self, session: &S, message: Message) -> Result<(), UpstreamError> {
        let upstream = &self.state.upstream;
        let body = Bytes::from(message.to_bytes());
        let headers = self.post_headers(&message, &[]);
        let link = self.sender();
        let response = link
            .send(|| link.post(&headers, body.clone()))
            .await
            .map_err(|reason| UpstreamError::unavailable(upstream, reason))?;
        let status = response.status();
        // Whatever body there is, read so the connection can be reused.
        discard(response.into_body(), DiscardBounds::UPSTREAM).await;
        if status == StatusCode::NOT_FOUND && self.state.has_session() {
            session.handle_closed("the upstream ended the session (404)");
            return Err(UpstreamError::SessionExpired {
                upstream: upstream.to_string(),
            });
        }
        if status.is_success() {
            Ok(())
        } else {
            Err(UpstreamError::unavailable(
                upstream,
                format!("HTTP {status} for a notification"),
            ))
        }
    }

    pub(crate) fn open_event_stream<S: Inbound>(&self, session: &Arc<S>) {
        if !self.state.has_session() {
            return; // a stateless server has no stream to open
        }
        let link = self.sender();
        let session = Arc::downgrade(session);
        let upstream = self.state.upstream.clone();
        tokio::spawn(async move {
            let get = || {
                link.builder(Method::GET)
                    .header(ACCEPT, "text/event-stream")
                    .body(Full::new(Bytes::new()))
                    .map_err(|e| e.to_string())
            };
            let Ok(response) = link.send(get).await else {
                return;
            };
            let is_sse = content_type(&response).starts_with("text/event-stream");
            if response.status() != StatusCode::OK || !is_sse {
                return; // 405: the server offers no GET stream
            }
            let _ = read_sse(&session, &upstream, None, response.into_body()).await;
        });
    }

    pub(crate) fn abort(&self, upstream_id: u64) {
        if let Some(handle) = self.state.forget(upstream_id) {
            handle.abort();
        }
    }

    pub(crate) fn delete_session(&self) {
        for (_, handle) in self.state.in_flight.lock().unwrap_or_else(|e| e.into_inner()).drain() {
            handle.abort();
        }
        if !self.state.has_session() {
            return;
        }
        let link = self.sender();
        tokio::spawn(async move {
            let delete = || {
                link.builder(Method::DELETE)
                    .body(Full::new(Bytes::new()))
                    .map_err(|e| e.to_string())
            };
            let _ = tokio::time::timeout(Duration::from_secs(5), link.send(delete)).await;
        });
    }

    /// The headers of a POST of `message`. Toward a 2026-07-28 upstream the routing
    /// headers are regenerated from the body (`Mcp-Method`, `Mcp-Name`
    /// sentinel-encoded); `extra` carries headers forwarded as they came (`Mcp-Param-*`).
    fn post_headers(&self, message: &Message, extra: &[(String, String)]) -> Vec<(String, String)> {
        let modern = self.is_modern();
        // Nothing to mirror for a legacy upstream: no allocation either.
        let mut headers = Vec::with_capacity(extra.len() + if modern { 2 } else { 0 });
        if modern && let Message::Request(request) = message {
            headers.push((MCP_METHOD.to_owned(), request.method.clone()));
            if let Some(name) = mirrored_name(&request.method, request.params.as_deref()) {
                headers.push((MCP_NAME.to_owned(), name));
            }
        }
        headers.extend(extra.iter().cloned());
        headers
    }

    /// What a request's task needs to send on this link (its session headers as they are now).
    fn sender(&self) -> Sender {
        Sender {
            endpoint: self.endpoint.clone(),
            subject: self.subject.clone(),
            headers: Arc::clone(&self.state.post_headers.read().unwrap_or_else(|e| e.into_inner())),
        }
    }

    /// Whether this link speaks 2026-07-28 (its revision header is a modern one).
    pub(crate) fn is_modern(&self) -> bool {
        self.state
            .protocol_version
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .and_then(Revision::parse)
            .is_some_and(|r| r.era() == crate::protocol::Era::Modern)
    }
}

/// One request's way to the endpoint: the link's headers, taken when it was made.
/// `Mcp-Session-Id` and `MCP-Protocol-Version` as names, parsed at compile time.
const SESSION_ID_HEADER: HeaderName = HeaderName::from_static(MCP_SESSION_ID);
const PROTOCOL_VERSION_HEADER: HeaderName = HeaderName::from_static(MCP_PROTOCOL_VERSION);

struct Sender {
    endpoint: Arc<Endpoint>,
    subject: Option<Arc<Subject>>,
    /// The link's POST headers as they were when the request was made.
    headers: Arc<HeaderMap>,
}

impl Sender {
    fn builder(&self, method: Method) -> http::request::Builder {
        let mut builder = http::Request::builder().method(method).uri(self.endpoint.url.clone());
        if let Some(id) = self.headers.get(SESSION_ID_HEADER) {
            builder = builder.header(SESSION_ID_HEADER, id);
        }
        if let Some(version) = self.headers.get(PROTOCOL_VERSION_HEADER) {
            builder = builder.header(PROTOCOL_VERSION_HEADER, version);
        }
        builder
    }

    /// A POST of `body`, built in place: the names and fixed values are constants
    /// and the session's values are shared, so only the extra headers are parsed.
    fn post(&self, headers: &[(String, String)], body: Bytes) -> Result<http::Request<Full<Bytes>>, String> {
        let request_length = body.len();
        let mut request = http::Request::new(Full::new(body));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.endpoint.url.clone();
        let map = request.headers_mut();
        *map = HeaderMap::clone(&self.headers);
        // In place of the template's: no slot added to a map cloned at its length.
        map.insert(CONTENT_LENGTH, HeaderValue::from(request_length));
        if !headers.is_empty() {
            map.reserve(headers.len());
        }
        for (name, value) in headers {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| e.to_string())?;
            let value = HeaderValue::from_str(value).map_err(|e| e.to_string())?;
            map.append(name, value);
        }
        Ok(request)
    }

    /// Sends what `build` makes, with the upstream's credential.
    async fn send(
        &self,
        build: impl Fn() -> Result<http::Request<Full<Bytes>>, String>,
    ) -> Result<http::Response<Incoming>, String> {
        let endpoint = &self.endpoint;
        send_authorized(&endpoint.client, &endpoint.credentials, self.subject.as_deref(), build).await
    }
}

// === impl LinkState ===

impl LinkState {
    fn forget(&self, upstream_id: u64) -> Option<AbortHandle> {
        self.in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&upstream_id)
    }

    fn has_session(&self) -> bool {
        self.session_id.read().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    fn remember_session_id(&self, response: &http::Response<Incoming>) {
        // By its name, not the `&str`: a lookup by text parses the name first.
        if let Some(id) = response.headers().get(SESSION_ID_HEADER) {
            let mut slot = self.session_id.write().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                *slot = Some(id.clone());
                drop(slot);
                self.make_post_headers();
            }
        }
    }

    /// Makes the headers every POST on this link carries from the session's
    /// values as they are now (in the order they were always written). Called
    /// after each change of those values; the session's values are read under
    /// the headers' write lock, so the last call made sees every change before it
    /// and no older reading is stored over a newer one.
    fn make_post_headers(&self) {
        let mut post_headers = self.post_headers.write().unwrap_or_else(|e| e.into_inner());
        let read = |lock: &RwLock<Option<HeaderValue>>| lock.read().unwrap_or_else(|e| e.into_inner()).clone();
        let mut map = HeaderMap::with_capacity(6);
        if let Some(host) = &self.host {
            map.insert(HOST, host.clone());
        }
        if let Some(id) = read(&self.session_id) {
            map.insert(SESSION_ID_HEADER, id);
        }
        if let Some(version) = read(&self.protocol_version) {
            map.insert(PROTOCOL_VERSION_HEADER, version);
        }
        map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        map.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        // A placeholder each POST replaces with its own, so that setting it does not
        // move the cloned map to a larger allocation.
        map.insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
        *post_headers = Arc::new(map);
    }
}

/// Routes one POST's answer (a JSON body or an SSE stream) into `session`;
/// the request fails when the answer ends without its response.
async fn read_response<S: Inbound>(
    session: &Arc<S>,
    link: &LinkState,
    upstream_id: u64,
    response: http::Response<Incoming>,
) {
    link.remember_session_id(&response);
    if response.status() == StatusCode::NOT_FOUND && link.has_session() {
        session.handle_closed("the upstream ended the session (404)");
        return;
    }
    let upstream = &link.upstream;
    let status = response.status();
    let is_sse = content_type(&response).starts_with("text/event-stream");
    if is_sse {
        let read = read_sse(
            &Arc::downgrade(session),
            upstream,
            Some(upstream_id),
            response.into_body(),
        )
        .await;
        if let Err(reason) = read {
            session.handle_failure(upstream_id, UpstreamError::protocol(upstream, reason));
        } else if session.is_pending(upstream_id) {
            session.handle_failure(
                upstream_id,
                UpstreamError::closed(upstream, "the response stream ended without a response"),
            );
        }
        return;
    }
    let mut held = Held::default();
    let body = match read_body(response, &mut held).await {
        Ok(body) => body,
        Err(BodyError::Refused(refused)) => {
            refused.count();
            tracing::warn!(upstream = %upstream, upstream_id, reason = %refused.reason(), "upstream answer refused; its request fails now");
            return session.handle_failure(upstream_id, refused.error(upstream));
        }
        Err(BodyError::Unreadable(error)) => {
            let error = UpstreamError::unavailable(upstream, format!("reading the body: {error}"));
            return session.handle_failure(upstream_id, error);
        }
    };
    let parsed = Frame::parse_within(&body, super::message_bounds());
    if let Err(error) = &parsed
        && status.is_success()
    {
        // A JSON answer eragate will not parse (too many values, too deep): said as such.
        let refused = Refused::Unreadable(error.to_string());
        refused.count();
        tracing::warn!(upstream = %upstream, upstream_id, reason = %refused.reason(), "upstream answer refused; its request fails now");
        return session.handle_failure(upstream_id, refused.error(upstream));
    }
    match parsed {
        Ok(Frame::Single(message)) => session.handle_message(answering(message, upstream_id), Some(upstream_id)),
        Ok(Frame::Batch(items)) => {
            for message in items.into_iter().flatten() {
                session.handle_message(answering(message, upstream_id), Some(upstream_id));
            }
        }
        Err(_) => {
            let excerpt = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
            session.handle_failure(upstream_id, rejected(upstream, status, excerpt));
            return;
        }
    }
    if session.is_pending(upstream_id) {
        let excerpt = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        session.handle_failure(upstream_id, rejected(upstream, status, excerpt));
    }
}

/// Why a JSON answer's body was not read whole.
enum BodyError {
    /// Past a bound: refused.
    Refused(Refused),
    /// The connection failed.
    Unreadable(String),
}

/// A JSON answer's body, within [`MAX_UPSTREAM_MESSAGE`] and the shared bound on
/// bytes held for upstream messages (counted in `held`); a declared length past
/// either is refused before anything is read.
async fn read_body(response: http::Response<Incoming>, held: &mut Held) -> Result<Bytes, BodyError> {
    let too_large = || {
        BodyError::Refused(Refused::TooLarge {
            limit: MAX_UPSTREAM_MESSAGE,
        })
    };
    let declared = response
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    // The declared length is allocated at once below: counted from the start.
    let mut reserved = 0;
    if let Some(length) = declared {
        reserved = usize::try_from(length).map_err(|_| too_large())?;
        if reserved > MAX_UPSTREAM_MESSAGE {
            return Err(too_large());
        }
        held.fit(reserved).map_err(|e| BodyError::Refused(e.into()))?;
    }
    let mut body = response.into_body();
    let mut first: Option<Bytes> = None;
    let mut joined: Option<Vec<u8>> = None;
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Unreadable(e.to_string()))?;
        let Ok(data) = frame.into_data() else { continue };
        total = total.saturating_add(data.len());
        if total > MAX_UPSTREAM_MESSAGE {
            return Err(too_large());
        }
        held.fit(total.max(reserved))
            .map_err(|e| BodyError::Refused(e.into()))?;
        match (&mut joined, first.take()) {
            (Some(joined), _) => joined.extend_from_slice(&data),
            (None, None) => first = Some(data),
            (None, Some(earlier)) => {
                let mut buffer = Vec::with_capacity(reserved.max(total));
                buffer.extend_from_slice(&earlier);
                buffer.extend_from_slice(&data);
                joined = Some(buffer);
            }
        }
    }
    Ok(joined.map(Bytes::from).or(first).unwrap_or_default())
}

/// Routes the events of a response stream (a POST's, `related` to its request,
/// or the GET stream) into `session`. An event refused fails the request it
/// answers at once (on a POST's stream, that request); an event past the size
/// bound, or past the shared bound on bytes held, ends the stream with the reason.
async fn read_sse<S: Inbound>(
    session: &Weak<S>,
    upstream: &str,
    related: Option<u64>,
    mut body: Incoming,
) -> Result<(), String> {
    let mut parser = SseParser::new(MAX_UPSTREAM_MESSAGE);
    let mut held = Held::default();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| e.to_string())?;
        let Ok(chunk) = frame.into_data() else { continue };
        parser.push(&chunk);
        if let Err(exhausted) = held.fit(parser.held_bytes()) {
            let refused = Refused::from(exhausted);
            refused.count();
            return Err(refused.reason());
        }
        loop {
            let event = match parser.next_event() {
                Ok(Some(event)) => event,
                Ok(None) => break,
                Err(SseError::TooLarge(limit)) => {
                    let refused = Refused::TooLarge { limit };
                    refused.count();
                    return Err(refused.reason());
                }
                Err(error) => return Err(error.to_string()),
            };
            if !(event.event.is_empty() || event.event == "message") || event.data.is_empty() {
                continue;
            }
            let Some(session) = session.upgrade() else {
                return Ok(());
            };
            match Message::parse_within(event.data.as_bytes(), super::message_bounds()) {
                Ok(message) => {
                    let message = match related {
                        Some(request) => answering(message, request),
                        None => message,
                    };
                    session.handle_message(message, related)
                }
                Err(error) => {
                    let mut finder = IdFinder::default();
                    finder.feed(event.data.as_bytes());
                    let found = finder.finish();
                    let refused = Refused::Unreadable(error.to_string());
                    refused.count();
                    // On a POST's stream, a response is that request's.
                    match related.filter(|_| !found.has_method).or(found.answered()) {
                        Some(upstream_id) => {
                            tracing::warn!(upstream = %upstream, upstream_id, reason = %refused.reason(), "upstream answer refused; its request fails now");
                            session.handle_failure(upstream_id, refused.error(upstream));
                        }
                        None => {
                            tracing::warn!(upstream = %upstream, reason = %refused.reason(), "SSE event refused and skipped (no request of eragate's named)")
                        }
                    }
                }
            }
            if related.is_some_and(|id| !session.is_pending(id)) {
                // The response arrived: this stream is done. Its end follows (the
                // upstream closes it after the response); read it, so that the
                // connection carries the next request instead of being closed
                // (HTTP/1.1 cannot reuse a connection whose body was dropped unread).
                drop(session);
                discard(body, DiscardBounds::UPSTREAM).await;
                return Ok(());
            }
        }
        // Only what is left unread is held now: fewer bytes, so this cannot fail.
        let _ = held.fit(parser.held_bytes());
    }
    Ok(())
}

/// A POST's response stream belongs to the one request it carried: an error
/// with a `null` id there (a server that could not tie it to a session, such as
/// the SDKs' "missing session id" answer to a request before `initialize`)
/// answers that request.
fn answering(message: Message, request: u64) -> Message {
    match message {
        Message::Response(mut response @ Response { id: None, .. })
            if matches!(response.outcome, Outcome::Error(_)) =>
        {
            response.id = Some(Id::number(request));
            Message::Response(response)
        }
        other => other,
    }
}

fn content_type(response: &http::Response<Incoming>) -> &str {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

fn rejected(upstream: &str, status: StatusCode, excerpt: String) -> UpstreamError {
    UpstreamError::Rejected {
        upstream: upstream.to_owned(),
        status: status.as_u16(),
        excerpt,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::protocol::{ErrorCode, ErrorObject, Notification};

    #[test]
    fn a_null_id_error_on_a_posts_stream_answers_its_request() {
        let error = || ErrorObject::new(ErrorCode::INVALID_REQUEST, "Bad Request: Missing session ID");
        let cases = [
            // (what the stream carried, what the session is handed)
            (
                Response::error(None, error()).into_message(),
                Response::error(Some(Id::number(7)), error()).into_message(),
            ),
            // An error that names its request keeps its id, even another one.
            (
                Response::error(Some(Id::number(3)), error()).into_message(),
                Response::error(Some(Id::number(3)), error()).into_message(),
            ),
            // A result must name its request: a null-id one stays unanswerable.
            (
                Response::result_for(None, json!({})).into_message(),
                Response::result_for(None, json!({})).into_message(),
            ),
            (
                Message::Notification(Notification {
                    method: "notifications/progress".into(),
                    params: None,
                }),
                Message::Notification(Notification {
                    method: "notifications/progress".into(),
                    params: None,
                }),
            ),
        ];
        for (carried, handed) in cases {
            assert_eq!(answering(carried.clone(), 7), handed, "{carried:?}");
        }
    }
}
