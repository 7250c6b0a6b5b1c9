//! How a request toward an upstream can fail, and the one place such a failure
//! becomes a JSON-RPC error. Every variant names the upstream; none knows the
//! client's era.

use crate::protocol::{ErrorCode, ErrorObject};

/// Why an upstream could not answer. Every variant names the upstream.
#[derive(Clone, Debug, thiserror::Error)]
pub(crate) enum UpstreamError {
    /// The process exited, the connection dropped, or the session was closed.
    #[error("upstream '{upstream}' closed the session: {reason}")]
    Closed {
        /// The upstream's configured name.
        upstream: String,
        /// What happened.
        reason: String,
    },
    /// No answer within the configured time.
    #[error("upstream '{upstream}' did not answer within {after_ms} ms")]
    Timeout {
        /// The upstream's configured name.
        upstream: String,
        /// The bound that passed.
        after_ms: u64,
    },
    /// Could not start or reach it.
    #[error("upstream '{upstream}' is unavailable: {reason}")]
    Unavailable {
        /// The upstream's configured name.
        upstream: String,
        /// What failed.
        reason: String,
    },
    /// The upstream answered over HTTP, but not with JSON-RPC (a 4xx or 5xx page).
    #[error("upstream '{upstream}' answered HTTP {status}: {excerpt}")]
    Rejected {
        /// The upstream's configured name.
        upstream: String,
        /// The HTTP status.
        status: u16,
        /// The start of the body.
        excerpt: String,
    },
    /// Too much in flight; try later.
    #[error("upstream '{upstream}' is at capacity")]
    Overloaded {
        /// The upstream's configured name.
        upstream: String,
    },
    /// The principal holds its whole share of the upstream's sessions
    /// (`pool.max_children_per_principal`): 429, -32029.
    #[error("upstream '{upstream}': this principal already holds its share of {limit} {what}")]
    ShareExhausted {
        /// The upstream's configured name.
        upstream: String,
        /// What the share is of, as refusals name it.
        what: &'static str,
        /// The share.
        limit: usize,
    },
    /// The upstream broke the protocol (bad handshake, non-JSON-RPC answer).
    #[error("upstream '{upstream}' broke the protocol: {reason}")]
    Protocol {
        /// The upstream's configured name.
        upstream: String,
        /// What it did.
        reason: String,
    },
    /// The upstream's HTTP session is gone (404); open a new one.
    #[error("upstream '{upstream}' no longer knows the session")]
    SessionExpired {
        /// The upstream's configured name.
        upstream: String,
    },
}

impl UpstreamError {
    /// The session (or its connection) ended: `reason` says how.
    pub(crate) fn closed(upstream: &str, reason: impl Into<String>) -> UpstreamError {
        UpstreamError::Closed {
            upstream: upstream.to_owned(),
            reason: reason.into(),
        }
    }

    /// The upstream broke the protocol: `reason` says how.
    pub(crate) fn protocol(upstream: &str, reason: impl Into<String>) -> UpstreamError {
        UpstreamError::Protocol {
            upstream: upstream.to_owned(),
            reason: reason.into(),
        }
    }

    /// The upstream could not be started or reached: `reason` says why.
    pub(crate) fn unavailable(upstream: &str, reason: impl Into<String>) -> UpstreamError {
        UpstreamError::Unavailable {
            upstream: upstream.to_owned(),
            reason: reason.into(),
        }
    }

    /// The JSON-RPC error a client gets for this failure.
    pub(crate) fn to_error_object(&self) -> ErrorObject {
        let upstream = match self {
            UpstreamError::Closed { upstream, .. }
            | UpstreamError::Timeout { upstream, .. }
            | UpstreamError::Unavailable { upstream, .. }
            | UpstreamError::Rejected { upstream, .. }
            | UpstreamError::Overloaded { upstream }
            | UpstreamError::ShareExhausted { upstream, .. }
            | UpstreamError::Protocol { upstream, .. }
            | UpstreamError::SessionExpired { upstream } => upstream,
        };
        let code = match self {
            UpstreamError::ShareExhausted { .. } => ErrorCode::RATE_LIMITED,
            _ => ErrorCode::INTERNAL_ERROR,
        };
        ErrorObject::new(code, self.to_string()).with_data(serde_json::json!({ "upstream": upstream }))
    }

    /// Whether the failure says the member is unwell (for passive health):
    /// unreachable, broken, slow or failing with a 5xx, not merely busy or cancelled.
    pub(crate) fn is_member_fault(&self) -> bool {
        match self {
            UpstreamError::Unavailable { .. } | UpstreamError::Timeout { .. } | UpstreamError::Protocol { .. } => true,
            UpstreamError::Rejected { status, .. } => *status >= 500,
            UpstreamError::Closed { .. }
            | UpstreamError::Overloaded { .. }
            | UpstreamError::ShareExhausted { .. }
            | UpstreamError::SessionExpired { .. } => false,
        }
    }

    /// Whether the client should be told to come back later (HTTP 503).
    pub(crate) fn is_overload(&self) -> bool {
        matches!(self, UpstreamError::Overloaded { .. })
    }
}
