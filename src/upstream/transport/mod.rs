//! The wire toward an upstream: a stdio child or a Streamable HTTP endpoint.
//!
//! [`Link`] is the one seam between sessions and transports; sessions never
//! look at bytes, transports never look at eras.

pub mod sse;
pub mod stdio;
pub mod streamable_http;

use std::sync::Arc;

use super::UpstreamError;
use super::session::UpstreamSession;
use crate::protocol::{Message, Revision};

/// How a session reaches its upstream.
pub enum Link {
    /// One child process is one session.
    Stdio(stdio::StdioLink),
    /// One `Mcp-Session-Id` on an HTTP endpoint.
    Http(Box<streamable_http::HttpLink>),
    /// One 2024-11-05 HTTP+SSE stream.
    Sse(Box<sse::SseLink>),
}

impl Link {
    /// Sends a request; what comes back is routed into `session`.
    pub(crate) async fn send_request(
        &self,
        session: &Arc<UpstreamSession>,
        upstream_id: u64,
        message: Message,
        extra_headers: &[(String, String)],
    ) -> Result<(), UpstreamError> {
        match self {
            Link::Stdio(link) => link.send(session, message).await,
            Link::Sse(link) => link.send(session, message).await,
            Link::Http(link) => {
                link.send_request(session, upstream_id, message, extra_headers);
                Ok(())
            }
        }
    }

    /// Sends a notification or a response.
    pub(crate) async fn send_other(
        &self,
        session: &Arc<UpstreamSession>,
        message: Message,
    ) -> Result<(), UpstreamError> {
        match self {
            Link::Stdio(link) => link.send(session, message).await,
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
    pub(crate) fn open_event_stream(&self, session: &Arc<UpstreamSession>) {
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
    pub(crate) fn shutdown(&self, session: &Arc<UpstreamSession>) {
        match self {
            Link::Stdio(link) => link.stop(),
            Link::Sse(link) => link.stop(),
            Link::Http(link) => link.delete_session(session),
        }
    }
}
