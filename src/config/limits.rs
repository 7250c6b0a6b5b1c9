//! `[limits]`: the bounds that keep one client from holding what others need:
//! connection timeouts, per-IP connections, JSON shape bounds checked before
//! parsing, the bytes held for upstream messages, the size of what a session id
//! carries, the ended-id set, and open listens, HTTP+SSE streams and requests in
//! flight per principal.

use std::time::Duration;

use serde::Deserialize;

use super::ConfigIssue;
use super::duration::Humantime;

/// `[limits]`
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct LimitsConfig {
    /// How long a client may take to send a request's headers; an HTTP/1.1
    /// connection idle between requests is closed after it too. Default 10 s.
    pub(crate) header_read_timeout: Humantime,
    /// How long a client may take to send a request's body (408 past it). Default 30 s.
    pub(crate) body_read_timeout: Humantime,
    /// A connection with no request in flight this long is closed (open streams
    /// count as in flight). Default 60 s.
    pub(crate) idle_timeout: Humantime,
    /// Interval of HTTP/2 keep-alive pings. Default 30 s.
    pub(crate) h2_keep_alive_interval: Humantime,
    /// An HTTP/2 connection whose ping is unanswered this long is closed. Default 20 s.
    pub(crate) h2_keep_alive_timeout: Humantime,
    /// Most concurrent connections from one IP address. Default 1000.
    pub(crate) max_connections_per_ip: usize,
    /// Most messages in one JSON-RPC batch (2025-03-26 sessions; others may not
    /// batch at all). Default 100.
    pub(crate) max_batch_items: usize,
    /// Most JSON values (containers and scalars) in one client message or
    /// batch, counted before it is parsed (413 past it). Default 100 000.
    pub(crate) max_request_values: usize,
    /// Most JSON values in one upstream message (a stdio line, an HTTP body,
    /// an SSE event), counted before it is parsed. Default 1 000 000.
    pub(crate) max_upstream_values: usize,
    /// Most bytes held at once for upstream messages being read (stdio lines,
    /// HTTP bodies, SSE events), across every session; the first 64 KiB of each
    /// message are not counted. A message that would pass it is refused and the
    /// request it answers fails at once. Default 128 MiB (two messages of the
    /// 64 MiB a message may hold).
    pub(crate) max_upstream_buffered_bytes: usize,
    /// Most bytes of `capabilities` plus `clientInfo` a legacy client's
    /// `initialize` may carry (sealed into its session id); past it -32602. Default 8 KiB.
    pub(crate) max_client_claims_bytes: usize,
    /// Most ended session ids remembered (as fixed-size digests) until their
    /// expiry; past it the one expiring soonest is forgotten. Default 100 000.
    pub(crate) max_ended_sessions: usize,
    /// After a 413, at most this many bytes of the rest of the body are read
    /// and discarded so an HTTP/1.1 client still reads the answer. Default 64 MiB.
    pub(crate) linger_bytes: u64,
    /// ... for at most this long. Default 5 s.
    pub(crate) linger_timeout: Humantime,
    /// Most open `subscriptions/listen` streams of one principal (429 past it). Default 16.
    pub(crate) max_listens_per_principal: usize,
    /// Most open `subscriptions/listen` streams in all. Default 1000.
    pub(crate) max_listens: usize,
    /// Most requests of one principal in flight at once, across upstreams
    /// (429 / -32029 past it; listens are counted by their own quota). Default 256
    /// for each authenticated principal, and none for the anonymous principal of a
    /// gateway without authentication (nobody else to protect it from: the
    /// gateway's own bounds apply) unless set here, when it binds that one too.
    pub(crate) max_in_flight_per_principal: Option<usize>,
    /// Most open 2024-11-05 HTTP+SSE streams of one principal (429 past it);
    /// every stream also counts against `listen.max_connections`. Default 16
    /// for each authenticated principal, and none for the anonymous principal of
    /// a gateway without authentication unless set here.
    pub(crate) max_sse_streams_per_principal: Option<usize>,
    /// An HTTP+SSE stream on which no message is posted within this long of
    /// opening is closed; once one is, the stream is closed when none has been
    /// posted for `sessions.idle_timeout`. Default 30 s.
    pub(crate) sse_first_post_timeout: Humantime,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            header_read_timeout: Humantime(Duration::from_secs(10)),
            body_read_timeout: Humantime(Duration::from_secs(30)),
            idle_timeout: Humantime(Duration::from_secs(60)),
            h2_keep_alive_interval: Humantime(Duration::from_secs(30)),
            h2_keep_alive_timeout: Humantime(Duration::from_secs(20)),
            max_connections_per_ip: 1000,
            max_batch_items: 100,
            max_request_values: 100_000,
            max_upstream_values: 1_000_000,
            max_upstream_buffered_bytes: 128 * 1024 * 1024,
            max_client_claims_bytes: 8 * 1024,
            max_ended_sessions: 100_000,
            linger_bytes: 64 * 1024 * 1024,
            linger_timeout: Humantime(Duration::from_secs(5)),
            max_listens_per_principal: 16,
            max_listens: 1000,
            max_in_flight_per_principal: None,
            max_sse_streams_per_principal: None,
            sse_first_post_timeout: Humantime(Duration::from_secs(30)),
        }
    }
}

