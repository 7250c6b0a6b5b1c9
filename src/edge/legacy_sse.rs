//! The 2024-11-05 HTTP+SSE transport for clients that only speak it: `GET
//! <path>/sse` opens a stream whose first event names the POST endpoint;
//! every answer, notification and relayed request travels on that stream.
//!
//! The stream is the connection: its client session ends when it closes. A
//! principal holds a bounded share of streams, and a stream nobody posts to
//! is closed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use dashmap::DashMap;
use rand::Rng;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::respond;
use crate::auth::Principal;
use crate::bridge::{ClientSession, Reply, SessionLookup, reply};
use crate::policy::held::HeldQuota;
use crate::protocol::Message;
use crate::protocol::errors::Rejection;
use crate::protocol::sse::{KEEP_ALIVE, event_frame};
use crate::router::Backend;

/// Messages queued toward one SSE client before producers wait.
const OUT_QUEUE: usize = 256;

/// Open HTTP+SSE connections by the id in their endpoint URL.
pub(crate) struct SseConnections {
    connections: DashMap<String, Arc<SseConnection>>,
    /// Open streams per principal and in all: each holds a connection, a task
    /// and, once initialized, a client session.
    streams: Arc<HeldQuota>,
}

/// One client's stream.
pub(crate) struct SseConnection {
    backend: Backend,
    /// Who opened the stream: only they may post to it.
    principal: Principal,
    out: mpsc::Sender<Message>,
    /// Set by `initialize`; a std mutex, never held across `.await`.
    session: Mutex<Option<Arc<ClientSession>>>,
    /// When the stream opened, and when a message was last posted to it.
    opened: Instant,
    last_post: Mutex<Option<Instant>>,
}

/// How one stream is kept alive and bounded, as configured when it opens.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamBounds {
    /// Interval of keep-alive comments (`listen.sse_keep_alive`).
    pub(crate) keep_alive: Duration,
    /// Closed when nothing is posted within this long of opening (`limits.sse_first_post_timeout`).
    pub(crate) first_post: Duration,
    /// Then closed when nothing has been posted for this long (`sessions.idle_timeout`).
    pub(crate) idle: Duration,
    /// Streams one principal may hold (`limits.max_sse_streams_per_principal`).
    pub(crate) per_principal: usize,
    /// Whether the anonymous principal is bound by `per_principal`.
    pub(crate) binds_anonymous: bool,
    /// Streams in all (`listen.max_connections`).
    pub(crate) max: usize,
}

impl Default for SseConnections {
    fn default() -> Self {
        SseConnections {
            connections: DashMap::new(),
            streams: HeldQuota::new("HTTP+SSE streams", usize::MAX, usize::MAX),
        }
    }
}

impl SseConnections {
    /// Opens a stream for `backend`; its endpoint event points at
    /// `messages_path`. Refused past the principal's share of streams, or past
    /// the bound in all.
    pub(crate) fn open(
        self: &Arc<Self>,
        backend: Backend,
        principal: Principal,
        messages_path: &str,
        bounds: StreamBounds,
        closing: CancellationToken,
    ) -> Result<http::Response<respond::Body>, Rejection> {
        self.streams.set_bounds(bounds.per_principal, bounds.max);
        self.streams.set_binds_anonymous(bounds.binds_anonymous);
        let hold = self.streams.hold_for(&principal)?;
        let id = format!("{:032x}", rand::rng().random::<u128>());
        let (out, mut messages) = mpsc::channel(OUT_QUEUE);
        let connection = Arc::new(SseConnection {
            backend,
            principal,
            out,
            session: Mutex::new(None),
            opened: Instant::now(),
            last_post: Mutex::new(None),
        });
        self.connections.insert(id.clone(), connection.clone());
        let (tx, response) = respond::sse();
        let endpoint = format!("{messages_path}?session_id={id}");
        let connections = self.clone();
        tokio::spawn(async move {
            let _hold = hold;
            let _ = tx.send(Bytes::from(event_frame("endpoint", &endpoint))).await;
            let keep_alive = bounds.keep_alive;
            let mut ticker = tokio::time::interval_at(Instant::now() + keep_alive, keep_alive);
            let quiet = tokio::time::sleep_until(connection.quiet_until(bounds));
            tokio::pin!(quiet);
            loop {
                tokio::select! {
                    message = messages.recv() => match message {
                        Some(message) => if tx.send(respond::sse_frame(&message)).await.is_err() { break },
                        None => break,
                    },
                    _ = ticker.tick() => if tx.send(Bytes::from_static(KEEP_ALIVE)).await.is_err() { break },
                    () = &mut quiet => {
                        let until = connection.quiet_until(bounds);
                        if until <= Instant::now() {
                            tracing::debug!(principal = ?connection.principal, "an HTTP+SSE stream nobody posts to: closed");
                            break;
                        }
                        quiet.as_mut().reset(until);
                    }
                    () = tx.closed() => break,
                    () = closing.cancelled() => break,
                }
            }
            connections.close(&id);
        });
        Ok(response)
    }

    /// The open connection `id`, when it is `principal`'s: only who opened a
    /// stream may post to it.
    pub(crate) fn find(&self, id: &str, principal: &Principal) -> Option<Arc<SseConnection>> {
        self.connections
            .get(id)
            .map(|c| c.clone())
            .filter(|c| c.principal == *principal)
    }

    fn close(&self, id: &str) {
        if let Some((_, connection)) = self.connections.remove(id)
            && let Some(session) = connection.session()
        {
            session.end();
        }
    }

    /// Ends every connection's session (shutdown).
    pub(crate) fn close_all(&self) {
        let ids: Vec<String> = self.connections.iter().map(|c| c.key().clone()).collect();
        for id in ids {
            self.close(&id);
        }
    }
}

impl SseConnection {
    /// The backend the stream was opened for.
    pub(crate) fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The client session `initialize` opened on this stream, if any.
    pub(crate) fn lookup(&self) -> SessionLookup {
        match self.session() {
            Some(session) => SessionLookup::Found(session),
            None => SessionLookup::Absent,
        }
    }

    /// Sends `reply` to a message posted now down the stream; a fresh session
    /// becomes the stream's.
    pub(crate) fn deliver(&self, reply: Reply) {
        *self.last_post.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        if let Reply::Initialized(_, session) = &reply {
            self.adopt(session.clone());
        }
        let _ = reply::forward_to(reply, self.out.clone());
    }

    /// When the stream is to be closed if nothing is posted meanwhile.
    fn quiet_until(&self, bounds: StreamBounds) -> Instant {
        match *self.last_post.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(last) => last + bounds.idle,
            None => self.opened + bounds.first_post,
        }
    }

    fn session(&self) -> Option<Arc<ClientSession>> {
        self.session.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn adopt(&self, session: Arc<ClientSession>) {
        let previous = self
            .session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(session.clone());
        if let Some(previous) = previous {
            previous.end();
        }
        reply::forward_unsolicited(&session, self.out.clone());
    }
}
