//! The wire toward an upstream: a stdio child, a Streamable HTTP endpoint, or an
//! HTTP+SSE stream.
//!
//! [`Link`] is how a session sends; [`Inbound`] is how a transport reports what
//! arrives, implemented by the session. Those two are the only seam: sessions
//! never look at bytes, transports never look at eras or at the call table.

pub(crate) mod child;
pub(crate) mod http_client;
pub(crate) mod refusal;
pub(crate) mod sse;
pub(crate) mod stdio;
pub(crate) mod streamable_http;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;

use self::http_client::HttpClient;
pub(crate) use self::refusal::{buffered_stats, set_max_buffered_bytes};
pub(crate) use self::streamable_http::PostInFlight;
use crate::protocol::scan::Bounds;
use crate::protocol::{Message, Revision};
use crate::upstream::credentials::{Subject, UpstreamCredentials};
use crate::upstream::error::UpstreamError;

/// Most JSON values in one upstream message (`limits.max_upstream_values`),
/// counted by a scan before it is parsed: a 60 MiB `[0,…]` line would
/// otherwise become a gigabyte of `Value`s. One bound for the process, set
/// once by [`set_max_message_values`] when the gateway is built (the readers
/// are spawned deep inside each transport).
static MAX_MESSAGE_VALUES: AtomicUsize = AtomicUsize::new(1_000_000);

/// Sets the bound on JSON values in one upstream message.
pub(crate) fn set_max_message_values(limit: usize) {
    MAX_MESSAGE_VALUES.store(limit, Ordering::Relaxed);
}

/// The bounds an upstream message is scanned within before it is parsed.
pub(crate) fn message_bounds() -> Bounds {
    Bounds {
        values: Some(MAX_MESSAGE_VALUES.load(Ordering::Relaxed)),
        items: None,
    }
}

/// What a transport reports to the session it carries: every message that
/// arrives, the end of the connection, and the failure of one request. The
/// transport keeps only a weak reference, so a dropped session stops its readers.
pub(crate) trait Inbound: Send + Sync + 'static {
    /// One message from the upstream. `related` names the request whose
    /// response stream carried it (Streamable HTTP); stdio and HTTP+SSE have no such hint.
    fn handle_message(self: &Arc<Self>, message: Message, related: Option<u64>);
    /// The connection is gone: nothing more will arrive.
    fn handle_closed(&self, reason: &str);
    /// One request failed at the transport level (its POST did).
    fn handle_failure(&self, upstream_id: u64, error: UpstreamError);
    /// Whether a request still awaits its response (a response stream ends once it came).
    fn is_pending(&self, upstream_id: u64) -> bool;
}

/// How a session reaches its upstream.
pub(crate) enum Link {
    /// One child process is one session.
    Stdio(stdio::StdioLink),
    /// One `Mcp-Session-Id` on an HTTP endpoint.
    Http(Box<streamable_http::HttpLink>),
    /// One 2024-11-05 HTTP+SSE stream.
    Sse(Box<sse::SseLink>),
}

impl Link {
    /// Sends a request; what comes back is routed into `session`. Toward a
    /// Streamable HTTP endpoint the POST is returned for the caller to drive.
    pub(crate) async fn send_request<S: Inbound>(
        &self,
        session: &Arc<S>,
        upstream_id: u64,
        message: Message,
        extra_headers: &[(String, String)],
    ) -> Result<Option<PostInFlight>, UpstreamError> {
        match self {
            Link::Stdio(link) => link.send(message).await.map(|()| None),
            // Boxed: the old transport's POST would otherwise size every request's
            // state on every transport.
            Link::Sse(link) => Box::pin(link.send(&**session, message)).await.map(|()| None),
            Link::Http(link) => Ok(Some(link.post_request(session, upstream_id, message, extra_headers))),
        }
    }

    /// Runs a request's POST whose caller left before its answer was read
    /// (only a Streamable HTTP link returns one).
    pub(crate) fn adopt(&self, upstream_id: u64, post: PostInFlight) {
        if let Link::Http(link) = self {
            link.adopt(upstream_id, post);
        }
    }

    /// Sends a notification or a response.
    pub(crate) async fn send_other<S: Inbound>(&self, session: &S, message: Message) -> Result<(), UpstreamError> {
        match self {
            Link::Stdio(link) => link.send(message).await,
            Link::Sse(link) => link.send(session, message).await,
            Link::Http(link) => link.send_other(session, message).await,
        }
    }

    /// Records the negotiated revision (HTTP sends it as a header from now on).
    pub(crate) fn on_initialized(&self, revision: Revision) {
        if let Link::Http(link) = self {
            link.set_protocol_version(revision);
        }
    }

    /// Opens the channel for messages tied to no request (the HTTP GET stream).
    pub(crate) fn open_event_stream<S: Inbound>(&self, session: &Arc<S>) {
        if let Link::Http(link) = self {
            link.open_event_stream(session);
        }
    }

    /// Stops waiting for one request's answer at the transport level.
    /// `true` when that is the whole cancellation: a 2026-07-28 HTTP upstream
    /// learns it from its request's stream closing and takes no
    /// `notifications/cancelled` (spec §1.6); every other link also needs one.
    pub(crate) fn cancel_request(&self, upstream_id: u64) -> bool {
        match self {
            Link::Http(link) => {
                link.abort(upstream_id);
                link.is_modern()
            }
            Link::Stdio(_) | Link::Sse(_) => false,
        }
    }

    /// Releases the transport: stops the child or deletes the HTTP session.
    pub(crate) fn shutdown(&self) {
        match self {
            Link::Stdio(link) => link.stop(),
            Link::Sse(link) => link.stop(),
            Link::Http(link) => link.delete_session(),
        }
    }
}

/// Sends the request `build` makes with the upstream's credential header (for
/// `subject`, under token exchange). On a 401 to a renewable credential (an OAuth
/// token) the token is dropped and the request sent once more with a fresh one.
/// `Err` is a reason for [`UpstreamError::Unavailable`].
pub(crate) async fn send_authorized(
    client: &HttpClient,
    credentials: &UpstreamCredentials,
    subject: Option<&Subject>,
    build: impl Fn() -> Result<http::Request<Full<Bytes>>, String>,
) -> Result<http::Response<Incoming>, String> {
    let mut retried = false;
    loop {
        let mut request = build()?;
        let header = credentials
            .header(subject)
            .await
            .map_err(|e| format!("no credential for the upstream: {e}"))?;
        let sent = header.as_ref().map(|(_, value)| value.clone());
        if let Some((name, value)) = header {
            request.headers_mut().insert(name, value);
        }
        let response = client.request(request).await.map_err(|e| with_causes(&e))?;
        if response.status() != http::StatusCode::UNAUTHORIZED || retried || !credentials.can_renew() {
            return Ok(response);
        }
        if let Some(sent) = &sent {
            tracing::info!("the upstream refused eragate's access token (401); asking for a fresh one");
            credentials.refused(sent, subject);
        }
        retried = true;
    }
}

/// `error` and its causes, `: `-separated: hyper's client says only "client
/// error (Connect)"; the cause says which (refused, a certificate not trusted...).
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let next_text = next.to_string();
        if !text.contains(&next_text) {
            text.push_str(": ");
            text.push_str(&next_text);
        }
        cause = next.source();
    }
    text
}