impl LimitsConfig {
    /// Requests in flight allowed to one principal (`max_in_flight_per_principal`, default 256).
    pub(crate) fn in_flight_per_principal(&self) -> usize {
        self.max_in_flight_per_principal.unwrap_or(256)
    }

    /// Whether the in-flight quota binds the anonymous principal too (only when set).
    pub(crate) fn in_flight_binds_anonymous(&self) -> bool {
        self.max_in_flight_per_principal.is_some()
    }

    /// HTTP+SSE streams allowed to one principal (`max_sse_streams_per_principal`, default 16).
    pub(crate) fn sse_streams_per_principal(&self) -> usize {
        self.max_sse_streams_per_principal.unwrap_or(16)
    }

    /// Whether the HTTP+SSE stream quota binds the anonymous principal too (only when set).
    pub(crate) fn sse_streams_bind_anonymous(&self) -> bool {
        self.max_sse_streams_per_principal.is_some()
    }

    /// Bounds that must not be zero.
    pub(super) fn issues(&self) -> Vec<ConfigIssue> {
        let counts = [
            ("max_connections_per_ip", self.max_connections_per_ip),
            ("max_batch_items", self.max_batch_items),
            ("max_request_values", self.max_request_values),
            ("max_upstream_values", self.max_upstream_values),
            ("max_upstream_buffered_bytes", self.max_upstream_buffered_bytes),
            ("max_client_claims_bytes", self.max_client_claims_bytes),
            ("max_ended_sessions", self.max_ended_sessions),
            ("max_listens_per_principal", self.max_listens_per_principal),
            ("max_listens", self.max_listens),
            ("max_in_flight_per_principal", self.in_flight_per_principal()),
            ("max_sse_streams_per_principal", self.sse_streams_per_principal()),
        ];
        let durations = [
            ("header_read_timeout", self.header_read_timeout),
            ("body_read_timeout", self.body_read_timeout),
            ("idle_timeout", self.idle_timeout),
            ("h2_keep_alive_interval", self.h2_keep_alive_interval),
            ("h2_keep_alive_timeout", self.h2_keep_alive_timeout),
            ("sse_first_post_timeout", self.sse_first_post_timeout),
        ];
        let zero_counts = counts.into_iter().filter(|(_, n)| *n == 0).map(|(key, _)| key);
        let zero_durations = durations.into_iter().filter(|(_, d)| d.0.is_zero()).map(|(key, _)| key);
        zero_counts
            .chain(zero_durations)
            .map(|key| ConfigIssue {
                path: format!("limits.{key}"),
                message: "must be greater than 0".into(),
            })
            .collect()
    }
}
